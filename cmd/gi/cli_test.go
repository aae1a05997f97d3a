package main

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// requirePrivilege skips, or under GI_REQUIRE_PRIVILEGED=1 fails, a test
// that needs root to run gi on a target (ptrace, eBPF).
func requirePrivilege(t testing.TB) {
	t.Helper()
	targets.RequirePrivilege(t, "ptrace, eBPF")
}

var (
	giOnce sync.Once
	giPath string
	giErr  error
)

// buildGi builds the gi command once per test binary; GI_BINARY names a
// prebuilt one instead (a machine without Go, such as a test VM).
func buildGi(t testing.TB) string {
	t.Helper()
	giOnce.Do(func() {
		if path := os.Getenv("GI_BINARY"); path != "" {
			giPath = path
			return
		}
		dir, err := os.MkdirTemp("", "gi-cli")
		if err != nil {
			giErr = err
			return
		}
		// Readable by all: one test runs gi as an unprivileged user.
		if err := os.Chmod(dir, 0o755); err != nil {
			giErr = err
			return
		}
		giPath = filepath.Join(dir, "gi")
		out, err := exec.Command("go", "build", "-o", giPath, ".").CombinedOutput()
		if err != nil {
			giErr = err
			giPath = string(out)
		}
	})
	if giErr != nil {
		t.Fatalf("build gi: %v\n%s", giErr, giPath)
	}
	return giPath
}

