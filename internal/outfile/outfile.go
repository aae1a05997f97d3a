// Package outfile writes the files gi is asked to write (cores,
// profiles, traces) so that a symbolic link planted at the name cannot
// redirect them, and a gi killed in the middle leaves no half-written
// file under the name: each is written under a temporary name in the
// same directory, created anew (O_CREAT|O_EXCL, which never follows a
// link), and renamed over the name once complete (a rename replaces a
// link; it does not write through it).
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	f, err := os.CreateTemp(dir, "."+base+".gi-*")
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
