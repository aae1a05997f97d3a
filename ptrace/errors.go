package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
