package targets

import (
	"os"
	"os/exec"
	"testing"
)

// RequirePrivilege skips a test that needs root (for what need says:
// "eBPF uprobes", "ptrace of another process"), or fails it when
// GI_REQUIRE_PRIVILEGED=1 forbids skipping, as CI sets it.
func RequirePrivilege(tb testing.TB, need string) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
		tb.Fatalf("this test needs root (%s) and GI_REQUIRE_PRIVILEGED=1 forbids skipping", need)
	}
	tb.Skipf("needs root (%s); set GI_REQUIRE_PRIVILEGED=1 to make this a failure", need)
}

// RequireTool skips a test that needs a program make deps installs (gdb),
// or fails it when GI_REQUIRE_PRIVILEGED=1 forbids skipping.
func RequireTool(tb testing.TB, name string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
		tb.Fatalf("%s is not installed (make deps installs it) and GI_REQUIRE_PRIVILEGED=1 forbids skipping", name)
	}
	tb.Skipf("%s is not installed: make deps installs it", name)
}
