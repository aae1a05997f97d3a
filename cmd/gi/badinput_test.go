package main

import (
	"bufio"
	"bytes"
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

// Issue 45: bad input gets one clear line and a non-zero exit, never a Go
// panic, never a hang.

// runGiAsItself runs gi through a shell that execs it, so that the pid
// the shell substitutes for $$ is gi's own.
func runGiAsItself(t *testing.T, args string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `exec "$0" `+args, buildGi(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gi %s on itself hung", args)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestBadInputSelf: every command that takes a pid refuses gi's own, in
// one line, and gi trace refuses its own executable by path (which traces
// every process running it, gi included: its reading of the trace made
// events faster than it read them, and --duration never ended it).
func TestBadInputSelf(t *testing.T) {
	for _, args := range []string{
		`ps $$`,
		`ps --stacks $$`,
		`ps --trace 1s $$`,
		`trace --duration 1s $$ 'main.*'`,
		`funcs $$ 'main.*'`,
	} {
		t.Run(args, func(t *testing.T) {
			_, stderr, code := runGiAsItself(t, args)
			checkOneLineError(t, stderr, code, `^gi: pid \d+ is gi itself: give the pid of another process\n$`)
		})
	}
	t.Run("top", func(t *testing.T) {
		// gi top needs a terminal: script(1) gives it one.
		if _, err := exec.LookPath("script"); err != nil {
			t.Skip("no script(1) to give gi top a terminal")
		}
		cmd := exec.Command("script", "-qec", `exec "`+buildGi(t)+`" top $$`, "/dev/null")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code == 0 || !regexp.MustCompile(`gi: pid \d+ is gi itself`).Match(out) {
			t.Errorf("gi top on itself: exit %d, output %q", code, out)
		}
	})
	t.Run("trace own executable", func(t *testing.T) {
		// Refused before anything is loaded: no privilege needed.
		cmd := exec.Command(buildGi(t), "trace", "--duration", "1s", buildGi(t), "main.*")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = nil, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("gi trace --duration 1s of its own executable still running after 20s: %s", stderr.String())
		}
		checkOneLineError(t, stderr.String(), cmd.ProcessState.ExitCode(), `^gi: \S+ is gi's own executable: traced by path, gi would trace itself`)
	})
}

// TestBadInputSelfThreads: a thread of gi's own is refused as its pid is,
// whichever way the pid is given (the test binary stands for gi here:
// its own threads).
func TestBadInputSelfThreads(t *testing.T) {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	tid := 0
	for _, e := range ents {
		if n, _ := strconv.Atoi(e.Name()); n != self && n != 0 {
			tid = n
			break
		}
	}
	if tid == 0 {
		t.Fatal("the test process has one thread")
	}
	if _, err := resolvePID(strconv.Itoa(self)); err == nil || !strings.Contains(err.Error(), "is gi itself") {
		t.Errorf("own pid %d: %v", self, err)
	}
	if _, err := resolvePID(strconv.Itoa(tid)); err == nil || !strings.Contains(err.Error(), "is a thread of gi itself") {
		t.Errorf("own thread %d: %v", tid, err)
	}
	if _, _, err := traceTarget(strconv.Itoa(tid)); err == nil || !strings.Contains(err.Error(), "is a thread of gi itself") {
		t.Errorf("gi trace, gi funcs, own thread %d: %v", tid, err)
	}
	// gi top and --ns-pid/--in: in gi's own namespace, gi is itself.
	if _, err := (targetFlags{}).resolve(strconv.Itoa(tid)); err == nil || !strings.Contains(err.Error(), "is a thread of gi itself") {
		t.Errorf("gi top, own thread %d: %v", tid, err)
	}
	if nsPid, err := strconv.Atoi(strings.TrimSpace(lastField(t, "NSpid"))); err == nil {
		if _, err := (targetFlags{nsPid: nsPid, in: self}).resolve(""); err == nil || !strings.Contains(err.Error(), "is gi itself") {
			t.Errorf("--ns-pid %d --in %d: %v", nsPid, self, err)
		}
	}
}

// lastField returns the last word of a field of /proc/self/status.
func lastField(t *testing.T, field string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return f[len(f)-1]
			}
		}
	}
	return ""
}

