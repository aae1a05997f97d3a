package ptrace_test

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

func TestFindGadget(t *testing.T) {
	amdExit := ptrace.Code{Entry: 0x480640, Bytes: []byte{0x8b, 0x7c, 0x24, 0x08, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05, 0xc3}}
	amdFutex := ptrace.Code{Entry: 0x481000, Bytes: []byte{
		0x48, 0x8b, 0x7c, 0x24, 0x08, 0x8b, 0x74, 0x24, 0x10, 0x8b, 0x54, 0x24, 0x14, 0x4c, 0x8b, 0x54, 0x24, 0x18,
		0x4c, 0x8b, 0x44, 0x24, 0x20, 0x44, 0x8b, 0x4c, 0x24, 0x28, 0xb8, 0xca, 0, 0, 0, 0x0f, 0x05, 0x89, 0x44, 0x24, 0x30, 0xc3}}
	hexBytes := func(h string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(h, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Go 1.26's, as go tool objdump shows it (Go 1.20's differs in
	// m.procid's offset only).
	amdClone := ptrace.Code{Entry: 0x47e000, Bytes: hexBytes("8b7c2408 488b742410 48c7c200000000 49c7c200000000 49c7c000000000 " +
		"4c8b6c2418 4c8b4c2420 4c8b642428 4983fd00 7418 4983f900 7412 4d8d8580000000 4983c008 4881cf00000800 " +
		"b838000000 0f05 4883f800 7405 89442430 c3 4889f4 4983fd00 7426 4983f900 7420 b8ba000000 0f05 49894540 " +
		"4d896930 644c890c25f8ffffff 4d89ce e8d4e2ffff 41ffd4 bf6f000000 b83c000000 0f05 ebf2")}
	g, err := ptrace.FindGadget("amd64", amdExit, amdFutex, amdClone)
	if err != nil || g.Exit != 0x480644 || g.Syscall != 0x480649 || g.Clone != 0x47e050 || g.Futex != 0x481021 {
		t.Errorf("amd64: %+v, %v; want exit 0x480644, syscall 0x480649, clone 0x47e050, futex 0x481021", g, err)
	}
	noCall := amdClone
	noCall.Bytes = slices.Clone(amdClone.Bytes)
	copy(noCall.Bytes[len(noCall.Bytes)-18:], []byte{0x90, 0x90, 0x90}) // NOPs for CALL R12
	if _, err := ptrace.FindGadget("amd64", amdExit, amdFutex, noCall); err == nil {
		t.Error("amd64: a runtime.clone whose child does not call fn was taken")
	}
	framed := amdFutex
	framed.Bytes = append([]byte{0x55}, amdFutex.Bytes...) // PUSHQ BP: a frame
	if _, err := ptrace.FindGadget("amd64", amdExit, framed, amdClone); err == nil {
		t.Error("a runtime.futex with a frame was taken")
	}
	cut := amdExit
	cut.Bytes = cut.Bytes[:8]
	if _, err := ptrace.FindGadget("amd64", cut, amdFutex, amdClone); err == nil {
		t.Error("a cut exit sequence was taken for the gadget")
	}
	if _, err := ptrace.FindGadget("riscv64", amdExit, amdFutex, amdClone); err == nil {
		t.Error("a gadget was found for an architecture gi knows none for")
	}
	le := func(ws ...uint32) []byte {
		b := make([]byte, 4*len(ws))
		for i, w := range ws {
			binary.LittleEndian.PutUint32(b[4*i:], w)
		}
		return b
	}
	// Go 1.20 to 1.26, as go tool objdump shows them.
	armExit := ptrace.Code{Entry: 0x8a940, Bytes: le(0xb9800be0, 0xd2800bc8, 0xd4000001, 0xd65f03c0)}
	armFutex := ptrace.Code{Entry: 0x8b000, Bytes: le(0xf94007e0, 0xb98013e1, 0xb98017e2, 0xf9400fe3, 0xf94013e4,
		0xb9802be5, 0xd2800c48, 0xd4000001, 0xb90033e0, 0xd65f03c0)}
	armClone := ptrace.Code{Entry: 0x8c000, Bytes: le(0xb9800be0, 0xf9400be1, 0xf9400fea, 0xf94013eb, 0xf94017ec,
		0xf81f802a, 0xf81f002b, 0xf81e802c, 0xd2809a4a, 0xf81e002a, 0xd2801b88, 0xd4000001, 0xeb1f001f, 0x54000060,
		0xb90033e0, 0xd65f03c0, 0xf85e03ea, 0xd2809a40, 0xeb00015f, 0x54000060, 0xaa1f03e0, 0xf9000000, 0xd2801648,
		0xd4000001, 0xf85e83ec, 0xf85f03eb, 0xf85f83ea, 0xf100015f, 0x540000c0, 0xf100017f, 0x54000080, 0xf9002540,
		0xf900196a, 0xaa0b03fc, 0xaa0c03e0, 0xd63f0000, 0x52800de0, 0xd2800ba8, 0xd4000001, 0x17fffffe)}
	g, err = ptrace.FindGadget("arm64", armExit, armFutex, armClone)
	if err != nil || g.Exit != 0x8a944 || g.Syscall != 0x8a948 || g.Futex != 0x8b01c || g.Clone != 0x8c02c {
		t.Errorf("arm64: %+v, %v; want exit 0x8a944, syscall 0x8a948, futex 0x8b01c, clone 0x8c02c", g, err)
	}
	moved := armClone
	moved.Bytes = append([]byte(nil), armClone.Bytes...)
	copy(moved.Bytes[34*4:], le(0xd503201f)) // NOP where fn is loaded for the call
	if _, err := ptrace.FindGadget("arm64", armExit, armFutex, moved); err == nil {
		t.Error("a runtime.clone whose child does not call fn was taken")
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
	var code [3]ptrace.Code
	for i, name := range []string{"runtime.exit", "runtime.futex", "runtime.clone"} {
		f := exe.Lines.FuncByName(name)
		if f == nil {
			t.Fatalf("no %s in the target's pclntab", name)
		}
		b := make([]byte, f.End-f.Entry)
		if _, err := mem.ReadAt(b, f.Entry); err != nil {
			t.Fatal(err)
		}
		code[i] = ptrace.Code{Entry: f.Entry, Bytes: b}
	}
	g, err := ptrace.FindGadget(runtime.GOARCH, code[0], code[1], code[2])
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
	callers, refused := map[int]bool{}, map[int]bool{}
	for i := 0; i < 60; i++ {
		s, err := tr.Stop(ft.p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		v0 := readWord(t, ft.mem, ft.counter)
		// Every thread in turn is asked to make the call: blocked in
		// read(2), nanosleep(2), a futex wait with or without a
		// timeout, epoll, or running. Only one parked in
		// runtime.futex's wait may (ptrace.Gadget).
		tid := s.Threads[i%len(s.Threads)].TID
		f, err := s.FreezeOn(tid, ft.gadget)
		if errors.Is(err, ptrace.ErrFreezeRefused) {
			refused[tid] = true
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
	if len(callers) < 2 || len(refused) == 0 {
		t.Errorf("%d threads made the call, %d were refused: want 2 or more parked in runtime.futex making it, the others (in read, nanosleep, epoll, running) refused", len(callers), len(refused))
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
		cmd.Env = append(os.Environ(), "GI_FREEZE_HELPER="+helperArgs(ft, "", ""))
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

// helperArgs is GI_FREEZE_HELPER's value: the target, its gadget, and
// where the helper kills itself: at point ("" for never) of the clone's
// call or, phase "reap", of the call that reaps the copy.
func helperArgs(ft *frozenTarget, point, phase string) string {
	g := ft.gadget
	return fmt.Sprintf("%d %d %d %d %d %s %s", ft.p.Pid, g.Syscall, g.Exit, g.Clone, g.Futex, cmp.Or(point, "-"), cmp.Or(phase, "-"))
}

// freezeHelper freezes the process GI_FREEZE_HELPER names, prints the
// copy's pid and waits to be killed; or kills itself (SIGKILL) at the
// point it names, in the call that makes the copy or in the one that
// reaps it.
func freezeHelper() {
	var pid int
	var g ptrace.Gadget
	var point, phase string
	fmt.Sscan(os.Getenv("GI_FREEZE_HELPER"), &pid, &g.Syscall, &g.Exit, &g.Clone, &g.Futex, &point, &phase)
	die := func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	if phase != "reap" {
		ptrace.SetTestPoint(die)
	}
	tr := ptrace.NewTracer()
	s, err := tr.Stop(pid)
	if err != nil {
		fmt.Println(-1)
		return
	}
	f, err := s.Freeze(g)
	s.Resume()
	if err != nil {
		fmt.Println(-1, err)
		return
	}
	fmt.Println(f.Pid)
	if phase == "reap" {
		ptrace.SetTestPoint(die)
		f.Release()
		fmt.Println("released")
	}
	time.Sleep(time.Minute)
}

// TestFreezeTracerKilledInCall kills the tracer (SIGKILL) at each point
// of the calls it makes the target's thread make, the clone that makes
// the copy and the wait4 that reaps it: registers set and not yet run,
// in the call's entry stop, in its exit stop, back in the interrupt stop
// before the registers go back, with the copy stopped. Let go there, the
// thread makes the call itself and returns from runtime.futex as from a
// wait that woke early; the copy ends the moment it runs. After each,
// the target runs on, saw nothing, and has no child but zombie copies,
// which the next freeze reaps.
func TestFreezeTracerKilledInCall(t *testing.T) {
	targets.RequirePrivilege(t, "stopping another process and making it call clone")
	ft := startSyscaller(t)
	tr := ptrace.NewTracer()
	defer tr.Close()
	before, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ point, phase string }{
		{"frame", "clone"}, {"entry", "clone"}, {"exit", "clone"}, {"returned", "clone"}, {"copy-stopped", "clone"},
		{"frame", "reap"}, {"entry", "reap"}, {"exit", "reap"}, {"returned", "reap"},
	}
	for round := 0; round < 3; round++ {
		for _, c := range cases {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestFreezeGiKilled$")
			cmd.Env = append(os.Environ(), "GI_FREEZE_HELPER="+helperArgs(ft, c.point, c.phase))
			out, err := cmd.Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("%s %s: the helper was not killed there: %v\n%s", c.phase, c.point, err, out)
			}
			if strings.HasPrefix(string(out), "-1") {
				t.Fatalf("%s %s: the helper could not freeze: %s", c.phase, c.point, out)
			}
			if c.phase == "reap" && !strings.Contains(string(out), "\n") {
				t.Fatalf("%s %s: the helper died before the copy was made: %q", c.phase, c.point, out)
			}
			// The target runs on: not stopped, its counter moving, its
			// checks passing, and no child of it left running.
			if !proc.Alive(ft.p.Pid) {
				t.Fatalf("%s %s: the target ended: %s", c.phase, c.point, strings.Join(ft.p.Lines(), "\n"))
			}
			targets.CheckNotStopped(t, ft.p.Pid)
			v0 := readWord(t, ft.mem, ft.counter)
			deadline := time.Now().Add(5 * time.Second)
			for readWord(t, ft.mem, ft.counter) == v0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s %s: the target's counter stopped", c.phase, c.point)
				}
				runtime.Gosched()
			}
			res, err := ft.p.Do("check", 10*time.Second)
			if err != nil {
				t.Fatalf("%s %s: the target does not answer: %v", c.phase, c.point, err)
			}
			if res["bad"] != "0" {
				t.Fatalf("%s %s: the target saw wrong results: %v\n%s", c.phase, c.point, res, strings.Join(ft.p.Lines(), "\n"))
			}
			deadline = time.Now().Add(5 * time.Second)
			for {
				running := proc.SilentChildren(ft.p.Pid, false)
				if len(running) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s %s: children of the target left running: %v", c.phase, c.point, running)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The next freeze reaps what was left.
			s, err := tr.Stop(ft.p.Pid)
			if err != nil {
				t.Fatal(err)
			}
			f, err := s.Freeze(ft.gadget)
			if err == nil {
				err = f.ReleaseIn(s)
			}
			s.Resume()
			if err != nil {
				t.Fatalf("%s %s: the next freeze: %v", c.phase, c.point, err)
			}
			if z := proc.SilentChildren(ft.p.Pid, true); len(z) > 0 {
				t.Fatalf("%s %s: zombie copies left after the next freeze (which reaped %d): %v", c.phase, c.point, f.LeftReaped, z)
			}
		}
	}
	after, err := ft.p.Do("check", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"reads", "sleeps", "children"} {
		if after[k] == before[k] {
			t.Errorf("the target's %s did not advance: %s", k, after[k])
		}
	}
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
