package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestPsCompressedCore lists a core compressed as systemd-coredump stores
// it by default (zstd, here by the zstd tool): the same rows as the core
// itself, the footer naming the compressed file; the same stream cut
// short is one clear error line naming it.
func TestPsCompressedCore(t *testing.T) {
	requirePrivilege(t)
	zstd, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal("zstd is not installed (make deps installs it), and GI_REQUIRE_PRIVILEGED=1 forbids skipping")
		}
		t.Skip("zstd is not installed: make deps installs it")
	}
	p := targets.StartToCrash(t, targets.Build(t, "psstates", targets.BuildOptions{}), "-park", "100", "-depth", "20")
	path := p.Crash(t)
	// As systemd-coredump names them: the name says nothing to gi.
	zpath := path + ".0123456789abcdef.zst"
	if out, err := exec.Command(zstd, "-q", path, "-o", zpath).CombinedOutput(); err != nil {
		t.Fatalf("zstd: %v\n%s", err, out)
	}
	// The waits are measured to the core's file time: the same for both.
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(zpath, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}

	out := giOK(t, "ps", zpath)
	if !regexp.MustCompile(`, from core ` + regexp.QuoteMeta(zpath) + ` \(psstates.*, SIGABRT, written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)`).MatchString(out) {
		t.Errorf("no footer naming the compressed core:\n%s", out)
	}
	if n := strings.Count(out, "main.parked"); n != 100 {
		t.Errorf("%d rows in main.parked, want the target's 100", n)
	}
	if plain := giOK(t, "ps", path); strings.ReplaceAll(out, zpath, path) != plain {
		t.Errorf("the compressed core's listing differs from the core's:\n%s\nwant:\n%s", out, plain)
	}

	data, err := os.ReadFile(zpath)
	if err != nil {
		t.Fatal(err)
	}
	short := zpath + ".short"
	if err := os.WriteFile(short, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runGi(t, "ps", short)
	checkOneLineError(t, stderr, code, `core `+regexp.QuoteMeta(short)+`: its zstd stream is corrupt or cut short`)
}
