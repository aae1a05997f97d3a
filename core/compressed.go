package core

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// Compressed cores: systemd-coredump stores a core as one compressed
// stream, zstd by default, lz4 (frame format) or xz as it was built
// (/var/lib/systemd/coredump/core.<comm>.<uid>.<boot id>.<pid>.<usec>.zst).
// Open decompresses such a core once into an unlinked temporary file in
// os.TempDir() ($TMPDIR), and reads that: a compressed core costs its
// uncompressed size of temporary disk (less its pages of zeros, left as
// holes), for as long as it is open, and the time to decompress it. The
// format is told by its magic bytes, not by the file's name.

// decompressLimit bounds the size of a compressed core, decompressed: 1
// TiB (a variable for tests).
var decompressLimit int64 = 1 << 40

// compression is a compressed stream format a core may come in.
type compression struct {
	name  string
	magic []byte
	// reader returns a reader of r decompressed, and what releases it.
	reader func(r io.Reader) (io.Reader, func(), error)
}

var compressions = []compression{
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}, func(r io.Reader) (io.Reader, func(), error) {
		// One block at a time, in this goroutine: no decoder goroutines
		// left behind, and the machine's other CPUs left alone.
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}},
	{"lz4", []byte{0x04, 0x22, 0x4d, 0x18}, func(r io.Reader) (io.Reader, func(), error) {
		return lz4.NewReader(r), func() {}, nil
	}},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, func(r io.Reader) (io.Reader, func(), error) {
		d, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return d, func() {}, nil
	}},
}

// compressionOf returns the compressed format f's first bytes announce,
// nil for none (an uncompressed file).
func compressionOf(f *os.File) *compression {
	var magic [8]byte
	n, _ := f.ReadAt(magic[:], 0)
	for i := range compressions {
		if bytes.HasPrefix(magic[:n], compressions[i].magic) {
			return &compressions[i]
		}
	}
	return nil
}

// coreHeader returns the first 18 bytes of the ELF file f holds, itself or
// as a compressed stream (only the stream's start is decompressed).
func coreHeader(f *os.File) ([18]byte, error) {
	var h [18]byte
	c := compressionOf(f)
	if c == nil {
		_, err := f.ReadAt(h[:], 0)
		return h, err
	}
	err := c.decode(io.NewSectionReader(f, 0, 1<<62), func(r io.Reader) error {
		_, err := io.ReadFull(r, h[:])
		return err
	})
	return h, err
}

// isCoreHeader reports whether h starts an ELF core file.
func isCoreHeader(h [18]byte) bool {
	return string(h[:4]) == elf.ELFMAG && binary.LittleEndian.Uint16(h[16:]) == uint16(elf.ET_CORE)
}

// decode runs use on r decompressed; a decoder's panic (on a stream it
// was not made for) is an error, as a corrupt stream is.
func (c *compression) decode(r io.Reader, use func(io.Reader) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s decoder failed: %v", c.name, p)
		}
	}()
	d, release, err := c.reader(r)
	if err != nil {
		return err
	}
	defer release()
	return use(d)
}

// openELF opens the core at path as an ELF file: the file itself, or a
// compressed core's decompressed copy.
func openELF(path string) (*coreELF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	c := compressionOf(f)
	if c == nil {
		e, err := readCoreELF(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &coreELF{File: e, closer: f}, nil
	}
	defer f.Close()
	tmp, err := decompress(f, c)
	if err != nil {
		return nil, err
	}
	defer tmp.Close()
	// The ELF file owns its own descriptor of the unlinked copy (its
	// Close closes it): opened again through /proc/self/fd.
	e, err := elf.Open("/proc/self/fd/" + strconv.Itoa(int(tmp.Fd())))
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return nil, fmt.Errorf("open its decompressed copy: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: its %s stream holds no ELF file: %v", ErrNotCore, c.name, err)
	}
	return &coreELF{File: e, closer: e}, nil
}

// decompress decompresses the stream in f into a temporary file, unlinked
// at once, and returns that file.
func decompress(f *os.File, c *compression) (*os.File, error) {
	tmp, err := os.CreateTemp(os.TempDir(), "gi-core-")
	if err != nil {
		return nil, fmt.Errorf("decompress its %s stream: %w", c.name, err)
	}
	if err := os.Remove(tmp.Name()); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("decompress its %s stream: %w", c.name, err)
	}
	w := &sparseWriter{f: tmp, buf: make([]byte, 0, 1<<20)}
	// Buffered: a decoder may read its input a few bytes at a time.
	err = c.decode(bufio.NewReaderSize(f, 1<<20), func(r io.Reader) error {
		_, err := io.Copy(w, r)
		if err == nil {
			err = w.finish()
		}
		return err
	})
	if err != nil {
		tmp.Close()
		switch {
		case errors.Is(err, errTooLarge):
			return nil, fmt.Errorf("its %s stream: %w", c.name, err)
		case w.werr != nil:
			return nil, fmt.Errorf("decompress its %s stream into %s: %w", c.name, os.TempDir(), err)
		}
		return nil, fmt.Errorf("its %s stream is corrupt or cut short (after %d bytes decompressed): %w", c.name, w.size+int64(len(w.buf)), err)
	}
	return tmp, nil
}

// errTooLarge means a stream decompresses to more than decompressLimit.
var errTooLarge = errors.New("it decompresses to more than gi reads")

// sparseWriter writes a file from its start, leaving holes where whole
// pages are zeros (most of a core's are, often).
type sparseWriter struct {
	f    *os.File
	buf  []byte
	size int64 // bytes written, holes included
	werr error // the file's own error, if any
}

const sparsePage = 4096

func (w *sparseWriter) Write(p []byte) (int, error) {
	if w.size+int64(len(w.buf))+int64(len(p)) > decompressLimit {
		return 0, fmt.Errorf("%w (%d bytes)", errTooLarge, decompressLimit)
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush writes the buffer at w.size, page by page, skipping pages of
// zeros.
func (w *sparseWriter) flush() error {
	b := w.buf
	for len(b) > 0 {
		// A run of pages of data, then a run of pages of zeros.
		data := 0
		for data < len(b) && !zeros(b[data:min(len(b), data+sparsePage)]) {
			data += sparsePage
		}
		data = min(data, len(b))
		if data > 0 {
			if _, err := w.f.WriteAt(b[:data], w.size); err != nil {
				w.werr = err
				return err
			}
		}
		hole := data
		for hole < len(b) && zeros(b[hole:min(len(b), hole+sparsePage)]) {
			hole += sparsePage
		}
		hole = min(hole, len(b))
		w.size += int64(hole)
		b = b[hole:]
	}
	w.buf = w.buf[:0]
	return nil
}

// finish writes what is left and sizes the file (a hole at its end).
func (w *sparseWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.Truncate(w.size); err != nil {
		w.werr = err
		return err
	}
	return nil
}

func zeros(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
