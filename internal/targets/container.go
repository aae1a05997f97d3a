package targets

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ContainerOptions say how StartInContainer isolates a target.
type ContainerOptions struct {
	// MonotonicOffset gives the target a time namespace whose monotonic
	// clock runs this far ahead of the host's (whole seconds).
	MonotonicOffset time.Duration
	// SharedRoot keeps the host's root directory instead of a chroot
	// holding only the binary: a PIE target needs the host's dynamic loader.
	SharedRoot bool
}

// StartInContainer runs bin the way a container runtime would: in new PID
// and mount namespaces (it is pid 1 there, with its own /proc), chrooted
// into a directory holding only the binary (unless SharedRoot), optionally with its own time
// namespace. Process.Pid is the target's pid as the host sees it; paths it
// prints (DUMP) are mapped to the host.
func StartInContainer(tb testing.TB, bin string, co ContainerOptions, args ...string) *Process {
	tb.Helper()
	unshare := []string{"--pid", "--mount", "--fork", "--kill-child", "--mount-proc"}
	if co.MonotonicOffset != 0 {
		unshare = append(unshare, "--time", "--monotonic", strconv.FormatInt(int64(co.MonotonicOffset/time.Second), 10))
	}
	root := "/"
	if co.SharedRoot {
		unshare = append(unshare, bin)
	} else {
		root = tb.TempDir()
		for _, d := range []string{"proc", "tmp"} {
			if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "target"), b, 0o755); err != nil {
			tb.Fatal(err)
		}
		unshare = append(unshare, "--root="+root, "/target")
	}
	p, err := StartProcess("unshare", append(unshare, args...)...)
	if err != nil {
		tb.Fatalf("start %s in a container: %v", bin, err)
	}
	tb.Cleanup(p.Kill)
	// The target is unshare's child.
	inner, err := childOf(p.Cmd.Process.Pid)
	if err != nil {
		tb.Fatal(err)
	}
	p.Pid = inner
	if p.DumpPath != "" {
		p.DumpPath = filepath.Join(root, p.DumpPath)
	}
	return p
}

func childOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("process %d has children %q, want one", pid, f)
	}
	return strconv.Atoi(f[0])
}

// NSTid returns the id of thread tid of process pid in the process's own
// PID namespace (the last NSpid field of its task status).
func NSTid(pid, tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.Atoi(f[len(f)-1])
			}
		}
	}
	return 0, fmt.Errorf("no NSpid in /proc/%d/task/%d/status", pid, tid)
}

// NSPid returns the pid of process pid inside its own PID namespace.
func NSPid(pid int) (int, error) { return NSTid(pid, pid) }
