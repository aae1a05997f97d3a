package ptrace

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gi-debug/gi/proc"
)

// ErrClosed means the Tracer was closed. The other errors a stop returns
// wrap proc's sentinels (proc.ErrNoSuchProcess, proc.ErrPermission,
// proc.ErrAlreadyTraced, proc.ErrProcessExited).
var ErrClosed = errors.New("tracer closed")

// seizeRefused explains an EPERM from PTRACE_SEIZE on thread tid of
// process pid: another tracer holds it; or the process is exiting (the
// kernel refuses to attach to an exiting task, whatever the caller's
// privileges); or else the caller may not trace it.
func seizeRefused(pid, tid int) error {
	if tr := proc.TracerOf(pid, tid); tr != 0 && tr != os.Getpid() {
		return proc.AlreadyTraced(pid, tr)
	}
	if proc.Exiting(pid, 100*time.Millisecond) {
		return fmt.Errorf("process %d: %w", pid, proc.ErrProcessExited)
	}
	return fmt.Errorf("process %d: %w", pid, proc.ErrPermission)
}
