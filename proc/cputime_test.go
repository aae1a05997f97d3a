package proc

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStatTime(t *testing.T) {
	line := []byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1186 0 0 0 250 75 0 0 20 0 9 0 12345 0 0")
	got, err := parseStatTime(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; got != want {
		t.Fatalf("utime+stime = %v, want %v", got, want)
	}
	if _, err := parseStatTime([]byte("1 (x) S 1")); err == nil {
		t.Fatal("a short stat line parsed")
	}
}

// TestCPUClockOfSelf burns a known stretch of CPU on a thread of this
// process and checks the clock saw at least that, and not more than the
// wall time all the process's threads could have run meanwhile.
func TestCPUClockOfSelf(t *testing.T) {
	c, err := NewCPUClock(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	burn := 100 * time.Millisecond
	runtime.LockOSThread()
	base := threadCPU(t)
	for spent := time.Duration(0); spent < burn; {
		// The thread's own CPU clock: what it ran, not what passed.
		spent = threadCPU(t) - base
		if time.Since(start) > 10*time.Second {
			t.Fatal("did not get 100ms of CPU in 10s")
		}
	}
	runtime.UnlockOSThread()
	got, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	if got < burn-burn/10 || got > wall*time.Duration(runtime.NumCPU()+1) {
		t.Fatalf("CPU time %v after burning %v over %v of wall time", got, burn, wall)
	}
}

// threadCPU is the calling thread's CPU time.
func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// TestMinorFaults counts this process's minor faults before and after it
// writes 64 fresh pages: at least 64 more.
func TestMinorFaults(t *testing.T) {
	before, err := MinorFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(-1, 0, 64<<12, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := 0; i < len(m); i += 1 << 12 {
		m[i] = 1
	}
	after, err := MinorFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after < before+64 {
		t.Errorf("minor faults %d, then %d after writing 64 fresh pages", before, after)
	}
}

// TestStatFields: the fields after a command name holding spaces and
// parentheses, numbered as in proc(5); a line without a name or a state
// is refused, and a missing field is named.
func TestStatFields(t *testing.T) {
	f, err := statFields([]byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1186 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	if string(f[0]) != "S" {
		t.Fatalf("state %q, want S", f[0])
	}
	if n, err := statUint(f, 10, "minflt"); err != nil || n != 1186 {
		t.Fatalf("minflt %d, %v; want 1186", n, err)
	}
	if _, err := statUint(f, 14, "utime"); err == nil || !strings.Contains(err.Error(), "utime (field 14)") {
		t.Fatalf("a missing field: %v", err)
	}
	for _, bad := range []string{"", "4242 no name S 1", "4242 (x)", "4242 (x)   "} {
		if _, err := statFields([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
