package bincache

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type entry struct {
	A int
	B map[string]uint32
}

func TestRoundTripAndBadFiles(t *testing.T) {
	c := New(t.TempDir())
	k := Key("test-0123")
	var got entry
	if c.Get(k, &got) {
		t.Fatal("hit in an empty cache")
	}
	want := entry{A: 7, B: map[string]uint32{"_Grunning": 2}}
	if err := c.Put(k, want); err != nil {
		t.Fatal(err)
	}
	if !c.Get(k, &got) || got.A != 7 || got.B["_Grunning"] != 2 {
		t.Fatalf("round trip: %+v", got)
	}
	good, err := os.ReadFile(c.path(k))
	if err != nil {
		t.Fatal(err)
	}
	// A file that is corrupt, foreign or hostile in any of these ways is a
	// miss, and the next Put makes it good again.
	resum := func(payload string) string {
		sum := sha256.Sum256([]byte(payload))
		b, _ := json.Marshal(file{Format: format, Key: k, SHA256: hex.EncodeToString(sum[:]), Payload: json.RawMessage(payload)})
		return string(b)
	}
	for name, bad := range map[string]string{
		"truncated":      string(good[:len(good)/2]),
		"empty":          "",
		"not JSON":       "\x00\x01garbage",
		"payload edited": strings.Replace(string(good), `"A":7`, `"A":8`, 1),
		"other key":      strings.Replace(string(good), string(k), "test-9999", 1),
		"other format":   strings.Replace(string(good), `"format":1`, `"format":2`, 1),
		"unknown field":  resum(`{"A":1,"B":{},"C":3}`),
		"wrong type":     resum(`{"A":"x","B":{}}`),
		"too big":        resum(`{"A":1,"B":{"` + strings.Repeat("x", maxFile) + `":1}}`),
	} {
		if err := os.WriteFile(c.path(k), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		var e entry
		if c.Get(k, &e) {
			t.Errorf("%s file: a hit (%+v)", name, e)
		}
		if err := c.Put(k, want); err != nil {
			t.Fatalf("%s file: rewrite: %v", name, err)
		}
		if !c.Get(k, &e) || e.A != 7 {
			t.Errorf("%s file: not rewritten", name)
		}
	}
	// A nil cache, an empty key: nothing stored, nothing found.
	var none *Cache
	if none.Put(k, want) != nil || none.Get(k, &got) || c.Get("", &got) {
		t.Error("nil cache or empty key")
	}
}

// TestUnwritable checks that a cache that cannot be written (its directory
// is a file; a full disk) fails Put with an error and stays a miss.
func TestUnwritable(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := New(filepath.Join(blocker, "gi"))
	if err := c.Put("test-1", entry{A: 1}); err == nil {
		t.Error("Put under a file succeeded")
	}
	var e entry
	if c.Get("test-1", &e) {
		t.Error("hit in an unwritable cache")
	}
	if os.Geteuid() != 0 {
		return
	}
	// A full disk: a tmpfs of one page.
	full := filepath.Join(dir, "full")
	os.Mkdir(full, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", full).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", full).Run()
	c = New(full)
	big := entry{B: map[string]uint32{}}
	for i := range 2000 {
		big.B[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("x", i%50)] = uint32(i)
	}
	if err := c.Put("test-2", big); err == nil {
		t.Error("Put on a full disk succeeded")
	}
	if c.Get("test-2", &e) {
		t.Error("hit after a failed write")
	}
	if entries, _ := os.ReadDir(full); len(entries) != 0 {
		t.Errorf("a failed write left %d files", len(entries))
	}
}

// TestConcurrentPut writes one key from many goroutines at once: every
// Put succeeds and the file is whole.
func TestConcurrentPut(t *testing.T) {
	c := New(t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.Put("test-c", entry{A: i, B: map[string]uint32{"x": uint32(i)}})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var e entry
	if !c.Get("test-c", &e) || e.B["x"] != uint32(e.A) {
		t.Errorf("after concurrent writes: %+v", e)
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) != 1 {
		t.Errorf("%d files left, want 1", len(entries))
	}
}

// TestTrim keeps the number of files bounded.
func TestTrim(t *testing.T) {
	c := New(t.TempDir())
	for i := range maxFiles + 10 {
		if err := c.Put(Key("test-"+strings.Repeat("0", 4)+string(rune('A'+i%26))+string(rune('a'+i/26))), entry{A: i}); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(c.dir); len(entries) > maxFiles {
		t.Errorf("%d files, at most %d", len(entries), maxFiles)
	}
}

// TestKeyOf keys a real binary by its build IDs and gi's own build.
func TestKeyOf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b := KeyOf(f, 100, "layout"), KeyOf(f, 101, "layout")
	if a == "" || a == b || KeyOf(f, 100, "layout") != a || KeyOf(f, 100, "other") == a || !strings.HasPrefix(string(a), "layout-") {
		t.Errorf("keys %q %q", a, b)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	if d := DefaultDir(); d != "/x/cache/gi" {
		t.Errorf("with XDG_CACHE_HOME: %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if d := DefaultDir(); d != "/home/u/.cache/gi" {
		t.Errorf("with HOME: %s", d)
	}
}
