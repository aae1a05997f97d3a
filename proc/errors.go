package proc

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
)

// TracerOf returns the TracerPid of thread tid of process pid, or 0.
func TracerOf(pid, tid int) int {
	v, _ := StatusField(pid, tid, "TracerPid")
	n, _ := strconv.Atoi(v)
	return n
}

// AlreadyTraced builds the error for process pid, which another tracer
// (pid tracer) holds.
func AlreadyTraced(pid, tracer int) error {
	name, _ := os.ReadFile("/proc/" + strconv.Itoa(tracer) + "/comm")
	return fmt.Errorf("process %d: %w (pid %d, %s)", pid, ErrAlreadyTraced, tracer, strings.TrimSpace(string(name)))
}

// Exiting reports whether process pid is gone, or a zombie, or becomes
// one within the given time.
func Exiting(pid int, within time.Duration) bool {
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
