package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// TestContainerFromHost: gi on the host, the target in its own PID, mount
// and time namespaces (chrooted, pid 1 inside): gi ps by host pid and by
// --ns-pid/--in shows both pids; gi trace attaches through /proc/<pid>/exe.
func TestContainerFromHost(t *testing.T) {
	requirePrivilege(t)
	p := targets.StartInContainer(t, targets.Build(t, "tracee", targets.BuildOptions{}), targets.ContainerOptions{MonotonicOffset: 48 * time.Hour})
	host := strconv.Itoa(p.Pid)

	out, stderr, code := runGi(t, "ps", host)
	if code != 0 {
		t.Fatalf("gi ps: %s", stderr)
	}
	if !strings.Contains(out, "pid "+host+" (1 in its PID namespace)") {
		t.Errorf("footer does not give both pids:\n%s", out)
	}
	// --in names any process of the container: here the target itself.
	out2, stderr, code := runGi(t, "ps", "--json", "--ns-pid", "1", "--in", host)
	if code != 0 {
		t.Fatalf("gi ps --ns-pid 1 --in %s: %s", host, stderr)
	}
	var doc struct {
		PID   int `json:"pid"`
		NSPid int `json:"ns_pid"`
	}
	if err := json.Unmarshal([]byte(out2), &doc); err != nil || doc.PID != p.Pid || doc.NSPid != 1 {
		t.Errorf("--ns-pid: pid %d ns_pid %d (%v), want %d and 1", doc.PID, doc.NSPid, err, p.Pid)
	}

	g := startGiTrace(t, "--json", host, "main.chain*")
	if !strings.Contains(g.stderr.String(), "(1 in its PID namespace)") {
		t.Errorf("trace does not name the namespace pid: %s", g.stderr)
	}
	if _, err := p.Do("chain 3", time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGINT)
	if n := strings.Count(g.stdout.String(), `"function":"main.chainA"`); n != 3 {
		t.Errorf("%d chainA calls traced in the container, want 3:\n%s", n, g.stdout)
	}
	targets.CheckNotStopped(t, p.Pid)
}