// runGi runs gi and returns stdout, stderr and the exit code.
func runGi(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(buildGi(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("gi %v hung", args)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// checkOneLineError asserts a clean failure: non-zero exit, one line on
// stderr matching want, no Go panic trace.
func checkOneLineError(t *testing.T, stderr string, code int, want string) {
	t.Helper()
	if code == 0 {
		t.Errorf("exit code 0, want non-zero (stderr %q)", stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 {
		t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
	}
	// A Go panic trace: "panic: ..." and "goroutine 1 [running]:" (a wait
	// reason such as "panicwait" in a message is not one).
	if strings.Contains(stderr, "panic: ") || regexp.MustCompile(`goroutine \d+ \[`).MatchString(stderr) {
		t.Errorf("stderr holds a Go panic trace:\n%s", stderr)
	}
	if !regexp.MustCompile(want).MatchString(stderr) {
		t.Errorf("stderr %q does not match %q", stderr, want)
	}
}

func TestPsTable(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.Start(t, bin, "-park", "50")
	out, stderr, code := runGi(t, "ps", strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatalf("gi ps failed (%d): %s", code, stderr)
	}
	targets.CheckNotStopped(t, p.Pid)
	for _, want := range []string{"GOID", "STATE", "WAIT", "FUNCTION", "LOCATION", "CREATED BY", "LABELS",
		"chan receive", "sync.Mutex.Lock", "IO wait", "syscall", "select", "sleep",
		"shard=3,worker=w1", "(locked)", "main.main (goroutine 1)", "paused"} {
		if !strings.Contains(out, want) {
			t.Errorf("gi ps output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^\d+ goroutines: \d+ chan receive`).MatchString(out) {
		t.Errorf("no footer with counts by state:\n%s", out)
	}

	// --group folds the 50 parked goroutines into one row.
	out, stderr, code = runGi(t, "ps", "--group", strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatalf("gi ps --group: %s", stderr)
	}
	if !regexp.MustCompile(`(?m)^\s*5\d\s+chan receive`).MatchString(out) {
		t.Errorf("--group has no row of ≥50 goroutines in chan receive:\n%s", out)
	}

	// Filters.
	out, _, _ = runGi(t, "ps", "--json", "--state", "sync.Mutex.Lock", strconv.Itoa(p.Pid))
	var doc struct {
		Goroutines []struct {
			Goid       uint64 `json:"goid"`
			State      string `json:"state"`
			WaitReason string `json:"wait_reason"`
			Function   string `json:"function"`
			Frames     []struct {
				Function string `json:"function"`
			} `json:"frames"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(doc.Goroutines) == 0 {
		t.Fatal("--state sync.Mutex.Lock matched nothing")
	}
	for _, g := range doc.Goroutines {
		if g.State != "waiting" || g.WaitReason != "sync.Mutex.Lock" {
			t.Errorf("--state filter let through goroutine %d: %s/%s", g.Goid, g.State, g.WaitReason)
		}
	}
	out, _, _ = runGi(t, "ps", "--json", "--match", `^main\.recurse$`, strconv.Itoa(p.Pid))
	doc.Goroutines = nil
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Goroutines) != 1 || len(doc.Goroutines[0].Frames) < 300 {
		t.Errorf("--match main.recurse: want the one deep goroutine with ≥300 frames, got %d goroutines", len(doc.Goroutines))
	}
	out, _, _ = runGi(t, "ps", "--min-wait", "1h", strconv.Itoa(p.Pid))
	if !strings.Contains(out, "\n0 goroutines") {
		t.Errorf("--min-wait 1h should leave nothing:\n%s", out)
	}
}

func TestPsPprof(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.Start(t, bin, "-park", "30")
	file := filepath.Join(t.TempDir(), "goroutines.pb.gz")
	if _, stderr, code := runGi(t, "ps", "--pprof", file, strconv.Itoa(p.Pid)); code != 0 {
		t.Fatalf("gi ps --pprof: %s", stderr)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=200", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, out)
	}
	for _, want := range []string{"Type: goroutine", "main.parked"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("pprof -top output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command("go", "tool", "pprof", "-tags", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -tags: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "w1") || !strings.Contains(string(out), "worker") {
		t.Errorf("pprof labels missing:\n%s", out)
	}
}

func TestPsErrors(t *testing.T) {
	requirePrivilege(t)
	t.Run("no such pid", func(t *testing.T) {
		_, stderr, code := runGi(t, "ps", "999999999")
		checkOneLineError(t, stderr, code, `no such process`)
	})
	t.Run("not a Go program", func(t *testing.T) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		_, stderr, code := runGi(t, "ps", strconv.Itoa(cmd.Process.Pid))
		checkOneLineError(t, stderr, code, `not a Go program`)
	})
	t.Run("no process by that name", func(t *testing.T) {
		_, stderr, code := runGi(t, "ps", "no-such-process-name-gi")
		checkOneLineError(t, stderr, code, `no process named`)
	})
	t.Run("ambiguous name", func(t *testing.T) {
		bin := targets.Build(t, "psstates", targets.BuildOptions{})
		dir := t.TempDir()
		dup := filepath.Join(dir, "gi-ambiguous")
		copyFile(t, bin, dup)
		targets.Start(t, dup)
		targets.Start(t, dup)
		_, stderr, code := runGi(t, "ps", "gi-ambiguous")
		checkOneLineError(t, stderr, code, `"gi-ambiguous" is ambiguous: 2 processes match`)
	})
	t.Run("by name", func(t *testing.T) {
		bin := targets.Build(t, "psstates", targets.BuildOptions{})
		dup := filepath.Join(t.TempDir(), "gi-byname")
		copyFile(t, bin, dup)
		p := targets.Start(t, dup)
		out, stderr, code := runGi(t, "ps", "gi-byname")
		if code != 0 || !strings.Contains(out, "pid "+strconv.Itoa(p.Pid)) {
			t.Errorf("gi ps by name: code %d, stderr %q", code, stderr)
		}
	})
	t.Run("permission denied", func(t *testing.T) {
		bin := targets.Build(t, "psstates", targets.BuildOptions{})
		p := targets.Start(t, bin)
		cmd := exec.Command(buildGi(t), "ps", strconv.Itoa(p.Pid))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		checkOneLineError(t, stderr.String(), code, `permission denied`)
		targets.CheckNotStopped(t, p.Pid)
	})
	t.Run("already traced", func(t *testing.T) {
		bin := targets.Build(t, "psstates", targets.BuildOptions{})
		p := targets.Start(t, bin)
		tr := ptrace.NewTracer()
		defer tr.Close()
		st, err := tr.Stop(p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runGi(t, "ps", strconv.Itoa(p.Pid))
		if err := st.Resume(); err != nil {
			t.Fatal(err)
		}
		checkOneLineError(t, stderr, code, `already traced`)
		targets.CheckNotStopped(t, p.Pid)
	})
	t.Run("bad flag values", func(t *testing.T) {
		_, stderr, code := runGi(t, "ps", "--match", "(", "1")
		checkOneLineError(t, stderr, code, `--match`)
	})
	t.Run("unknown state", func(t *testing.T) {
		p := targets.Start(t, targets.Build(t, "psstates", targets.BuildOptions{}))
		_, stderr, code := runGi(t, "ps", "--state", "bogus", strconv.Itoa(p.Pid))
		// The states come from the binary: its statuses and wait reasons.
		checkOneLineError(t, stderr, code, `^gi: --state "bogus": no such state in go1\.\d+(\.\d+)?; it has: idle, runnable, running, .*chan receive.*sync\.Mutex\.Lock`)
		// Any case of a real one is taken.
		out, stderr, code := runGi(t, "ps", "--state", "CHAN RECEIVE", strconv.Itoa(p.Pid))
		if code != 0 || !regexp.MustCompile(`(?m)^\d+ goroutines: \d+ chan receive$`).MatchString(out) {
			t.Errorf("--state 'CHAN RECEIVE': code %d, stderr %q:\n%s", code, stderr, out)
		}
		targets.CheckNotStopped(t, p.Pid)
	})
	t.Run("unwritable pprof file", func(t *testing.T) {
		p := targets.Start(t, targets.Build(t, "psstates", targets.BuildOptions{}))
		_, stderr, code := runGi(t, "ps", "--trace", "1s", "--pprof", "/no/such/dir/g.pb.gz", strconv.Itoa(p.Pid))
		checkOneLineError(t, stderr, code, `^gi: --pprof: create /no/such/dir/g\.pb\.gz: no such file or directory`)
	})
}

// TestPsTargetExits runs gi against processes that exit while it works: every
// run must end in success or a one-line error, never a hang or a panic.
func TestPsTargetExits(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	exitedSeen := 0
	for i := 0; i < 20; i++ {
		p := targets.Start(t, bin, "-park", "5000")
		delay := time.Duration(rand.Intn(4000)) * time.Microsecond
		go func() {
			time.Sleep(delay)
			p.Cmd.Process.Kill()
		}()
		_, stderr, code := runGi(t, "ps", "--stacks", strconv.Itoa(p.Pid))
		if code != 0 {
			checkOneLineError(t, stderr, code, `exited|no such process|not a Go program`)
			exitedSeen++
		}
	}
	t.Logf("%d of 20 runs saw the target exit", exitedSeen)
}

// TestKillGiMidSnapshot kills gi at random points of a snapshot, 150 times
// (100 with SIGKILL, the others with SIGINT and SIGTERM, which gi handles by
// resuming the target before it exits), and checks every time that the
// target runs on, neither stopped nor traced.
func TestKillGiMidSnapshot(t *testing.T) {
	requirePrivilege(t)
	gi := buildGi(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.Start(t, bin, "-park", "20000")
	killedDuring, inStop, aimed := 0, 0, 0
	signals := []syscall.Signal{syscall.SIGKILL, syscall.SIGKILL, syscall.SIGINT, syscall.SIGKILL, syscall.SIGKILL, syscall.SIGTERM}
	for i := 0; i < 150; i++ {
		sig := signals[i%len(signals)]
		cmd := exec.Command(gi, "ps", "--stacks", strconv.Itoa(p.Pid))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			// Aimed: signal gi the moment it holds the target's threads
			// (TracerPid set), i.e. during the stop and the copy.
			aimed++
			if waitTraced(p.Pid, cmd.Process.Pid, 5*time.Second) {
				inStop++
			}
		} else {
			time.Sleep(time.Duration(rand.Intn(60000)) * time.Microsecond)
		}
		if cmd.Process.Signal(sig) == nil {
			killedDuring++
		}
		if err := cmd.Wait(); err != nil && sig != syscall.SIGKILL {
			// A handled signal makes gi exit 130 or 143 itself (-1: it came before the handler was installed).
			if code := cmd.ProcessState.ExitCode(); code != 130 && code != 143 && code != 0 && code != -1 {
				t.Errorf("after %v gi exited with %d", sig, code)
			}
		}
		// The kernel detaches a dead tracer's tracees; give it a moment.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !running(p.Pid) {
			time.Sleep(time.Millisecond)
		}
		targets.CheckNotStopped(t, p.Pid)
		if t.Failed() {
			t.Fatalf("target left stopped or traced after run %d", i)
		}
	}
	// The target still answers: its own goroutines still progress.
	if out, stderr, code := runGi(t, "ps", strconv.Itoa(p.Pid)); code != 0 || !strings.Contains(out, "chan receive") {
		t.Fatalf("gi ps after the kill loop: %d %s", code, stderr)
	}
	t.Logf("gi signalled %d times while running, %d of %d aimed signals while it held the target", killedDuring, inStop, aimed)
	if inStop < aimed*9/10 {
		t.Errorf("only %d of %d aimed signals landed while gi held the target's threads", inStop, aimed)
	}
}

// TestKillGiMidLeaks signals gi ps --leaks at random moments inside its
// stops, 40 times (mostly SIGKILL, some SIGINT and SIGTERM): the stop in
// which the target's thread makes the clone of the frozen copy, and the
// one in which it reaps the copy. Every time the target runs on (alive,
// neither stopped nor traced, its threads all there, its CPU time
// moving) and has no copy left running; the zombies of copies a killed
// gi could not reap are reaped by the next gi ps --leaks.
func TestKillGiMidLeaks(t *testing.T) {
	requirePrivilege(t)
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2", "-ballast-mb", "32", "-churn-mb", "48")
	pid := strconv.Itoa(p.Pid)
	threads := func() int {
		ents, _ := os.ReadDir("/proc/" + pid + "/task")
		return len(ents)
	}
	n0 := threads()
	signals := []syscall.Signal{syscall.SIGKILL, syscall.SIGKILL, syscall.SIGINT, syscall.SIGKILL, syscall.SIGKILL, syscall.SIGTERM}
	held := 0
	for i := 0; i < 40; i++ {
		sig := signals[i%len(signals)]
		cmd := exec.Command(gi, "ps", "--leaks", pid)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Inside the stop: gi holds the target's threads, and makes one
		// of them call clone (and, its copy read, wait4) 0-12 ms on.
		if waitTraced(p.Pid, cmd.Process.Pid, 5*time.Second) {
			held++
		}
		time.Sleep(time.Duration(rand.Intn(12000)) * time.Microsecond)
		cmd.Process.Signal(sig)
		cmd.Wait()
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !running(p.Pid) {
			time.Sleep(time.Millisecond)
		}
		if !proc.Alive(p.Pid) {
			t.Fatalf("run %d (%v): the target ended: %v\n%s", i, sig, p.Cmd.ProcessState, strings.Join(p.Lines(), "\n"))
		}
		targets.CheckNotStopped(t, p.Pid)
		if n := threads(); n < n0 {
			t.Fatalf("run %d (%v): the target has %d threads, had %d", i, sig, n, n0)
		}
		clock, err := proc.NewCPUClock(p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cpu0, _ := clock.Read()
		for deadline := time.Now().Add(5 * time.Second); ; {
			if cpu, _ := clock.Read(); cpu > cpu0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d (%v): the target's CPU time stopped moving", i, sig)
			}
			time.Sleep(time.Millisecond)
		}
		for deadline := time.Now().Add(5 * time.Second); len(proc.SilentChildren(p.Pid, false)) > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("run %d (%v): copies of the target left running: %v", i, sig, proc.SilentChildren(p.Pid, false))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if t.Failed() {
			t.Fatalf("target harmed after run %d (%v)", i, sig)
		}
	}
	zombies := len(proc.SilentChildren(p.Pid, true))
	giOK(t, "ps", "--leaks", pid)
	if z := proc.SilentChildren(p.Pid, true); len(z) > 0 {
		t.Errorf("zombie copies left after a whole gi ps --leaks: %v", z)
	}
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children: %v", kids)
	}
	t.Logf("%d of 40 signals while gi held the target; %d zombie copies left by killed runs, reaped by the next", held, zombies)
	if held < 36 {
		t.Errorf("only %d of 40 signals came while gi held the target's threads", held)
	}
}

// TestOutputsReplacePlantedLinks has gi, as root, write --core and
// --pprof to names where a symbolic link to another file was planted (as
// anyone can in /tmp): the link is replaced by gi's file, and the file
// it pointed at keeps its bytes and its mode.
func TestOutputsReplacePlantedLinks(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "psstates", targets.BuildOptions{}), "-park", "20")
	dir := t.TempDir()
	for _, c := range []struct{ flag, check string }{{"--core", "ELF"}, {"--pprof", "\x1f\x8b"}} {
		victim := filepath.Join(dir, "victim"+c.flag)
		if err := os.WriteFile(victim, []byte("not gi's"), 0o640); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out"+c.flag)
		if err := os.Symlink(victim, out); err != nil {
			t.Fatal(err)
		}
		giOK(t, "ps", c.flag, out, strconv.Itoa(p.Pid))
		if b, err := os.ReadFile(victim); err != nil || string(b) != "not gi's" {
			t.Errorf("%s: the link's target was written: %.20q %v", c.flag, b, err)
		}
		if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: the link's target changed mode: %v %v", c.flag, fi, err)
		}
		fi, err := os.Lstat(out)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %s is not a regular file: %v %v", c.flag, out, fi, err)
		}
		if b, _ := os.ReadFile(out); !strings.Contains(string(b[:min(len(b), 8)]), c.check) {
			t.Errorf("%s: %s does not start with %q: %.8q", c.flag, out, c.check, b)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("files left beside the outputs: %v", ents)
	}
	// gi trace: its profile, written whole at the end, replaces the
	// link; its Perfetto trace, streamed as it goes, refuses it.
	victim := filepath.Join(dir, "victim-trace")
	if err := os.WriteFile(victim, []byte("not gi's"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"trace.pb.gz", "trace.json"} {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	giOK(t, "trace", "--duration", "300ms", "--max-overhead", "none", "--pprof", filepath.Join(dir, "trace.pb.gz"), strconv.Itoa(p.Pid), "main.spin")
	if fi, err := os.Lstat(filepath.Join(dir, "trace.pb.gz")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("gi trace --pprof: the link was not replaced by the profile: %v %v", fi, err)
	}
	_, stderr, code := runGi(t, "trace", "--duration", "300ms", "--perfetto", filepath.Join(dir, "trace.json"), strconv.Itoa(p.Pid), "main.spin")
	checkOneLineError(t, stderr, code, `--perfetto: .*trace\.json is a symbolic link: gi does not write through one`)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not gi's" {
		t.Errorf("gi trace: the link's target was written: %.20q %v", b, err)
	}
}

// waitTraced waits until process pid is traced (TracerPid, which names the
// tracing thread of gi, not gi's pid), polling as fast as /proc allows;
// false if the tracer process exits or time runs out.
func waitTraced(pid, tracer int, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return false
		}
		if !strings.Contains(string(b), "\nTracerPid:\t0\n") {
			return true
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(tracer) + "/status"); err != nil {
			return false
		}
	}
	return false
}

func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	s := string(b)
	return !strings.Contains(s, "\nState:\tt") && !strings.Contains(s, "\nState:\tT") && strings.Contains(s, "\nTracerPid:\t0\n")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
