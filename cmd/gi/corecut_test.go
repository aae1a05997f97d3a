package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestCoreCutShort lists cores cut short, as a full disk or RLIMIT_CORE
// leaves them: gi's own and the kernel's, cut inside their memory, are
// listed as far as they go, with a warning naming the bytes missing
// where a listing needed them (gi's core holds only what its listing
// read); cut
// before what says where things are (the program headers) or inside the
// notes (gdb writes its notes after its memory, so a cut gdb core has
// none), gi says so in one line.
func TestCoreCutShort(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.Start(t, bin, "-park", "50")
	dir := t.TempDir()
	giCore := filepath.Join(dir, "gi.core")
	giOK(t, "ps", "--core", giCore, strconv.Itoa(p.Pid))
	gdbCore := targets.Gcore(t, p.Pid)
	crash := targets.StartToCrash(t, bin, "-park", "50")
	cores := map[string]string{"gi": giCore, "kernel": crash.Crash(t)}
	for name, path := range cores {
		whole, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// gi's core of this small target is 0.6 MB, 0.27 of it the
		// executable's data and bss, which go first, then the
		// goroutines' list: a cut at half may take that.
		fracs := []int{3, 2}
		if name == "gi" {
			fracs = []int{3}
		}
		for _, frac := range fracs {
			cut := filepath.Join(dir, name+"-cut.core")
			n := len(whole) * frac / 4
			if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
				t.Fatal(err)
			}
			out, stderr, code := runGi(t, "ps", "--binary", bin, cut)
			if code != 0 {
				t.Errorf("%s core cut at %d of %d bytes: exit %d: %s", name, n, len(whole), code, stderr)
				continue
			}
			rows := regexp.MustCompile(`(?m)^\s*\d+\s+\S`).FindAllString(out, -1)
			if len(rows) < 5 || !strings.Contains(out, "main.main") {
				t.Errorf("%s core cut at %d of %d bytes: %d goroutines listed, main.main among them: %v\n%s", name, n, len(whole), len(rows), strings.Contains(out, "main.main"), out)
			}
			if name == "gi" && !strings.Contains(stderr, "truncated at byte "+strconv.Itoa(n)) {
				t.Errorf("%s core cut at %d of %d bytes: no warning that it is cut there: %q", name, n, len(whole), stderr)
			}
		}
	}
	for _, c := range []struct {
		core string
		n    int
		want string
	}{
		{giCore, 100, `cut short at 100 bytes: its \d+ program headers .* are lost: nothing to list`},
		{giCore, 2000, `truncated in its notes`},
		{gdbCore, 200 << 10, `truncated in its notes \(0 of their \d+ bytes`},
	} {
		head := make([]byte, c.n)
		f, err := os.Open(c.core)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadFull(f, head)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(dir, "short.core")
		if err := os.WriteFile(cut, head, 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runGi(t, "ps", "--binary", bin, cut)
		checkOneLineError(t, stderr, code, c.want)
	}
}