// TestSidecar: gi runs inside the target's PID namespace but in a mount
// namespace of its own (a sidecar container sharing the process namespace):
// it sees the target as pid 1 and lists and traces it.
func TestSidecar(t *testing.T) {
	requirePrivilege(t)
	gi := buildGi(t)
	p := targets.StartInContainer(t, targets.Build(t, "tracee", targets.BuildOptions{}), targets.ContainerOptions{})
	sidecar := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--target", strconv.Itoa(p.Pid), "--pid", "--",
			"unshare", "--mount", "--fork", "--kill-child", "--mount-proc", gi}, args...)...)
	}
	out, err := sidecar("ps", "--json", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("gi ps in the sidecar: %v\n%s", err, out)
	}
	var doc struct {
		PID        int `json:"pid"`
		Goroutines []struct {
			Function string `json:"function"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.PID != 1 || len(doc.Goroutines) == 0 || doc.Goroutines[0].Function != "main.main" {
		t.Errorf("sidecar view: pid %d, %d goroutines: %+v", doc.PID, len(doc.Goroutines), doc.Goroutines)
	}

	cmd := sidecar("trace", "--max-overhead", "none", "--duration", "3s", "--json", "1", "main.chainA")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := errPipe.Read(buf) // the "tracing" line
	if !strings.Contains(string(buf[:n]), "gi: tracing") {
		t.Fatalf("gi trace in the sidecar: %s", buf[:n])
	}
	if _, err := p.Do("chain 2", time.Minute); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := errPipe.Read(buf); err != nil {
				return
			}
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gi trace in the sidecar: %v", err)
	}
	if c := strings.Count(stdout.String(), `"function":"main.chainA"`); c != 2 {
		t.Errorf("%d chainA calls seen from the sidecar, want 2:\n%s", c, stdout.String())
	}
}

// TestSidecarPIE: gi inside the PID namespace of a PIE target (kubectl
// debug --target, a sidecar) traces it as it lists it. The probes report
// pids as gi's namespace numbers them, so the load bias, labels and the
// open calls of the right process are found: callers resolve to functions,
// headers carry labels, and gi ps --trace and gi top see the calls flowing.
func TestSidecarPIE(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range []string{"local", "go1.27.4"} {
		t.Run(tc, func(t *testing.T) { testSidecarPIE(t, tc) })
	}
}

func testSidecarPIE(t *testing.T, toolchain string) {
	gi := buildGi(t)
	p := targets.StartInContainer(t, targets.Build(t, "lockserver", targets.BuildOptions{PIE: true, Toolchain: toolchain}),
		targets.ContainerOptions{SharedRoot: true}, "-pause", "0")
	inside := []string{"nsenter", "--target", strconv.Itoa(p.Pid), "--pid", "--mount", "--", gi}
	sidecar := func(args ...string) (string, error) {
		var stdout, stderr strings.Builder
		cmd := exec.Command(inside[0], append(inside[1:], args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, stderr.String())
		}
		return stdout.String(), err
	}

	// gi trace: every call's caller is main.worker, resolved with the load
	// bias of pid 1 (a raw 0x... address if the pid were the host's).
	out, err := sidecar("trace", "--max-overhead", "none", "--duration", "1s", "--json", "1", "main.handle")
	if err != nil {
		t.Fatalf("gi trace in the namespace: %v", err)
	}
	calls := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c struct {
			CallerFunction string `json:"caller_function"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if strings.Contains(line, `"function":"main.handle"`) {
			calls++
			if c.CallerFunction != "main.worker" {
				t.Errorf("caller %q, want main.worker: %s", c.CallerFunction, line)
				break
			}
		}
	}
	if calls < 100 {
		t.Errorf("%d main.handle calls traced in a second from inside, want hundreds", calls)
	}
	// The tree's headers carry the workers' labels, read from pid 1.
	out, err = sidecar("trace", "--duration", "500ms", "--max-overhead", "none", "1", "main.handle")
	if err != nil {
		t.Fatalf("gi trace in the namespace: %v", err)
	}
	if !regexp.MustCompile(`(?m)^goroutine \d+ .*worker=w\d`).MatchString(out) {
		t.Errorf("no tree header with the worker label:\n%.2000s", out)
	}

	// gi ps --trace: the workers are in main.handle with calls, none stuck.
	out, err = sidecar("ps", "--json", "--max-overhead", "none", "--trace", "1s", "1")
	if err != nil {
		t.Fatalf("gi ps --trace in the namespace: %v", err)
	}
	var doc psTraceDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	measured := 0
	for _, g := range doc.Goroutines {
		if g.Labels["worker"] == "" || g.Trace == nil {
			continue
		}
		if g.Trace.Stuck {
			t.Errorf("worker %d marked stuck while calls flow: %+v", g.Goid, g.Trace)
		}
		if g.Trace.Function == "main.handle" && g.Trace.Calls > 0 {
			measured++
		}
	}
	if measured < 3 {
		t.Errorf("%d of 6 workers measured in main.handle with calls, want at least 3:\n%s", measured, out)
	}

	// gi top in a terminal inside the namespace: the main.handle row has calls.
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	s := newTmux(t, "gisidecar"+strings.ReplaceAll(toolchain, ".", "_")+strconv.Itoa(os.Getpid()), 200, 50)
	s.keys(strings.Join(inside, " ")+" top 1; echo GI-EXIT=$?", "Enter")
	s.waitFor("a main.handle row with calls", func(sc string) bool { return handleCalls(sc) > 0 })
	s.keys("q")
	s.waitFor("gi exiting", contains("GI-EXIT=0"))
	targets.CheckNotStopped(t, p.Pid)
}

// TestMissingCapabilities: root without CAP_SYS_PTRACE, or without CAP_BPF
// and CAP_PERFMON (a container started without --cap-add), gets an error
// that names the capability to add.
func TestMissingCapabilities(t *testing.T) {
	requirePrivilege(t)
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	run := func(drop string, args ...string) (string, int) {
		cmd := exec.Command("setpriv", append([]string{"--inh-caps=" + drop, "--bounding-set=" + drop, gi}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		return stderr.String(), cmd.ProcessState.ExitCode()
	}
	stderr, code := run("-sys_ptrace", "ps", strconv.Itoa(p.Pid))
	checkOneLineError(t, stderr, code, `CAP_SYS_PTRACE`)
	stderr, code = run("-bpf,-perfmon,-sys_admin", "trace", strconv.Itoa(p.Pid), "main.chainA")
	checkOneLineError(t, stderr, code, `CAP_BPF and CAP_PERFMON`)
	targets.CheckNotStopped(t, p.Pid)
}

// TestDeletedBinary: the target's executable was deleted (or replaced by a
// deploy) after it started; gi reads it through /proc/<pid>/exe, for gi ps
// and for the probes of gi trace.
func TestDeletedBinary(t *testing.T) {
	requirePrivilege(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "tracee")
	copyFile(t, targets.Build(t, "tracee", targets.BuildOptions{PIE: true}), exe)
	p := targets.Start(t, exe)
	// Replace the file, as a deploy would: the path now names another file.
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho not the program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runGi(t, "ps", strconv.Itoa(p.Pid))
	if code != 0 || !strings.Contains(out, "main.main") {
		t.Fatalf("gi ps on a process whose binary was replaced: %s\n%s", stderr, out)
	}
	g := startGiTrace(t, "--json", strconv.Itoa(p.Pid), "main.chainA")
	if _, err := p.Do("chain 2", time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGINT)
	if n := strings.Count(g.stdout.String(), `"function":"main.chainA"`); n != 2 {
		t.Errorf("%d chainA calls traced on the replaced binary, want 2", n)
	}
}
