package targets

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Gcore has gdb's gcore write a core of the running process pid (gdb
// attaches, stops every thread, writes the core, detaches) into a
// directory of the test's and returns the core's path. The process must
// still be running afterwards, neither stopped nor traced (TracerPid 0 in
// /proc/<pid>/status, for every thread): gi's tests never leave a target
// stopped. Without gcore (make deps installs gdb) the test is skipped, or
// fails under GI_REQUIRE_PRIVILEGED=1, which forbids skipping.
func Gcore(tb testing.TB, pid int) string {
	tb.Helper()
	gcore, err := exec.LookPath("gcore")
	if err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			tb.Fatalf("gcore (gdb) is not installed: make deps installs it, and GI_REQUIRE_PRIVILEGED=1 forbids skipping (%v)", err)
		}
		tb.Skipf("gcore (gdb) is not installed: make deps installs it (%v)", err)
	}
	prefix := filepath.Join(tb.TempDir(), "core")
	cmd := exec.Command(gcore, "-o", prefix, strconv.Itoa(pid))
	// No debuginfod (gcore turns it off too), no user's gdbinit (--nx).
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS=")
	out, err := cmd.CombinedOutput()
	if nerr := NotStopped(pid); nerr != nil {
		tb.Fatalf("after gcore %d: %v\n%s", pid, nerr, out)
	}
	if err != nil {
		tb.Fatalf("gcore %d: %v\n%s", pid, err, out)
	}
	path := prefix + "." + strconv.Itoa(pid)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		tb.Fatalf("gcore %d wrote no core at %s (%v):\n%s", pid, path, err, out)
	}
	return path
}
