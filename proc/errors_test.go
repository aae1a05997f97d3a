package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestExiting tells a process that exited (a zombie not yet reaped) from
// a live one: an EPERM from PTRACE_SEIZE on the first means it exited, on
// the second a refusal.
func TestExiting(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if Exiting(cmd.Process.Pid, 20*time.Millisecond) {
		t.Error("a sleeping process is said exiting")
	}
	cmd.Process.Kill()
	if !Exiting(cmd.Process.Pid, time.Second) {
		t.Error("a killed, unreaped process is not said exiting")
	}
	cmd.Wait()
	if !Exiting(cmd.Process.Pid, 0) {
		t.Error("a reaped process is not said exiting")
	}
	if Exiting(os.Getpid(), 0) {
		t.Error("this process is said exiting")
	}
}
