// Package bincache keeps what gi derives from a binary (its runtime
// layout, read from DWARF or found by scanning) in files under the user's
// cache directory, keyed by the binary's build ID and gi's own, so that
// the next gi on the same binary skips the work.
//
// The cache is an optimisation only: any failure to read or write it (no
// directory, a full disk, a file another gi is writing, a corrupt or
// foreign file) is the same as a miss, and a bad file is replaced on the
// next write. Files are written whole to a temporary name and renamed, so
// concurrent gi processes never see a partial file. Nothing read from a
// target process's memory is ever stored.
package bincache

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// format is the version of the file format; part of every key.
const format = 1

// maxFile bounds the size of a cache file gi reads.
const maxFile = 16 << 20

// maxFiles bounds the files kept: writing one more removes the oldest.
const maxFiles = 256

// Cache is a cache directory. A nil *Cache caches nothing.
type Cache struct {
	dir string
}

// New returns the cache in dir, nil if dir is "".
func New(dir string) *Cache {
	if dir == "" {
		return nil
	}
	return &Cache{dir: dir}
}

// DefaultDir is $XDG_CACHE_HOME/gi, else $HOME/.cache/gi; "" when
// neither is set.
func DefaultDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "gi")
	}
	if h := os.Getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".cache", "gi")
	}
	return ""
}

var (
	defaultMu    sync.Mutex
	defaultCache = New(DefaultDir())
)

// Default returns the cache gi uses (nil when disabled).
func Default() *Cache {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	return defaultCache
}

// SetDefault replaces the cache gi uses: nil disables caching (--no-cache).
func SetDefault(c *Cache) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	defaultCache = c
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Key identifies a binary for caching: its build IDs and size, gi's own
// build, and the kind of entry. It is empty when the binary has no build
// ID (nothing is cached for it).
type Key string

// KeyOf returns the key of entry kind for the ELF binary f of size bytes.
func KeyOf(f *elf.File, size int64, kind string) Key {
	id := buildIDs(f)
	if id == "" || selfID() == "" {
		return ""
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("gi-cache %d\x00%s\x00%s\x00%d\x00%s", format, kind, id, size, selfID())))
	return Key(kind + "-" + hex.EncodeToString(h[:16]))
}

// buildIDs returns the Go and GNU build IDs of f, "" if it has neither.
func buildIDs(f *elf.File) string {
	var ids []string
	for _, name := range []string{".note.go.buildid", ".note.gnu.build-id"} {
		if s := f.Section(name); s != nil && s.Size > 0 && s.Size < 4096 {
			if b, err := s.Data(); err == nil {
				ids = append(ids, hex.EncodeToString(b))
			}
		}
	}
	return strings.Join(ids, "/")
}

// selfID identifies the running gi build: an entry derived by another
// build of gi (another derivation) is never used.
var selfID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	if id := buildIDs(f); id != "" {
		return id
	}
	// A gi built without build IDs: its size and modification time.
	st, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d-%d", st.Size(), st.ModTime().UnixNano())
})

// file is what a cache file holds.
type file struct {
	Format  int             `json:"format"`
	Key     Key             `json:"key"`
	SHA256  string          `json:"sha256"`
	Payload json.RawMessage `json:"payload"`
}

func (c *Cache) path(k Key) string { return filepath.Join(c.dir, string(k)+".json") }

// Get decodes the entry k into v; false on any miss or bad file.
func (c *Cache) Get(k Key, v any) bool {
	if c == nil || k == "" {
		return false
	}
	f, err := os.Open(c.path(k))
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil || len(data) > maxFile {
		return false
	}
	var cf file
	if err := json.Unmarshal(data, &cf); err != nil || cf.Format != format || cf.Key != k {
		return false
	}
	sum := sha256.Sum256(cf.Payload)
	if hex.EncodeToString(sum[:]) != cf.SHA256 {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(cf.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false
	}
	return true
}

// Put stores v as the entry k: written to a temporary file and renamed.
func (c *Cache) Put(k Key, v any) error {
	if c == nil || k == "" {
		return nil
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache %s: %w", k, err)
	}
	sum := sha256.Sum256(payload)
	data, err := json.Marshal(file{Format: format, Key: k, SHA256: hex.EncodeToString(sum[:]), Payload: payload})
	if err != nil {
		return fmt.Errorf("cache %s: %w", k, err)
	}
	if len(data) > maxFile {
		return fmt.Errorf("cache %s: %d bytes, more than %d", k, len(data), maxFile)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("cache directory: %w", err)
	}
	tmp, err := os.CreateTemp(c.dir, ".tmp-"+string(k)+"-*")
	if err != nil {
		return fmt.Errorf("cache %s: %w", k, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache %s: %w", k, err)
	}
	if err := os.Rename(tmp.Name(), c.path(k)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache %s: %w", k, err)
	}
	c.trim()
	return nil
}

// trim removes the oldest files beyond maxFiles (temporary files a killed
// gi left behind included).
func (c *Cache) trim() {
	entries, err := os.ReadDir(c.dir)
	if err != nil || len(entries) <= maxFiles {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	var files []aged
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files = append(files, aged{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod < files[j].mod })
	for i := 0; i < len(files)-maxFiles; i++ {
		os.Remove(filepath.Join(c.dir, files[i].name))
	}
}
