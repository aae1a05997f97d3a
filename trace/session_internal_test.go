package trace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPermissionError checks that a refusal from the kernel is blamed on
// missing capabilities only when gi lacks them: gi runs here with them,
// so the kernel's own reason must come through.
func TestPermissionError(t *testing.T) {
	has, ok := HasBPFCapabilities()
	if !ok {
		t.Fatal("gi cannot read its own capabilities")
	}
	refused := fmt.Errorf("load program: %w: dereference of modified ctx ptr R3 off=8 disallowed", os.ErrPermission)
	err := permissionError(refused)
	if has && (errors.Is(err, ErrBPFPermission) || !strings.Contains(err.Error(), "modified ctx ptr")) {
		t.Errorf("with the capabilities: %v", err)
	}
	if !has && !errors.Is(err, ErrBPFPermission) {
		t.Errorf("without the capabilities: %v", err)
	}
	if !has || os.Getenv("GI_TEST_NO_CAPS") == "1" {
		return
	}
	// The same test with every capability dropped, as another user.
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		os.Args[0], "-test.run", "^TestPermissionError$", "-test.v")
	cmd.Env = append(os.Environ(), "GI_TEST_NO_CAPS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPermissionError") {
		t.Errorf("without capabilities: %v\n%s", err, out)
	}
}
