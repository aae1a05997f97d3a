package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corefile "github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
)

// leakyTruth returns the goroutines testdata/leaky says it leaked, and
// how many it parked.
func leakyTruth(t *testing.T, p *targets.Process) (leaked map[uint64]bool, parked int) {
	t.Helper()
	leaked = map[uint64]bool{}
	for _, line := range p.Lines() {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "G" {
			parked++
			if f[3] == "leaked" {
				id, _ := strconv.ParseUint(f[1], 10, 64)
				leaked[id] = true
			}
		}
	}
	if len(leaked) == 0 {
		t.Fatal("the target reported no leaked goroutine")
	}
	return leaked, parked
}

// leakedOf returns the goroutines a gi ps --leaks --json document marks
// leaked, checking its summary agrees with the marks.
func leakedOf(t *testing.T, doc string) map[uint64]bool {
	t.Helper()
	var ps struct {
		Leaks *struct {
			Leaked    int    `json:"leaked"`
			Undecided string `json:"undecided"`
			Sites     []struct {
				Count int      `json:"count"`
				Goids []uint64 `json:"goids"`
			} `json:"sites"`
		} `json:"leaks"`
		Goroutines []struct {
			Goid   uint64 `json:"goid"`
			Leaked bool   `json:"leaked"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		t.Fatalf("%v: %.300s", err, doc)
	}
	if ps.Leaks == nil || ps.Leaks.Undecided != "" {
		t.Fatalf("no decided leaks summary: %+v", ps.Leaks)
	}
	out := map[uint64]bool{}
	for _, g := range ps.Goroutines {
		if g.Leaked {
			out[g.Goid] = true
		}
	}
	sited := 0
	for _, s := range ps.Leaks.Sites {
		sited += s.Count
		for _, id := range s.Goids {
			if !out[id] {
				t.Errorf("site lists goroutine %d, not marked leaked", id)
			}
		}
	}
	if ps.Leaks.Leaked != len(out) || sited != len(out) {
		t.Errorf("summary says %d leaked, sites %d, %d goroutines marked", ps.Leaks.Leaked, sited, len(out))
	}
	return out
}

func sameSet(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestPsLeaks runs gi ps --leaks on testdata/leaky: the JSON document
// (checked against the schema) marks exactly the goroutines the target
// leaked, the table marks as many LEAKED and counts them by creation
// site, --objects marks their objects unreachable, and a core written by
// --core in the same stop gives the same verdict read back; the target
// runs on; --leaks with --trace is refused in one line.
func TestPsLeaks(t *testing.T) {
	requirePrivilege(t)
	// 24 MiB of heap that holds pointers: read from the frozen copy into
	// a buffer of gi's own (hugemem.Lazy), not a small heap's.
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "3", "-ballast-mb", "24")
	truth, _ := leakyTruth(t, p)
	pid := strconv.Itoa(p.Pid)

	core := filepath.Join(t.TempDir(), "core.leaky")
	doc := giOK(t, "ps", "--leaks", "--json", "--core", core, pid)
	validate(t, compileSchema(t, "ps"), "gi ps --leaks --json", doc)
	if got := leakedOf(t, doc); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	// The core holds the vector registers of each thread not in a
	// system call, which the walk scanned (gi ps --leaks reads them in
	// the stop).
	if c, err := corefile.Open(core, ""); err != nil {
		t.Error(err)
	} else {
		for _, th := range c.Threads {
			if th.Regs.Syscall < 0 && len(th.Vector) < 512 {
				t.Errorf("thread %d in gi's core: %d bytes of vector registers", th.TID, len(th.Vector))
			}
		}
		c.Close()
	}
	back := giOK(t, "ps", "--leaks", "--json", core)
	if got := leakedOf(t, back); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json <its core> marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}

	// Live, without --core: read from a copy the target made of itself
	// in the stop, reaped after.
	frozen := giOK(t, "ps", "--leaks", "--json", pid)
	validate(t, compileSchema(t, "ps"), "gi ps --leaks --json", frozen)
	var fdoc struct {
		Leaks struct {
			Frozen      bool  `json:"frozen"`
			ReapPauseNS int64 `json:"reap_pause_ns"`
			HeapBytes   int64 `json:"heap_bytes"`
		} `json:"leaks"`
	}
	if err := json.Unmarshal([]byte(frozen), &fdoc); err != nil {
		t.Fatal(err)
	}
	if fdoc.Leaks.HeapBytes < 24<<20 {
		t.Errorf("%d bytes of heap copied, want the target's 24 MiB of ballast and more", fdoc.Leaks.HeapBytes)
	}
	if !fdoc.Leaks.Frozen || fdoc.Leaks.ReapPauseNS <= 0 {
		t.Errorf("gi ps --leaks of a live target: frozen %v, reap pause %dns; want a frozen copy, reaped", fdoc.Leaks.Frozen, fdoc.Leaks.ReapPauseNS)
	}
	if got := leakedOf(t, frozen); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json (frozen) marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children after gi ps --leaks: %v", kids)
	}

	table := giOK(t, "ps", "--leaks", pid)
	if n := strings.Count(table, " LEAKED "); n != len(truth) {
		t.Errorf("%d rows LEAKED, want %d:\n%s", n, len(truth), table)
	}
	want := regexp.MustCompile(`(?m)^leaks: ` + strconv.Itoa(len(truth)) + ` leaked goroutines \(\d+ blocked on channels and sync objects were judged\)\n  ` +
		strconv.Itoa(len(truth)) + ` leaked goroutines created at main\.spawn\.func1 \(leaky/main\.go:\d+\)\nleaks: stacks precise \(the runtime's stack maps\), heap precise \(the runtime's [a-z ,]+\), globals precise \(the module's pointer masks\); heap [0-9.]+ MB read in \S+ from a copy the process made of itself in the stop, after it resumed; the copy reaped in a second stop of \S+; walked in`)
	if !want.MatchString(table) {
		t.Errorf("no leaks footer matching %s:\n%s", want, table)
	}

	objects := giOK(t, "ps", "--leaks", "--objects", pid)
	if n := strings.Count(objects, "unreachable"); n < len(truth)/2 {
		t.Errorf("%d objects marked unreachable:\n%s", n, objects)
	}
	if err := targets.NotStopped(p.Pid); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runGi(t, "ps", "--leaks", "--trace", "1s", pid)
	checkOneLineError(t, stderr, code, `--leaks and --trace: one at a time`)
}

// TestPsLeaksKernelCore: the kernel's core of testdata/leaky killed with
// GOTRACEBACK=crash gives gi ps --leaks the same verdict as the target's
// own account, default and stripped builds.
func TestPsLeaksKernelCore(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {Stripped: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.StartToCrash(t, targets.Build(t, "leaky", opts), "-n", "3")
			truth, _ := leakyTruth(t, p.Process)
			path := p.Crash(t)
			doc := giOK(t, "ps", "--leaks", "--json", path)
			validate(t, compileSchema(t, "ps"), "gi ps --leaks --json <kernel core>", doc)
			if got := leakedOf(t, doc); !sameSet(got, truth) {
				t.Errorf("gi ps --leaks of the kernel's core marks %v leaked, the target leaked %v", keys(got), keys(truth))
			}
		})
	}
}

// TestLeaksVectorRegisters parks a goroutine on a channel whose only
// reference outside its own stack is a vector register of a running
// thread (testdata/vecspin -chan): it can still be woken, and gi ps
// --leaks must judge it and not report it (without the vector registers
// read in the stop, it would).
func TestLeaksVectorRegisters(t *testing.T) {
	requirePrivilege(t)
	t.Setenv("GODEBUG", "asyncpreemptoff=1") // no signal handler in the way (TestReadVector)
	p := targets.Start(t, targets.Build(t, "vecspin", targets.BuildOptions{}), "-chan")
	core := filepath.Join(t.TempDir(), "core.vecspin")
	// Live, then from the core written in that stop, which holds the
	// spinning thread's vector registers.
	for _, args := range [][]string{{"--core", core, strconv.Itoa(p.Pid)}, {core}} {
		doc := giOK(t, append([]string{"ps", "--leaks", "--json"}, args...)...)
		var d struct {
			Leaks struct {
				Candidates int    `json:"candidates"`
				Leaked     int    `json:"leaked"`
				Undecided  string `json:"undecided"`
			} `json:"leaks"`
		}
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Leaks.Candidates != 1 || d.Leaks.Leaked != 0 || d.Leaks.Undecided != "" || len(leakedOf(t, doc)) != 0 {
			t.Errorf("gi ps --leaks %v: %+v, leaked %v; want main.waiter judged and kept", args, d.Leaks, leakedOf(t, doc))
		}
	}
	targets.CheckNotStopped(t, p.Pid)
}

// TestPsLeaksGrowthBound reads a target that keeps writing 256 MiB while
// gi reads the copy it made of itself (each page it writes is then
// copied, once): with --leaks-max-growth 1 the copy is given up, the walk
// undecided and saying why (only the goroutines leaked by definition are
// reported), the target unharmed and without children;
// with the default bound (1 GiB), the exact leaked set.
func TestPsLeaksGrowthBound(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2", "-ballast-mb", "64", "-churn-mb", "256")
	truth, _ := leakyTruth(t, p)
	pid := strconv.Itoa(p.Pid)
	var d struct {
		Leaks struct {
			Undecided string `json:"undecided"`
		} `json:"leaks"`
	}
	bounded := giOK(t, "ps", "--leaks", "--json", "--leaks-max-growth", "1", pid)
	if err := json.Unmarshal([]byte(bounded), &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Leaks.Undecided, "past the bound of 1 MiB") {
		t.Errorf("gi ps --leaks --leaks-max-growth 1: undecided %q; want the bound hit", d.Leaks.Undecided)
	}
	targets.CheckNotStopped(t, p.Pid)
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children after the copy was given up: %v", kids)
	}
	for _, bad := range []string{"0", "-2", "1073741825"} {
		_, stderr, code := runGi(t, "ps", "--leaks", "--leaks-max-growth", bad, pid)
		checkOneLineError(t, stderr, code, `--leaks-max-growth: `+bad+` MiB; want a bound from 1 to 1073741824, or -1 for none`)
	}
	whole := giOK(t, "ps", "--leaks", "--json", pid)
	if got := leakedOf(t, whole); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	targets.CheckNotStopped(t, p.Pid)
}

