package ptrace_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

func TestExitGadget(t *testing.T) {
	amd := []byte{0x8b, 0x7c, 0x24, 0x08, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05, 0xc3}
	g, err := ptrace.ExitGadget("amd64", 0x480640, amd)
	if err != nil || g.Exit != 0x480644 || g.Syscall != 0x480649 {
		t.Errorf("amd64: %+v, %v; want exit 0x480644, syscall 0x480649", g, err)
	}
	arm := []byte{0xe0, 0x0b, 0x80, 0xb9, 0xc8, 0x0b, 0x80, 0xd2, 0x01, 0, 0, 0xd4, 0xc0, 0x03, 0x5f, 0xd6}
	g, err = ptrace.ExitGadget("arm64", 0x8a940, arm)
	if err != nil || g.Exit != 0x8a944 || g.Syscall != 0x8a948 {
		t.Errorf("arm64: %+v, %v; want exit 0x8a944, syscall 0x8a948", g, err)
	}
	if _, err := ptrace.ExitGadget("amd64", 0x1000, amd[:8]); err == nil {
		t.Error("a cut sequence was taken for the gadget")
	}
	if _, err := ptrace.ExitGadget("riscv64", 0x1000, amd); err == nil {
		t.Error("a gadget was found for an architecture gi knows none for")
	}
}

// frozenTarget is the syscaller target, its counter's address and the
// gadget of its runtime.exit.
type frozenTarget struct {
	p       *targets.Process
	mem     *proc.Memory
	counter uint64
	gadget  ptrace.Gadget
}

