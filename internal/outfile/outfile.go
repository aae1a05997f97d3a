// Package outfile writes the files gi is asked to write (cores,
// profiles, traces) so that a symbolic link planted at the name cannot
// redirect them, and a gi killed in the middle leaves no half-written
// file under the name: each is written under a temporary name in the
// same directory, created anew (O_CREAT|O_EXCL, which never follows a
// link), and renamed over the name once complete (a rename replaces a
// link; it does not write through it). The temporary name holds the
// writer's pid: one left by a gi that was killed is removed when the
// same name is written next.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File is a file being written under a temporary name; Commit puts it
// under its name, Abort removes it.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts writing the file path with permissions perm.
func Create(path string, perm os.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return nil, fmt.Errorf("%s: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	removeStale(dir, base)
	f, err := os.CreateTemp(dir, tempPrefix(base, os.Getpid())+"*")
	if err != nil {
		// The temporary name is gi's business: the error names path.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{File: f, path: path}, nil
}

// tempPrefix is how the temporary names of a file base written by
// process pid begin: hidden, and naming the writer, so that the next gi
// can tell a temporary file left by a gi that was killed.
func tempPrefix(base string, pid int) string {
	return "." + base + ".gi-" + strconv.Itoa(pid) + "-"
}

// maxStale bounds the temporary files removeStale looks at.
const maxStale = 64

// removeStale removes the temporary files of base in dir whose writer no
// longer runs (a gi killed before it committed or aborted). A link with
// such a name is removed itself, never followed.
func removeStale(dir, base string) {
	names, err := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+".gi-*-*"))
	if err != nil {
		return
	}
	for _, name := range names[:min(len(names), maxStale)] {
		rest := strings.TrimPrefix(filepath.Base(name), "."+base+".gi-")
		i := strings.IndexByte(rest, '-')
		if i <= 0 {
			continue
		}
		pid, err := strconv.Atoi(rest[:i])
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.Remove(name)
		}
	}
}

// globEscape escapes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Path is the name the file is committed under.
func (f *File) Path() string { return f.path }

// Commit closes the file and renames it over its name.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("%s: already committed or aborted", f.path)
	}
	f.done = true
	if err := f.File.Close(); err != nil {
		os.Remove(f.File.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if err := os.Rename(f.File.Name(), f.path); err != nil {
		os.Remove(f.File.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// Abort closes and removes the file; nothing is left under its name. It
// does nothing after Commit.
func (f *File) Abort() {
	if f == nil || f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.File.Name())
}

// Probe tells whether path can be written (Create, then Abort): for a
// caller that must fail before it touches anything.
func Probe(path string) error {
	f, err := Create(path, 0o600)
	if err != nil {
		return err
	}
	f.Abort()
	return nil
}

// OpenStream opens path for a file written as it goes (a trace streamed
// to a file or a named pipe), truncated or created with permissions
// perm, refusing a symbolic link at the name (O_NOFOLLOW): a link
// planted in a shared directory cannot redirect it.
func OpenStream(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: gi does not write through one", path)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