// memcgRoot is where the cgroup v1 memory controller is mounted here.
const memcgRoot = "/sys/fs/cgroup/memory"

// newMemcg creates a cgroup v1 memory cgroup for the test, removed when
// it ends (its processes moved back to the test's own cgroup first).
func newMemcg(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(memcgRoot, "memory.limit_in_bytes")); err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatalf("no cgroup v1 memory controller at %s: %v", memcgRoot, err)
		}
		t.Skipf("no cgroup v1 memory controller at %s: %v", memcgRoot, err)
	}
	home := memcgRoot
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "memory") {
				home = filepath.Join(memcgRoot, f[2])
			}
		}
	}
	dir := filepath.Join(memcgRoot, fmt.Sprintf("gi-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 100; i++ {
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			for _, pid := range strings.Fields(string(b)) {
				os.WriteFile(filepath.Join(home, "cgroup.procs"), []byte(pid), 0) // a zombie cannot move: it goes
			}
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("cannot remove the test's memory cgroup %s", dir)
	})
	return dir
}

// memcgValue reads a number from file of memory cgroup dir: the file's
// first field, or, with key, the value on the line that key starts.
func memcgValue(t *testing.T, dir, file, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 1 && key == "" || len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s/%s: no %q in %q", dir, file, key, b)
	return 0
}

