package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// giWithCache runs gi with its cache in dir and returns stdout.
func giWithCache(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(buildGi(t), args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gi %v: %v: %s", args, err, stderr.String())
	}
	return out
}

// psIdentity is what does not change between two gi ps of the psstates
// target: its parked goroutines' ids, wait reasons, frames and objects
// (others run, sleep and wake between two looks).
func psIdentity(t *testing.T, out []byte) string {
	t.Helper()
	var doc struct {
		GoVersion  string `json:"go_version"`
		Goroutines []struct {
			Goid       uint64
			State      string
			WaitReason string `json:"wait_reason"`
			Frames     []struct {
				Function string
				Line     int
			}
			WaitingOn []struct{ Kind, Addr string } `json:"waiting_on"`
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	parked := doc.Goroutines[:0]
	for _, g := range doc.Goroutines {
		if g.WaitReason == "chan receive" && len(g.Frames) > 0 && g.Frames[0].Function == "main.parked" {
			parked = append(parked, g)
		}
	}
	if len(parked) < 20 {
		t.Fatalf("only %d parked goroutines", len(parked))
	}
	doc.Goroutines = parked
	b, _ := json.Marshal(doc)
	return string(b)
}

// TestCacheCLI checks that gi ps gives the same goroutines without the
// cache, filling it and reading it, for a binary with DWARF and a
// stripped one, and that two gi filling an empty cache at once both
// succeed and leave one good entry.
func TestCacheCLI(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {Stripped: true, PIE: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "20")
			pid := strconv.Itoa(p.Pid)
			dir := t.TempDir()
			want := psIdentity(t, giWithCache(t, dir, "ps", "--json", "--no-cache", pid))
			if files, _ := filepath.Glob(filepath.Join(dir, "gi", "*.json")); len(files) != 0 {
				t.Fatalf("--no-cache wrote %v", files)
			}
			for _, pass := range []string{"filling", "cached"} {
				if got := psIdentity(t, giWithCache(t, dir, "ps", "--json", pid)); got != want {
					t.Errorf("%s the cache: the goroutines differ from --no-cache's", pass)
				}
				if files, _ := filepath.Glob(filepath.Join(dir, "gi", "runtime-layout-*.json")); len(files) != 1 {
					t.Fatalf("%s: cache files %v, want one", pass, files)
				}
			}

			// Two at once on an empty cache, on two processes of the
			// binary (one process admits one tracer at a time).
			dir = t.TempDir()
			p2 := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "20")
			want2 := psIdentity(t, giWithCache(t, t.TempDir(), "ps", "--json", "--no-cache", strconv.Itoa(p2.Pid)))
			var wg sync.WaitGroup
			outs, errs := make([][]byte, 2), make([]error, 2)
			gi := buildGi(t)
			for i, target := range []string{pid, strconv.Itoa(p2.Pid)} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(gi, "ps", "--json", target)
					cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+dir)
					outs[i], errs[i] = cmd.Output()
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("gi %d filling the cache at once: %v", i, err)
				}
			}
			if psIdentity(t, outs[0]) != want || psIdentity(t, outs[1]) != want2 {
				t.Error("gi filling the cache at once: the goroutines differ")
			}
			if got := psIdentity(t, giWithCache(t, dir, "ps", "--json", pid)); got != want {
				t.Error("after concurrent filling: the goroutines differ")
			}
		})
	}
}
