package proc

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// StatusField returns the value of one field of /proc/<pid>/status (pid 0:
// gi's own, /proc/self), or of /proc/<pid>/task/<tid>/status when tid is not
// 0, with surrounding blanks trimmed; "" when the kernel does not report it.
func StatusField(pid, tid int, field string) (string, error) {
	path := "/proc/" + strconv.Itoa(pid)
	if pid == 0 {
		path = "/proc/self"
	}
	if tid != 0 {
		path += "/task/" + strconv.Itoa(tid)
	}
	b, err := os.ReadFile(path + "/status")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		}
		return "", fmt.Errorf("process %d: read %s/status: %w", pid, path, err)
	}
	prefix := field + ":"
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}

// innermostID parses an NSpid field ("8406\t1"): the id in the innermost
// PID namespace, the one the process itself sees. def is returned for an
// empty field (kernels before 4.1).
func innermostID(nspid string, def int) (int, error) {
	f := strings.Fields(nspid)
	if len(f) == 0 {
		return def, nil
	}
	return strconv.Atoi(f[len(f)-1])
}

// NamespacePID returns the pid of process pid inside its own PID namespace
// (the last NSpid field of /proc/<pid>/status): the pid a container shows.
func NamespacePID(pid int) (int, error) {
	v, err := StatusField(pid, 0, "NSpid")
	if err != nil {
		return 0, err
	}
	return innermostID(v, pid)
}

// HasCapabilities reports whether gi's effective capability set (CapEff in
// /proc/self/status) holds every capability in caps (unix.CAP_* numbers).
// ok is false when it cannot tell.
func HasCapabilities(caps ...int) (has, ok bool) {
	v, err := StatusField(0, 0, "CapEff")
	if err != nil || v == "" {
		return false, false
	}
	eff, err := strconv.ParseUint(v, 16, 64)
	if err != nil {
		return false, false
	}
	for _, c := range caps {
		if eff&(1<<uint(c)) == 0 {
			return false, true
		}
	}
	return true, true
}

// NamespaceTIDs maps the thread ids of process pid as its own PID namespace
// sees them (what the Go runtime stores in m.procid) to the ids gi sees, for
// the threads in tids (all of the process's threads when tids is nil). It
// returns nil when the process is in gi's own PID namespace: the ids agree.
// Threads that exit while it runs are left out.
func NamespaceTIDs(pid int, tids []int) (map[int]int, error) {
	same, err := samePIDNamespace(pid)
	if err != nil || same {
		return nil, err
	}
	if tids == nil {
		if tids, err = Threads(pid); err != nil {
			return nil, err
		}
	}
	out := make(map[int]int, len(tids))
	for _, tid := range tids {
		v, err := StatusField(pid, tid, "NSpid")
		if err != nil {
			continue // the thread exited
		}
		if ns, err := innermostID(v, tid); err == nil {
			out[ns] = tid
		}
	}
	return out, nil
}

// samePIDNamespace reports whether process pid is in gi's PID namespace.
func samePIDNamespace(pid int) (bool, error) {
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		}
		return false, fmt.Errorf("process %d: PID namespace: %w", pid, err)
	}
	ours, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return false, fmt.Errorf("own PID namespace: %w", err)
	}
	return theirs == ours, nil
}

// Threads returns the thread ids of process pid, sorted.
func Threads(pid int) ([]int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("process %d: %w", pid, ErrPermission)
		}
		return nil, fmt.Errorf("process %d: list threads: %w", pid, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("process %d: list threads: %w", pid, err)
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) == 0 {
		return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
	}
	sort.Ints(tids)
	return tids, nil
}