// startInMemcg runs bin with args in memory cgroup dir from its first
// instruction (a process moved in later leaves its pages charged where
// they were).
func startInMemcg(t *testing.T, dir, bin string, args ...string) *targets.Process {
	t.Helper()
	return targets.Start(t, "/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, bin}, args...)...)
}

// settledUsage waits until the usage of memory cgroup dir stops moving
// (the target's heap built), and returns it.
func settledUsage(t *testing.T, dir string) int64 {
	t.Helper()
	last := memcgValue(t, dir, "memory.usage_in_bytes", "")
	for i := 0; i < 50; i++ {
		time.Sleep(200 * time.Millisecond)
		now := memcgValue(t, dir, "memory.usage_in_bytes", "")
		if d := now - last; d < 4<<20 && d > -4<<20 {
			return now
		}
		last = now
	}
	return last
}

// TestPsLeaksMemoryLimit runs gi ps --leaks on a target that keeps
// rewriting a few hundred MiB beside a heap that holds pointers, in a
// cgroup v1 memory cgroup limited to 120 MiB above its usage: the copy
// the process makes of itself would cost it every page it rewrites. gi
// must not spend that headroom: the target is alive after, the cgroup
// counted no OOM kill and no charge past its limit (memory.failcnt), and
// gi decided, saying why it copied in the stop where it did. With 160
// MiB of heap, too much for the room left, gi does not freeze the
// process; with 32 MiB it does, and the copy, growing fast, is given up
// at half the room left and the heap copied in a second stop.
func TestPsLeaksMemoryLimit(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "leaky", targets.BuildOptions{})
	for _, c := range []struct{ name, ballast, churn, inStop string }{
		{"no room to freeze", "160", "256", "too little for a copy"},
		{"writes more than the room", "32", "384", "too little for a copy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newMemcg(t)
			p := startInMemcg(t, dir, bin, "-n", "2", "-ballast-mb", c.ballast, "-churn-mb", c.churn)
			truth, _ := leakyTruth(t, p)
			usage := settledUsage(t, dir)
			limit := usage + 120<<20
			if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
				t.Fatal(err)
			}
			failcnt, kills := memcgValue(t, dir, "memory.failcnt", ""), memcgValue(t, dir, "memory.oom_control", "oom_kill")
			t.Logf("target usage %d MiB, limit %d MiB", usage>>20, limit>>20)
			// A freeze needs a thread parked in runtime.futex; one that
			// finds none copies in the stop and is tried again.
			var out, stderr string
			var code int
			for try := 0; try < 10; try++ {
				out, stderr, code = runGi(t, "ps", "--leaks", "--json", strconv.Itoa(p.Pid))
				if code != 0 || !strings.Contains(out, "no thread parked in runtime.futex") {
					break
				}
				t.Logf("try %d: no thread parked in runtime.futex to freeze the target", try)
			}
			if now := memcgValue(t, dir, "memory.oom_control", "oom_kill"); now != kills {
				t.Errorf("the memory cgroup's OOM killer killed %d processes during gi ps --leaks", now-kills)
			}
			if now := memcgValue(t, dir, "memory.failcnt", ""); now != failcnt {
				t.Errorf("the memory cgroup hit its limit %d times during gi ps --leaks", now-failcnt)
			}
			if !proc.Alive(p.Pid) {
				t.Fatalf("the target died during gi ps --leaks (gi exit %d, stderr %q)", code, stderr)
			}
			targets.CheckNotStopped(t, p.Pid)
			if kids := targets.Children(p.Pid); len(kids) != 0 {
				t.Errorf("the target has children after gi ps --leaks: %v", kids)
			}
			if code != 0 {
				t.Fatalf("gi ps --leaks: exit %d: %s", code, stderr)
			}
			var d struct {
				Leaks struct {
					Undecided string `json:"undecided"`
					InStop    string `json:"in_stop"`
					Frozen    bool   `json:"frozen"`
				} `json:"leaks"`
			}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("%v: %.300s", err, out)
			}
			t.Logf("leaks: frozen %v, in_stop %q, undecided %q", d.Leaks.Frozen, d.Leaks.InStop, d.Leaks.Undecided)
			if d.Leaks.Frozen || !strings.Contains(d.Leaks.InStop, "memory cgroup") || !strings.Contains(d.Leaks.InStop, c.inStop) {
				t.Errorf("frozen %v, copied in the stop for %q; want the memory cgroup's headroom said (%q)", d.Leaks.Frozen, d.Leaks.InStop, c.inStop)
			}
			if got := leakedOf(t, out); !sameSet(got, truth) {
				t.Errorf("gi ps --leaks --json marks %v leaked, the target leaked %v", keys(got), keys(truth))
			}
		})
	}
}