// TestBadInputDurations: a negative duration is an error; so is a zero
// --trace or --watch (a window, an interval of no time). Zero --min-wait,
// --duration, --interval and --min-duration mean their defaults.
func TestBadInputDurations(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ps", "--trace", "-1s", "1"}, `^gi: --trace needs a positive duration \(e\.g\. 2s\), not -1s$`},
		{[]string{"ps", "--trace", "0", "1"}, `^gi: --trace needs a positive duration`},
		{[]string{"ps", "--trace=-2ms", "1"}, `^gi: --trace needs a positive duration`},
		{[]string{"ps", "--watch", "-1s", "1"}, `^gi: --watch needs a positive duration \(e\.g\. 5s\), not -1s$`},
		{[]string{"ps", "--watch", "0", "--count", "2", "1"}, `^gi: --watch needs a positive duration \(e\.g\. 5s\), not 0s$`},
		{[]string{"ps", "--min-wait", "-1s", "1"}, `^gi: --min-wait -1s: want a duration of 0 or more \(0: every goroutine\)$`},
		{[]string{"trace", "--duration", "-1s", "1", "main.*"}, `^gi: --duration -1s: want a duration of 0 \(until Ctrl-C\) or more$`},
		{[]string{"trace", "--stats", "--interval", "-1s", "1", "main.*"}, `^gi: --interval -1s: want a duration of 0 \(the table at the end only\) or more$`},
		{[]string{"trace", "--min-duration", "-5ms", "1", "main.*"}, `^gi: --min-duration -5ms: want a duration of 0 \(every tree\) or more$`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, stderr, code := runGi(t, c.args...)
			checkOneLineError(t, strings.TrimSuffix(stderr, "\n"), code, c.want)
		})
	}
	// --count alone still says what it goes with.
	_, stderr, code := runGi(t, "ps", "--count", "2", "1")
	checkOneLineError(t, stderr, code, `^gi: --count goes with --watch D\n$`)
}

// TestBadInputZeroDurations: the zero values that mean a default run as
// the default does.
func TestBadInputZeroDurations(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "psstates", targets.BuildOptions{}))
	pid := strconv.Itoa(p.Pid)
	if out, stderr, code := runGi(t, "ps", "--min-wait", "0", pid); code != 0 || !strings.Contains(out, "goroutines:") {
		t.Errorf("gi ps --min-wait 0: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runGi(t, "trace", "--max-overhead", "none", "--duration", "500ms", "--min-duration", "0", "--stats", "--interval", "0", pid, "main.parked"); code != 0 {
		t.Errorf("gi trace with zero --min-duration and --interval: exit %d: %s", code, stderr)
	}
}

// TestBadInputNotACore: an existing file that is no core says so in one
// line; a name that is no file still names a process.
func TestBadInputNotACore(t *testing.T) {
	dir := t.TempDir()
	random := make([]byte, 4096)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(random); err != nil {
		t.Fatal(err)
	}
	f.Close()
	random[0] = 'x' // neither an ELF nor a compressed core by chance
	if err := os.WriteFile(filepath.Join(dir, "rand.core"), random, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.core"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(buildGi(t), args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		return stderr.String(), cmd.ProcessState.ExitCode()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ps", "./rand.core"}, `^gi: \./rand\.core: not an ELF core file\n$`},
		{[]string{"ps", "rand.core"}, `^gi: rand\.core: not an ELF core file\n$`},
		{[]string{"ps", filepath.Join(dir, "rand.core")}, `^gi: /\S+/rand\.core: not an ELF core file\n$`},
		{[]string{"ps", "--stacks", "./empty.core"}, `^gi: \./empty\.core: not an ELF core file\n$`},
		{[]string{"ps", "./no-such.core"}, `^gi: core file \./no-such\.core: no such file or directory\n$`},
		{[]string{"ps", "."}, `^gi: \. is a directory, not a core file\n$`},
		{[]string{"ps", buildGi(t)}, `^gi: \S+ is not a core file but an ELF executable \(or library\): give the pid or name of a process running it\n$`},
		// Not a file: a process name.
		{[]string{"ps", "no-such-process-name-gi"}, `^gi: no process named "no-such-process-name-gi"\n$`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			stderr, code := run(c.args...)
			checkOneLineError(t, stderr, code, c.want)
		})
	}
}

