package inspect_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// compressors are the command-line tools that write systemd-coredump's
// formats (make deps installs them), with the suffix systemd-coredump
// gives their cores.
var compressors = []struct{ tool, suffix string }{{"zstd", ".zst"}, {"lz4", ".lz4"}, {"xz", ".xz"}}

// compressCore compresses the file at path with a compressor's tool,
// leaving path as it is, and returns the compressed file's path: without
// the tool the test is skipped, or fails under GI_REQUIRE_PRIVILEGED=1.
func compressCore(t *testing.T, tool, suffix, path string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatalf("%s is not installed (make deps installs it), and GI_REQUIRE_PRIVILEGED=1 forbids skipping", tool)
		}
		t.Skipf("%s is not installed: make deps installs it", tool)
	}
	out := path + suffix
	// Each tool writes to stdout (-c), keeping its input.
	cmd := exec.Command(tool, "-c", "-q", path)
	if tool == "xz" {
		cmd.Args = append(cmd.Args[:1], "-T1", "-c", "-q", path)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msg strings.Builder
	cmd.Stdout, cmd.Stderr = f, &msg
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, path, err, msg.String())
	}
	return out
}

// decodeCore opens the core at path and decodes its goroutines.
func decodeCore(t *testing.T, path string) (*core.Core, *inspect.Snapshot) {
	t.Helper()
	c, err := core.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tgt, err := inspect.New(c.Process)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := c.Now()
	snap, err := tgt.Decode(c.Threads, now)
	if err != nil {
		t.Fatal(err)
	}
	return c, snap
}

// goroutineText is what is compared of a goroutine: its id, status and
// wait reason, and every frame (function, file, line, pc).
func goroutineText(g *inspect.Goroutine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "goroutine %d [%s/%s/%s]", g.ID, g.Status, g.WaitReason, g.State)
	for _, f := range g.Frames {
		fmt.Fprintf(&b, "\n\t%s %s:%d %#x", f.Function, f.File, f.Line, f.PC)
	}
	return b.String()
}

// TestCompressedCore has the kernel write a core of a crashed target,
// compresses it as systemd-coredump does (zstd, lz4, xz: the real tools),
// and requires each compressed core to be a core (core.IsCore) that
// decodes to exactly the goroutines of the uncompressed one (ids,
// statuses, wait reasons, frames), Core.Path naming the compressed file;
// the compressed core cut short, or corrupted, is one error naming it.
func TestCompressedCore(t *testing.T) {
	requirePrivilege(t)
	p := targets.StartToCrash(t, targets.Build(t, "psstates", targets.BuildOptions{}), "-park", "200", "-depth", "20")
	path := p.Crash(t)
	_, want := decodeCore(t, path)
	if len(want.Goroutines) < 200 {
		t.Fatalf("%d goroutines in the core, want the target's 200 parked ones and more", len(want.Goroutines))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range compressors {
		t.Run(z.tool, func(t *testing.T) {
			zpath := compressCore(t, z.tool, z.suffix, path)
			zst, err := os.Stat(zpath)
			if err != nil {
				t.Fatal(err)
			}
			if !core.IsCore(zpath) {
				t.Fatalf("IsCore(%s) = false", zpath)
			}
			start := time.Now()
			c, got := decodeCore(t, zpath)
			t.Logf("a core of %d KiB, %d KiB compressed by %s: opened and decoded (%d goroutines) in %v",
				st.Size()>>10, zst.Size()>>10, z.tool, len(got.Goroutines), time.Since(start))
			if c.Path != zpath {
				t.Errorf("Core.Path %q, want the compressed file %q", c.Path, zpath)
			}
			if len(got.Goroutines) != len(want.Goroutines) {
				t.Errorf("%d goroutines, want the uncompressed core's %d", len(got.Goroutines), len(want.Goroutines))
			}
			for i := range min(len(got.Goroutines), len(want.Goroutines)) {
				if g, w := goroutineText(got.Goroutines[i]), goroutineText(want.Goroutines[i]); g != w {
					t.Errorf("goroutine %d of the compressed core:\n%s\nwant:\n%s", i, g, w)
					break
				}
			}

			data, err := os.ReadFile(zpath)
			if err != nil {
				t.Fatal(err)
			}
			corrupt := []byte(string(data))
			for i := len(corrupt) / 2; i < len(corrupt)/2+256; i++ {
				corrupt[i] ^= 0xa5
			}
			for what, b := range map[string][]byte{"cut short": data[:len(data)*2/3], "corrupted": corrupt} {
				bad := zpath + "." + strings.ReplaceAll(what, " ", "-")
				if err := os.WriteFile(bad, b, 0o644); err != nil {
					t.Fatal(err)
				}
				c, err := core.Open(bad, "")
				if err == nil {
					c.Close()
					t.Errorf("%s core opened", what)
				} else if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), z.tool) {
					t.Errorf("%s core: %v, want an error naming it and %s", what, err, z.tool)
				}
			}
		})
	}
}
