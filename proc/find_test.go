package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFind finds processes by the name of their executable: one copy of
// sleep under a unique name is found, two are ambiguous (with both pids
// named), and a name nothing runs under is an error.
func TestFind(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("gi-find-%d", os.Getpid())
	bin := filepath.Join(t.TempDir(), name)
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	one := start()
	if pid, err := Find(name); err != nil || pid != one.Process.Pid {
		t.Errorf("Find(%q) = %d, %v; want %d", name, pid, err, one.Process.Pid)
	}
	two := start()
	_, err = Find(name)
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), fmt.Sprint(two.Process.Pid)) {
		t.Errorf("Find(%q) with two running: %v; want ErrAmbiguous naming pid %d", name, err, two.Process.Pid)
	}
	if pid, err := Find(name + "-none"); err == nil {
		t.Errorf("Find of a name nothing runs under = %d, want an error", pid)
	}
	if !Exists(one.Process.Pid) || Exists(1<<22+1) {
		t.Error("Exists is wrong about a running process or an impossible pid")
	}
}

// TestInNamespace maps a pid inside a PID namespace to the pid this
// process sees: in its own namespace, every process is itself.
func TestInNamespace(t *testing.T) {
	self := os.Getpid()
	ns, err := NamespacePID(self)
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := InNamespace(ns, self); err != nil || pid != self {
		t.Errorf("InNamespace(%d, %d) = %d, %v; want %d", ns, self, pid, err, self)
	}
	if _, err := InNamespace(1<<22+1, self); err == nil {
		t.Error("InNamespace of a pid no process has: no error")
	}
}
