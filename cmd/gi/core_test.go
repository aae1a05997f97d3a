package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// TestPsCore lists a core the kernel wrote of a crashed target: the table
// names the core, its process and the signal; the JSON document follows
// the schema and holds the target's parked goroutines with their waits;
// --stacks is the runtime's format; --trace and a wrong --binary are one
// clear line each, and --binary without a core is refused.
func TestPsCore(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.StartToCrash(t, bin, "-park", "100", "-depth", "20")
	path := p.Crash(t)

	out := giOK(t, "ps", path)
	if !regexp.MustCompile(`pid ` + strconv.Itoa(p.Pid) + `, go1\.\d+.*, from core ` + regexp.QuoteMeta(path) + ` \(psstates.*, SIGABRT, written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)`).MatchString(out) {
		t.Errorf("no footer naming the core:\n%s", out)
	}
	if n := strings.Count(out, "main.parked"); n != 100 {
		t.Errorf("%d rows in main.parked, want the target's 100", n)
	}
	doc := giOK(t, "ps", "--json", path)
	validate(t, compileSchema(t, "ps"), "gi ps --json <core>", doc)
	var ps struct {
		PID        int    `json:"pid"`
		Origin     string `json:"origin"`
		Goroutines []struct {
			Function string `json:"function"`
			WaitNS   int64  `json:"wait_ns"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		t.Fatal(err)
	}
	waited := 0
	for _, g := range ps.Goroutines {
		if g.Function == "main.parked" && g.WaitNS > 0 {
			waited++
		}
	}
	if ps.PID != p.Pid || waited < 90 || !strings.Contains(ps.Origin, path) {
		t.Errorf("pid %d, origin %q, %d parked goroutines with a wait; want pid %d, the core, about 100", ps.PID, ps.Origin, waited, p.Pid)
	}
	if stacks := giOK(t, "ps", "--stacks", path); !strings.Contains(stacks, "goroutine 1 [select (no cases)]:\nmain.main(...)") {
		t.Errorf("--stacks is not the runtime's format:\n%.600s", stacks)
	}

	_, stderr, code := runGi(t, "ps", "--trace", "1s", path)
	checkOneLineError(t, stderr, code, `--trace measures a live process; .* is a core file`)
	_, stderr, code = runGi(t, "ps", "--binary", buildGi(t), path)
	checkOneLineError(t, stderr, code, `not the executable the core's process ran`)
	_, stderr, code = runGi(t, "ps", "--binary", bin, "1")
	checkOneLineError(t, stderr, code, `--binary goes with a core file`)

	// The executable moved: named, and given with --binary.
	moved := filepath.Join(t.TempDir(), "server")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, data, 0o755); err != nil {
		t.Fatal(err)
	}
	q := targets.StartToCrash(t, moved, "-park", "10", "-depth", "5")
	movedCore := q.Crash(t)
	if err := os.Remove(moved); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runGi(t, "ps", movedCore)
	checkOneLineError(t, stderr, code, `executable .*server.* is not where the core says.*give it: --binary PATH`)
	if out := giOK(t, "ps", "--binary", bin, movedCore); strings.Count(out, "main.parked") != 10 {
		t.Errorf("with --binary: %d rows in main.parked, want 10:\n%s", strings.Count(out, "main.parked"), out)
	}
}

// TestCrashCoreRunningGoroutine lists the kernel's core of a target
// killed by SIGQUIT under GOTRACEBACK=crash, the signal sent to a thread
// running a spinning goroutine: the runtime's handler ran on that thread
// when the core was written, in nested signal frames (its dump's own
// raise), and gi finds where the goroutine was in the signal's frame,
// as the runtime's dump does: main.spin, for every goroutine the dump
// shows running in it.
func TestCrashCoreRunningGoroutine(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	compared := 0
	for try := 0; try < 6 && compared < 3; try++ {
		c := targets.StartToCrash(t, bin, "-park", "20")
		tid := runningThread(c.Pid)
		if tid == 0 {
			c.Crash(t)
			continue
		}
		core := c.CrashThread(t, tid)
		// The dump's goroutines running main.spin.
		want := map[string]bool{}
		for _, block := range strings.Split(c.Dump(t), "\n\n") {
			m := regexp.MustCompile(`^goroutine (\d+) .*\[running\]:\n(main\.spin|.*\n.*main\.spin)`).FindStringSubmatch(strings.TrimSpace(block))
			if m != nil {
				want[m[1]] = true
			}
		}
		if len(want) == 0 {
			continue
		}
		out := giOK(t, "ps", "--stacks", "--binary", bin, core)
		for goid := range want {
			m := regexp.MustCompile(`(?m)^goroutine ` + goid + ` \[running\]:\n(.*\n.*\n)`).FindStringSubmatch(out)
			if m == nil || !strings.Contains(m[1], "main.spin") {
				t.Errorf("try %d: goroutine %s runs main.spin in the runtime's dump; gi lists it:\n%v", try, goid, m)
			}
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no crash left a goroutine running main.spin in the runtime's dump")
	}
}

// runningThread returns a thread of process pid the kernel has running
// (state R), 0 if none.
func runningThread(pid int) int {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
			if err != nil {
				continue
			}
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i+1:]), " R") {
				tid, _ := strconv.Atoi(task.Name())
				return tid
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}
