package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// resolvePID turns a pid or a process name into a pid. A name must match
// exactly one process (by comm or by the base name of argv[0]).
func resolvePID(arg string) (int, error) {
	if pid, err := strconv.Atoi(arg); err == nil {
		if pid <= 0 {
			return 0, fmt.Errorf("invalid pid %d", pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return 0, fmt.Errorf("no such process: %d", pid)
		}
		return pid, nil
	}
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
		if strings.TrimSpace(string(comm)) == arg {
			matches = append(matches, pid)
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != "" && filepath.Base(argv0) == arg {
			matches = append(matches, pid)
		}
	}
	sort.Ints(matches)
	switch len(matches) {
	case 0:
		return 0, fmt.Errorf("no process named %q", arg)
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for i, p := range matches {
		ids[i] = strconv.Itoa(p)
	}
	return 0, fmt.Errorf("%q is ambiguous: %d processes match (pids %s): give a pid", arg, len(matches), strings.Join(ids, ", "))
}
