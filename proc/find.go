package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrAmbiguous means a name matches more than one process.
var ErrAmbiguous = errors.New("ambiguous")

// Exists reports whether pid names a process gi can see.
func Exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// Find returns the pid of the one process (other than this one) named
// name: by its comm, or by the base name of its argv[0]. No match is
// an error; several are ErrAmbiguous, with their pids.
func Find(name string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var matches []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == name {
			matches = append(matches, pid)
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != "" && filepath.Base(argv0) == name {
			matches = append(matches, pid)
		}
	}
	sort.Ints(matches)
	switch len(matches) {
	case 0:
		return 0, fmt.Errorf("no process named %q", name)
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for i, p := range matches {
		ids[i] = strconv.Itoa(p)
	}
	return 0, fmt.Errorf("%q is %w: %d processes match (pids %s): give a pid", name, ErrAmbiguous, len(matches), strings.Join(ids, ", "))
}

// InNamespace returns the pid, as this process sees it, of the process
// that is nsPid inside the PID namespace of process in (any process of a
// container).
func InNamespace(nsPid, in int) (int, error) {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", in))
	if err != nil {
		return 0, fmt.Errorf("PID namespace of process %d: %w", in, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil || ns != want {
			continue
		}
		if n, err := NamespacePID(pid); err == nil && n == nsPid {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %d in the PID namespace of process %d", nsPid, in)
}