// frozenCopyOf waits until process pid has a child traced by a thread of
// process tracer (the copy gi ps --leaks has it make of itself), and
// returns it; it fails the test if the tracer ends (done) first.
func frozenCopyOf(t *testing.T, pid, tracer int, done <-chan struct{}, within time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		for _, kid := range targets.Children(pid) {
			// TracerPid names the tracing thread.
			if tid := proc.TracerOf(kid, kid); tid != 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", tracer, tid)); err == nil {
					return kid
				}
			}
		}
		select {
		case <-done:
			t.Fatalf("process %d ended before process %d made a copy of itself it traces", tracer, pid)
		default:
		}
	}
	t.Fatalf("process %d made no copy of itself traced by %d within %v", pid, tracer, within)
	return 0
}

// TestPsLeaksTargetOOM has the target, or its copy, killed by its memory
// cgroup's OOM killer while gi ps --leaks reads the copy: gi is stopped
// (SIGSTOP) while it reads the copy's heap, a second process in the cgroup
// allocates past the limit (the target's oom_score_adj makes it, or its
// copy, the victim), and gi, resumed, says in one line that the process
// or its copy died, and exits non-zero.
func TestPsLeaksTargetOOM(t *testing.T) {
	requirePrivilege(t)
	dir := newMemcg(t)
	bin := targets.Build(t, "leaky", targets.BuildOptions{})
	p := startInMemcg(t, dir, bin, "-n", "2", "-ballast-mb", "96")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", p.Pid), []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	usage := settledUsage(t, dir)
	// Room enough for gi to freeze the process (twice its heap).
	limit := usage + 320<<20
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatal(err)
	}
	kills := memcgValue(t, dir, "memory.oom_control", "oom_kill")
	cmd := exec.Command(buildGi(t), "ps", "--leaks", strconv.Itoa(p.Pid))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("gi: stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		}()
		frozenCopyOf(t, p.Pid, cmd.Process.Pid, exited, time.Minute)
	}()
	// Past the goroutines' copy (milliseconds), in the heap's (half a
	// second for 96 MiB here).
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// 384 MiB in a cgroup with 320 MiB left: the OOM killer takes the
	// target or its copy (oom_score_adj 1000), the hog then fits.
	hog := startInMemcg(t, dir, bin, "-n", "1", "-ballast-mb", "384")
	hog.Kill()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("gi ps --leaks hung")
	}
	if now := memcgValue(t, dir, "memory.oom_control", "oom_kill"); now == kills {
		t.Fatal("the hog caused no OOM kill in the cgroup")
	}
	t.Logf("gi: exit %d, stderr %q; target alive %v", cmd.ProcessState.ExitCode(), stderr.String(), proc.Alive(p.Pid))
	checkOneLineError(t, stderr.String(), cmd.ProcessState.ExitCode(), `(died|killed).* out of memory`)
}
