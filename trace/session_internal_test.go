package trace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
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

// TestGoroutineLayoutStrippedARM64 checks that a stripped arm64 binary,
// whose runtime.allgs gi cannot find, still gets the offsets of g's fields
// the probes need, and that they are the ones DWARF gives for the same
// program built with it.
func TestGoroutineLayoutStrippedARM64(t *testing.T) {
	layout := func(opts targets.BuildOptions) *runtimelayout.RuntimeLayout {
		bin, err := elfbin.Open(targets.Build(t, "tracee", opts))
		if err != nil {
			t.Fatal(err)
		}
		defer bin.Close()
		l, err := goroutineLayout(bin, nil)
		if err != nil {
			t.Fatalf("%s: %v", opts, err)
		}
		return l
	}
	stripped := layout(targets.BuildOptions{Arch: "arm64", Stripped: true})
	full := layout(targets.BuildOptions{Arch: "arm64"})
	if stripped.G != full.G {
		t.Errorf("g's offsets: stripped %+v, from DWARF %+v", stripped.G, full.G)
	}
	if stripped.G.Goid == 0 || stripped.G.StackHi == 0 {
		t.Errorf("g's offsets of a stripped arm64 binary: %+v", stripped.G)
	}
}