// TestBadInputFileNamedAsProcess: a file in the working directory that
// has a running process's name leaves the name naming the process.
func TestBadInputFileNamedAsProcess(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	dir := t.TempDir()
	name := "gi-badinput-" + strconv.Itoa(os.Getpid())
	copyFile(t, bin, filepath.Join(dir, name))
	p := targets.Start(t, filepath.Join(dir, name))
	cmd := exec.Command(buildGi(t), "ps", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "pid "+strconv.Itoa(p.Pid)) {
		t.Errorf("gi ps %s beside the file %s: %v\n%s", name, name, err, out)
	}
}

// TestBadInputZombie: a process that has exited and not been reaped is
// said to be a zombie, for every command that takes a pid.
func TestBadInputZombie(t *testing.T) {
	// sh starts a child that exits at once and becomes sleep, which
	// never reaps it.
	cmd := exec.Command("sh", "-c", `sleep 0 & echo $!; exec sleep 120`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	zombie := strings.TrimSpace(line)
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, _ := os.ReadFile("/proc/" + zombie + "/stat")
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s did not become a zombie: %q", zombie, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := `^gi: process ` + zombie + ` is a zombie: it has exited and its parent \(pid \d+\) has not reaped it\n$`
	for _, args := range [][]string{
		{"ps", zombie},
		{"ps", "--trace", "1s", zombie},
		{"trace", zombie, "main.*"},
		{"funcs", zombie},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, stderr, code := runGi(t, args...)
			checkOneLineError(t, stderr, code, want)
		})
	}
}

// TestBadInputTraceTargetExits: gi trace whose target exits mid-trace
// prints what it traced, says in one line that the target exited and
// after how long, and exits 3: a script tells it from a whole trace.
func TestBadInputTraceTargetExits(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	g := startGiTrace(t, strconv.Itoa(p.Pid), "main.chain*")
	if _, err := p.Do("chain 2", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("gi trace still running 30s after its target exited")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	lines := strings.Split(strings.TrimRight(g.stderr.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^gi: the traced process \(pid ` + strconv.Itoa(p.Pid) + `\) exited \d+\.\ds into the trace$`).MatchString(last) {
		t.Errorf("last line of stderr %q:\n%s", last, g.stderr)
	}
	if n := strings.Count(g.stdout.String(), "main.chainA() {"); n != 2 {
		t.Errorf("%d trees of main.chainA printed, want 2:\n%s", n, g.stdout)
	}
}

// TestBadInputTraceEnds: a trace whose events come faster than gi reads
// them (a reader slowed down, GI_TEST_EVENT_DELAY, against a hot loop)
// still ends at --duration, or at Ctrl-C: cleanly, or, where the read of
// the ring buffer never empties it (the run checks for its end between
// two reads), cut after 5s of grace with one line saying so.
func TestBadInputTraceEnds(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-hot")
	for _, c := range []struct {
		name string
		args []string
		sig  bool
	}{
		{"duration", []string{"--duration", "1s"}, false},
		{"SIGINT", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := startGiTraceWith(t, func(cmd *exec.Cmd) {
				cmd.Env = append(os.Environ(), "GI_TEST_EVENT_DELAY=50us")
			}, append(c.args, strconv.Itoa(p.Pid), "main.hot")...)
			start := time.Now()
			if c.sig {
				time.Sleep(time.Second)
				g.cmd.Process.Signal(syscall.SIGINT)
			}
			select {
			case <-g.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("gi trace still running %v after it began ending:\n%s", time.Since(start), g.stderr)
			}
			t.Logf("ended %v after the end began, exit status %d", time.Since(start), g.cmd.ProcessState.ExitCode())
			lines := strings.Split(strings.TrimRight(g.stderr.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			cut := regexp.MustCompile(`^gi: the trace did not end within 5s of (the signal|its end \(1s\)): events came faster than gi could read them \(\d+ more since\), and it reads until the ring buffer is empty; exiting \(the kernel detaches the probes\)$`)
			switch code := g.cmd.ProcessState.ExitCode(); code {
			case 1:
				if !cut.MatchString(last) {
					t.Errorf("exit 1, last line of stderr %q:\n%s", last, g.stderr)
				}
			case 0:
				if !strings.Contains(g.stderr.String(), "events,") {
					t.Errorf("no summary line:\n%s", g.stderr)
				}
			default:
				t.Errorf("exit status %d:\n%s", code, g.stderr)
			}
			if t.Failed() {
				return
			}
			targets.CheckNotStopped(t, p.Pid)
		})
	}
}
