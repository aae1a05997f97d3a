package targets

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// StartToCrash runs bin as Start does, with GOTRACEBACK=crash and its core
// size limit raised to the hard limit; Crash then kills it with SIGQUIT
// and returns the core the kernel wrote. The kernel's core_pattern points
// at a directory of the test's while the test runs, and is restored after
// it. The test must not be parallel (the environment is the test
// process's); tests of other packages that crash targets, running at the
// same time in other processes, wait for the pattern (lockCorePattern).
func StartToCrash(t testing.TB, bin string, args ...string) *Crashing {
	t.Helper()
	dir := t.TempDir()
	lockCorePattern(t)
	const file = "/proc/sys/kernel/core_pattern"
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(filepath.Join(dir, "core.%p")), 0); err != nil {
		t.Fatalf("point the kernel's core_pattern at the test: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(file, old, 0); err != nil {
			t.Errorf("restore the core pattern %q: %v", old, err)
		}
	})
	t.Setenv("GOTRACEBACK", "crash")
	// The dump the runtime prints as it dies (every goroutine, then the
	// registers) goes to a file, its tail logged if the test fails: on
	// the test's stderr it would bury the failures of other tests.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer stderr.Close()
		if !t.Failed() {
			return
		}
		if b, err := os.ReadFile(stderr.Name()); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("the target's stderr, its last %d lines:\n%s", min(len(lines), 40), strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	p := start(t, stderr, bin, args...)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max == 0 {
		t.Fatal("the hard RLIMIT_CORE is 0: no core can be written")
	}
	lim.Cur = lim.Max
	if err := unix.Prlimit(p.Pid, unix.RLIMIT_CORE, &lim, nil); err != nil {
		t.Fatalf("raise the target's RLIMIT_CORE: %v", err)
	}
	return &Crashing{Process: p, dir: dir}
}

// Crashing is a target started by StartToCrash.
type Crashing struct {
	*Process
	dir string
}

// Crash kills the target with SIGQUIT (the runtime then dumps every
// goroutine on stderr and aborts) and returns the path of its core.
func (c *Crashing) Crash(t testing.TB) string {
	t.Helper()
	if err := syscall.Kill(c.Pid, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	return c.wait(t)
}

// CrashThread is Crash with SIGQUIT sent to thread tid: the runtime's
// handler then runs on that thread, interrupting what it ran.
func (c *Crashing) CrashThread(t testing.TB, tid int) string {
	t.Helper()
	if err := syscall.Tgkill(c.Pid, tid, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	return c.wait(t)
}

// Dump returns what the target printed on stderr (the runtime's dump of
// every goroutine as it crashed).
func (c *Crashing) Dump(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wait waits for the crashed target and returns its core.
func (c *Crashing) wait(t testing.TB) string {
	t.Helper()
	err := c.Cmd.Wait()
	if ws, ok := c.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.CoreDump() {
		t.Fatalf("the target did not dump core: %v", err)
	}
	return filepath.Join(c.dir, "core."+strconv.Itoa(c.Pid))
}

// lockCorePattern holds a lock on the machine's core_pattern until t and
// its cleanups end: go test runs packages side by side, and two tests
// pointing the pattern at their own directories would each find the
// other's cores. The lock is a file lock (flock), released by the kernel
// if the test process dies. Within one test process the tests that crash
// targets run one after the other (they are not parallel), and a test may
// crash several: the process takes the file lock once, and lets it go
// when the last of its holders ends.
func lockCorePattern(t testing.TB) {
	t.Helper()
	coreLock.Lock()
	defer coreLock.Unlock()
	if coreLock.holders == 0 {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "gi-core-pattern.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("lock the core pattern: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("lock the core pattern: %v", err)
		}
		coreLock.file = f
	}
	coreLock.holders++
	t.Cleanup(func() { // registered first: runs after the pattern is restored
		coreLock.Lock()
		defer coreLock.Unlock()
		if coreLock.holders--; coreLock.holders == 0 {
			coreLock.file.Close()
			coreLock.file = nil
		}
	})
}

// coreLock is this process's hold on the core pattern's file lock.
var coreLock struct {
	sync.Mutex
	holders int
	file    *os.File
}
