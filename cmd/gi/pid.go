package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/gi-debug/gi/proc"
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
		if err := notSelf(pid); err != nil {
			return 0, err
		}
		if !proc.Exists(pid) {
			return 0, fmt.Errorf("no such process: %d", pid)
		}
		if err := notZombie(pid); err != nil {
			return 0, err
		}
		return pid, nil
	}
	return proc.Find(arg) // never gi itself
}

// notSelf refuses gi's own process, or one of its threads: stopping it
// would stop the thread that stops it, and a trace of it would trace its
// own reading of the trace.
func notSelf(pid int) error {
	self := os.Getpid()
	if pid == self {
		return fmt.Errorf("pid %d is gi itself: give the pid of another process", pid)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", self, pid)); err == nil {
		return fmt.Errorf("%d is a thread of gi itself (pid %d): give the pid of another process", pid, self)
	}
	return nil
}

// notZombie refuses a process that has exited and not been reaped: its
// memory and threads are gone, its /proc entry stays until its parent
// waits for it. (A process whose first thread alone has exited shows
// that thread as a zombie too, and is alive.)
func notZombie(pid int) error {
	if st, _, err := proc.StateAndExitSignal(pid); err != nil || st != 'Z' {
		return nil
	}
	if n, err := proc.StatusField(pid, 0, "Threads"); err == nil && n != "" && n != "1" {
		return nil
	}
	parent := ""
	if pp, err := proc.StatusField(pid, 0, "PPid"); err == nil && pp != "" && pp != "0" {
		parent = " (pid " + pp + ")"
	}
	return fmt.Errorf("process %d is a zombie: it has exited and its parent%s has not reaped it", pid, parent)
}

// pidText shows a pid with its pid inside the process's own namespace when
// they differ: "8406 (1 in its PID namespace)".
func pidText(pid, nsPid int) string {
	if nsPid == 0 || nsPid == pid {
		return strconv.Itoa(pid)
	}
	return fmt.Sprintf("%d (%d in its PID namespace)", pid, nsPid)
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
		pid, err := proc.InNamespace(f.nsPid, f.in)
		if err != nil {
			return 0, fmt.Errorf("--ns-pid %d --in %d: %w", f.nsPid, f.in, err)
		}
		if err := notSelf(pid); err != nil {
			return 0, fmt.Errorf("--ns-pid %d --in %d: %w", f.nsPid, f.in, err)
		}
		if err := notZombie(pid); err != nil {
			return 0, fmt.Errorf("--ns-pid %d --in %d: %w", f.nsPid, f.in, err)
		}
		return pid, nil
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
