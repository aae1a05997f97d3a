package targets

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ReadyTimeout bounds how long Start waits for a target to print READY.
const ReadyTimeout = 2 * time.Minute

// Process is a running target program.
type Process struct {
	Cmd *exec.Cmd
	Pid int
	// Stdin is the target's standard input (commands for tracee).
	Stdin io.WriteCloser

	// Set from the lines the target prints before READY:
	// "DUMP <path>": where it wrote its own goroutine dump;
	// "DUMPER <goid>": the goroutine that wrote it (exited since);
	// "DUMPDURATION <ns>": how long the runtime took to produce it.
	DumpPath     string
	DumperGoid   int64
	DumpDuration time.Duration

	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

// Start runs bin with args and waits until it prints READY. The process is
// killed when the test ends.
func Start(tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	return start(tb, stderrCopy{}, bin, args...)
}

// start is Start with the target's stderr copied to stderr.
func start(tb testing.TB, stderr io.Writer, bin string, args ...string) *Process {
	tb.Helper()
	p, err := startProcess(stderr, bin, args...)
	if err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	tb.Cleanup(p.Kill)
	return p
}

// StartProcess is Start for callers without a testing.TB; the caller kills it.
func StartProcess(bin string, args ...string) (*Process, error) {
	return startProcess(stderrCopy{}, bin, args...)
}

// startProcess is StartProcess with the target's stderr copied to stderr.
func startProcess(stderr io.Writer, bin string, args ...string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	// The target's stderr reaches the test's through a pipe this process
	// copies, never the test's own descriptor: a descendant that outlived
	// the test would otherwise hold go test's output open (it waits for
	// it, minutes). WaitDelay bounds the copy after the target is gone.
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	// Its own process group, killed whole by Kill: what the target starts
	// (unshare's child, a container's init) goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, Pid: cmd.Process.Pid, Stdin: in, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			if !signalled {
				p.parse(line)
			}
			p.mu.Unlock()
			if !signalled && line == "READY" {
				signalled = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		cmd.Wait()
		return nil, fmt.Errorf("exited before READY: %v\n%s", cmd.ProcessState, strings.Join(p.Lines(), "\n"))
	case <-time.After(ReadyTimeout):
		p.Kill()
		return nil, fmt.Errorf("no READY within %v", ReadyTimeout)
	}
}

func (p *Process) parse(line string) {
	key, val, ok := strings.Cut(line, " ")
	if !ok {
		return
	}
	switch key {
	case "DUMP":
		p.DumpPath = val
	case "DUMPER":
		p.DumperGoid, _ = strconv.ParseInt(val, 10, 64)
	case "DUMPDURATION":
		ns, _ := strconv.ParseInt(val, 10, 64)
		p.DumpDuration = time.Duration(ns)
	}
}

// Lines returns what the target printed on stdout so far.
func (p *Process) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Do sends a command line to the target and waits for its "DONE" answer,
// returning the answer's key=value fields.
func (p *Process) Do(command string, timeout time.Duration) (map[string]string, error) {
	p.mu.Lock()
	from := len(p.lines)
	p.mu.Unlock()
	if _, err := io.WriteString(p.Stdin, command+"\n"); err != nil {
		return nil, fmt.Errorf("send %q: %w", command, err)
	}
	l, err := p.WaitLineAfter(from, "DONE ", timeout)
	line := l.Text
	if err != nil {
		return nil, fmt.Errorf("%q: %w", command, err)
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	if strings.HasPrefix(line, "DONE error") {
		return fields, fmt.Errorf("%q: %s", command, line)
	}
	return fields, nil
}

// WaitLine waits until the target prints a line with the given prefix and
// returns the line.
func (p *Process) WaitLine(prefix string, timeout time.Duration) (string, error) {
	l, err := p.WaitLineAfter(0, prefix, timeout)
	return l.Text, err
}

// Line is a line the target printed and its index in Lines.
type Line struct {
	Index int
	Text  string
}

// WaitLineAfter waits until the target prints a line with the given
// prefix at index seen of Lines or later, and returns it.
func (p *Process) WaitLineAfter(seen int, prefix string, timeout time.Duration) (Line, error) {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.HasPrefix(p.lines[seen], prefix) {
				l := Line{Index: seen, Text: p.lines[seen]}
				p.mu.Unlock()
				return l, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return Line{}, fmt.Errorf("target exited before printing %q", prefix)
		default:
		}
		if time.Now().After(deadline) {
			return Line{}, fmt.Errorf("target printed no %q within %v", prefix, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the process and reaps it. Safe to call more than once.
func (p *Process) Kill() {
	if p.Cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL) // the group
	p.Cmd.Process.Kill()
	p.Cmd.Wait()
	if p.DumpPath != "" {
		os.Remove(p.DumpPath)
	}
}

// Exited reports whether the process has exited (it is reaped by Kill only).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ProcState returns the State letter and TracerPid of a process from
// /proc/<pid>/status.
func ProcState(pid int) (state string, tracer int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			state = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			tracer, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return state, tracer, nil
}

// CheckNotStopped fails the test unless every thread of pid is neither
// stopped nor traced.
func CheckNotStopped(tb testing.TB, pid int) {
	tb.Helper()
	if err := NotStopped(pid); err != nil {
		tb.Fatal(err)
	}
}

// NotStopped returns an error if any thread of pid is stopped or traced.
func NotStopped(pid int) error {
	state, tracer, err := ProcState(pid)
	if err != nil {
		return fmt.Errorf("process %d: %v", pid, err)
	}
	if strings.HasPrefix(state, "Z") || strings.HasPrefix(state, "X") {
		return fmt.Errorf("process %d is dead (%s)", pid, state)
	}
	if tracer != 0 {
		return fmt.Errorf("process %d is traced by %d", pid, tracer)
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				v = strings.TrimSpace(v)
				if strings.HasPrefix(v, "T") || strings.HasPrefix(v, "t") {
					return fmt.Errorf("process %d thread %d is stopped: %s", pid, tid, v)
				}
			}
			if v, ok := strings.CutPrefix(line, "TracerPid:"); ok && strings.TrimSpace(v) != "0" {
				return fmt.Errorf("process %d thread %d is traced by %s", pid, tid, strings.TrimSpace(v))
			}
		}
	}
	return nil
}

// stderrCopy writes a target's stderr to the test's.
type stderrCopy struct{}

func (stderrCopy) Write(b []byte) (int, error) { return os.Stderr.Write(b) }

// Children returns the pids of pid's children (those of every thread),
// zombies included.
func Children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
