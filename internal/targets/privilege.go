package targets

import (
	"os"
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
