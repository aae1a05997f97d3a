package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSuchProcess means the pid names no process.
	ErrNoSuchProcess = errors.New("no such process")
	// ErrPermission means the caller may not trace or read the process.
	ErrPermission = errors.New("permission denied: reading another process needs CAP_SYS_PTRACE (in a container: --cap-add=SYS_PTRACE; in Kubernetes: securityContext.capabilities.add [SYS_PTRACE])")
	// ErrAlreadyTraced means another tracer (a debugger, strace) is attached.
	ErrAlreadyTraced = errors.New("already traced by another process")
	// ErrProcessExited means the process exited while it was being read.
	ErrProcessExited = errors.New("process exited during the snapshot")
	// ErrClosed means the Tracer was closed.
	ErrClosed = errors.New("tracer closed")
)

// tracerOf returns the TracerPid of a thread, or 0.
func tracerOf(pid, tid int) int {
	v, _ := StatusField(pid, tid, "TracerPid")
	n, _ := strconv.Atoi(v)
	return n
}

// alreadyTraced builds the error for a thread another tracer holds.
func alreadyTraced(pid, tracer int) error {
	name, _ := os.ReadFile("/proc/" + strconv.Itoa(tracer) + "/comm")
	return fmt.Errorf("process %d: %w (pid %d, %s)", pid, ErrAlreadyTraced, tracer, strings.TrimSpace(string(name)))
}

// seizeRefused explains an EPERM from PTRACE_SEIZE on thread tid of
// process pid: another tracer holds it; or the process is exiting (the
// kernel refuses to attach to an exiting task, whatever the caller's
// privileges); or else the caller may not trace it.
func seizeRefused(pid, tid int) error {
	if tr := tracerOf(pid, tid); tr != 0 && tr != os.Getpid() {
		return alreadyTraced(pid, tr)
	}
	if exiting(pid, 100*time.Millisecond) {
		return fmt.Errorf("process %d: %w", pid, ErrProcessExited)
	}
	return fmt.Errorf("process %d: %w", pid, ErrPermission)
}

// exiting reports whether process pid is gone, or a zombie, or becomes
// one within the given time.
func exiting(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		state, err := StatusField(pid, 0, "State")
		if err != nil || strings.HasPrefix(state, "Z") || strings.HasPrefix(state, "X") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