func startSyscaller(t *testing.T, args ...string) *frozenTarget {
	t.Helper()
	bin := targets.Build(t, "syscaller", targets.BuildOptions{})
	exe, err := elfbin.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	sym, ok := exe.Symbol("main.counter")
	if !ok {
		t.Fatal("no main.counter in the target")
	}
	p := targets.Start(t, bin, args...)
	mem, err := proc.OpenMemory(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	f := exe.Lines.FuncByName("runtime.exit")
	if f == nil {
		t.Fatal("no runtime.exit in the target's pclntab")
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := mem.ReadAt(code, f.Entry); err != nil {
		t.Fatal(err)
	}
	g, err := ptrace.ExitGadget(runtime.GOARCH, f.Entry, code)
	if err != nil {
		t.Fatal(err)
	}
	return &frozenTarget{p: p, mem: mem, counter: sym.Addr, gadget: g}
}

// checkAndRelease checks that copy f holds the counter the stop read
// (v0), then releases it: gone, reaped.
func checkAndRelease(t *testing.T, ft *frozenTarget, f *ptrace.Frozen, v0 uint64, i int) {
	t.Helper()
	cm, err := proc.OpenMemory(f.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := readWord(t, cm, ft.counter); got != v0 {
		t.Errorf("freeze %d: the copy's counter is %d, the stop's %d", i, got, v0)
	}
	cm.Close()
	if err := f.Release(); err != nil {
		t.Fatalf("release %d: %v", i, err)
	}
	if st := procState(f.Pid); st != "" {
		t.Fatalf("release %d: copy %d still there, state %q", i, f.Pid, st)
	}
}

func readWord(t *testing.T, mem interface {
	ReadAt([]byte, uint64) (int, error)
}, addr uint64) uint64 {
	t.Helper()
	var b [8]byte
	if _, err := mem.ReadAt(b[:], addr); err != nil {
		t.Fatalf("read %#x: %v", addr, err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// procState returns the state letter of pid (targets.ProcState), ""
// when the process is gone.
func procState(pid int) string {
	st, _, err := targets.ProcState(pid)
	if err != nil || st == "" {
		return ""
	}
	return st[:1]
}

// TestFreeze freezes the target again and again while its threads sit in
// system calls whose results it checks: the copy holds the memory of the
// stop while the target's moves on, stays stopped until released, is
// then gone (no zombie), and the target saw nothing.
func TestFreeze(t *testing.T) {
	targets.RequirePrivilege(t, "stopping another process and making it call clone")
	ft := startSyscaller(t)
	tr := ptrace.NewTracer()
	defer tr.Close()
	before, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	callers := map[int]bool{}
	for i := 0; i < 60; i++ {
		s, err := tr.Stop(ft.p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		v0 := readWord(t, ft.mem, ft.counter)
		// Every thread in turn makes the call: blocked in read(2),
		// nanosleep(2), a futex wait with or without a timeout,
		// epoll, or running.
		tid := s.Threads[i%len(s.Threads)].TID
		f, err := s.FreezeOn(tid, ft.gadget)
		if errors.Is(err, ptrace.ErrFreezeRefused) {
			// This thread may not make the call: stopped holding a
			// signal for the target (a child's SIGCHLD, a
			// preemption's SIGURG), or, on arm64, in a call its stop
			// does not show whole. Another must, in the same stop.
			f, err = s.Freeze(ft.gadget)
		} else {
			callers[tid] = true
		}
		if rerr := s.Resume(); rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			t.Fatalf("freeze %d: %v", i, err)
		}
		if st := procState(f.Pid); st != "t" {
			t.Errorf("freeze %d: copy %d in state %q, want t (traced, stopped)", i, f.Pid, st)
		}
		deadline := time.Now().Add(5 * time.Second)
		for readWord(t, ft.mem, ft.counter) == v0 {
			if time.Now().After(deadline) {
				t.Fatal("the target's counter did not move after the resume")
			}
			runtime.Gosched()
		}
		checkAndRelease(t, ft, f, v0, i)
		targets.CheckNotStopped(t, ft.p.Pid)
	}
	if len(callers) < 5 {
		t.Errorf("only %d threads made the call", len(callers))
	}
	after, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if after["bad"] != "0" {
		t.Errorf("the target saw wrong results: %v\n%s", after, strings.Join(ft.p.Lines(), "\n"))
	}
	for _, k := range []string{"reads", "sleeps", "children"} {
		if after[k] == before[k] {
			t.Errorf("the target's %s did not advance: %s", k, after[k])
		}
	}
}

// TestFreezeSeccomp freezes a target whose seccomp filter refuses the
// very clone gi makes it call: gi, with CAP_SYS_ADMIN, suspends the
// filter for the thread making the call; the filter stays on.
func TestFreezeSeccomp(t *testing.T) {
	targets.RequirePrivilege(t, "stopping another process and making it call clone")
	ft := startSyscaller(t, "-seccomp")
	status, err := os.ReadFile("/proc/" + strconv.Itoa(ft.p.Pid) + "/status")
	if err != nil || !strings.Contains(string(status), "Seccomp:\t2") {
		t.Fatalf("the target is not under a seccomp filter: %v\n%s", err, status)
	}
	if err := ptrace.FreezeBlocked(ft.p.Pid); err != nil {
		t.Fatalf("FreezeBlocked: %v (gi runs as root, with CAP_SYS_ADMIN)", err)
	}
	tr := ptrace.NewTracer()
	defer tr.Close()
	for i := 0; i < 10; i++ {
		s, err := tr.Stop(ft.p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		v0 := readWord(t, ft.mem, ft.counter)
		f, err := s.Freeze(ft.gadget)
		s.Resume()
		if err != nil {
			t.Fatalf("freeze %d: %v", i, err)
		}
		checkAndRelease(t, ft, f, v0, i)
	}
	if kids := targets.Children(ft.p.Pid); len(kids) > 1 { // its own child, at most
		t.Errorf("the target has children after the copies: %v", kids)
	}
	after, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if after["bad"] != "0" {
		t.Errorf("the target saw wrong results: %v\n%s", after, strings.Join(ft.p.Lines(), "\n"))
	}
}

// TestFreezeGiKilled kills the process that froze the target while the
// copy lives: let go by the dead tracer, the copy runs its first
// instruction, the exit gadget, and ends (a zombie of the target, never
// a process left stopped or running the target's code); the target saw
// nothing.
func TestFreezeGiKilled(t *testing.T) {
	if os.Getenv("GI_FREEZE_HELPER") != "" {
		freezeHelper()
		return
	}
	targets.RequirePrivilege(t, "stopping another process and making it call clone")
	ft := startSyscaller(t)
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestFreezeGiKilled$")
		cmd.Env = append(os.Environ(), "GI_FREEZE_HELPER="+fmt.Sprintf("%d %d %d", ft.p.Pid, ft.gadget.Syscall, ft.gadget.Exit))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var child int
		if _, err := fmt.Fscan(out, &child); err != nil || child <= 0 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper: no copy pid: %v", err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for procState(child) != "Z" && procState(child) != "" {
			if time.Now().After(deadline) {
				t.Fatalf("copy %d left in state %q after gi was killed", child, procState(child))
			}
			time.Sleep(10 * time.Millisecond)
		}
		targets.CheckNotStopped(t, ft.p.Pid)
	}
	after, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if after["bad"] != "0" {
		t.Errorf("the target saw wrong results: %v\n%s", after, strings.Join(ft.p.Lines(), "\n"))
	}
}

// freezeHelper freezes the process GI_FREEZE_HELPER names, prints the
// copy's pid and waits to be killed.
func freezeHelper() {
	var pid int
	var g ptrace.Gadget
	fmt.Sscan(os.Getenv("GI_FREEZE_HELPER"), &pid, &g.Syscall, &g.Exit)
	tr := ptrace.NewTracer()
	s, err := tr.Stop(pid)
	if err != nil {
		fmt.Println(-1)
		return
	}
	f, err := s.Freeze(g)
	s.Resume()
	if err != nil {
		fmt.Println(-1)
		return
	}
	fmt.Println(f.Pid)
	time.Sleep(time.Minute)
}

func TestMaskSwapped(t *testing.T) {
	const epollPwait, ppoll = 281, 271
	for _, c := range []struct {
		nr   int64
		arg4 uint64
		want bool
	}{
		{-1, 0, false},
		{202, 0, false},        // futex
		{epollPwait, 0, false}, // Go's netpoller: no mask
		{epollPwait, 0xc000010000, true},
		{ppoll, 0, true},
	} {
		if got := ptrace.MaskSwapped(c.nr, c.arg4, epollPwait, ppoll); got != c.want {
			t.Errorf("maskSwapped(%d, %#x) = %v, want %v", c.nr, c.arg4, got, c.want)
		}
	}
}

// TestFreezeReleaseIn ends copies in the stop they were made in, as a
// caller that gives one up before resuming does: no child is left.
func TestFreezeReleaseIn(t *testing.T) {
	targets.RequirePrivilege(t, "stopping another process and making it call clone")
	ft := startSyscaller(t)
	tr := ptrace.NewTracer()
	defer tr.Close()
	for i := 0; i < 5; i++ {
		s, err := tr.Stop(ft.p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Freeze(ft.gadget)
		if err != nil {
			s.Resume()
			t.Fatal(err)
		}
		rerr := f.ReleaseIn(s)
		s.Resume()
		if rerr != nil {
			t.Fatalf("release %d: %v", i, rerr)
		}
		if st := procState(f.Pid); st != "" {
			t.Fatalf("release %d: copy %d still there, state %q", i, f.Pid, st)
		}
	}
	after, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if after["bad"] != "0" {
		t.Errorf("the target saw wrong results: %v", after)
	}
}
