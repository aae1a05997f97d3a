package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gi-debug/gi/ptrace"
)

// resolvePID turns a pid or a process name into a pid. A name must match
// exactly one process (by comm or by the base name of argv[0]).
func resolvePID(arg string) (int, error) {
	if arg == "" {
		return 0, fmt.Errorf("no process given: a pid, a process name, or --ns-pid with --in")
	}
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

// pidText shows a pid with its pid inside the process's own namespace when
// they differ: "8406 (1 in its PID namespace)".
func pidText(pid, nsPid int) string {
	if nsPid == 0 || nsPid == pid {
		return strconv.Itoa(pid)
	}
	return fmt.Sprintf("%d (%d in its PID namespace)", pid, nsPid)
}

// resolveNSPid finds the pid, as gi sees it, of the process that is nsPid
// inside the PID namespace of process in (any process of a container).
func resolveNSPid(nsPid, in int) (int, error) {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", in))
	if err != nil {
		return 0, fmt.Errorf("--in %d: %w", in, err)
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
		if n, err := ptrace.NamespacePID(pid); err == nil && n == nsPid {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %d in the PID namespace of process %d", nsPid, in)
}

// targetFlags are the ways to name a process shared by ps, trace and top.
type targetFlags struct {
	nsPid, in int
}

// resolve returns the pid gi works on: from --ns-pid/--in, else the argument.
func (f targetFlags) resolve(arg string) (int, error) {
	if f.nsPid != 0 || f.in != 0 {
		if f.nsPid == 0 || f.in == 0 {
			return 0, fmt.Errorf("--ns-pid and --in go together")
		}
		if arg != "" {
			return 0, fmt.Errorf("give either a pid or --ns-pid/--in, not both")
		}
		return resolveNSPid(f.nsPid, f.in)
	}
	return resolvePID(arg)
}

// addTargetFlags declares --ns-pid and --in.
func addTargetFlags(f *pflag.FlagSet, t *targetFlags) {
	f.IntVar(&t.nsPid, "ns-pid", 0, "the target's pid inside its container's PID namespace (with --in)")
	f.IntVar(&t.in, "in", 0, "any process of the container whose namespace --ns-pid refers to")
}

// firstArg returns args[0], or "" if there is none.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
