package kernelgrid

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gi-debug/gi/internal/targets"
)

// guestTargets are the targets the guest's tests start, prebuilt for its
// architecture with the local toolchain.
var guestTargets = []struct {
	name string
	opts targets.BuildOptions
}{
	{"psstates", targets.BuildOptions{}},
	{"psstates", targets.BuildOptions{PIE: true}},
	{"psstates", targets.BuildOptions{Stripped: true}},
	{"psstates", targets.BuildOptions{PIE: true, Stripped: true}},
	{"tracee", targets.BuildOptions{}},
	{"tracee", targets.BuildOptions{PIE: true}},
	{"tracee", targets.BuildOptions{Stripped: true}},
	{"tracee", targets.BuildOptions{PIE: true, Stripped: true}},
	{"argfuncs", targets.BuildOptions{}},
	{"argfuncs", targets.BuildOptions{PIE: true}},
	{"lockserver", targets.BuildOptions{}},
	{"reparker", targets.BuildOptions{}},
	{"syscaller", targets.BuildOptions{}},
	{"waiters", targets.BuildOptions{}},
	{"waiters", targets.BuildOptions{PIE: true}},
	{"waiters", targets.BuildOptions{Stripped: true}},
	{"waiters", targets.BuildOptions{PIE: true, Stripped: true}},
	{"leaky", targets.BuildOptions{}},
	{"leaky", targets.BuildOptions{PIE: true}},
	{"leaky", targets.BuildOptions{Stripped: true}},
	{"whyphases", targets.BuildOptions{}},
	{"whyphases", targets.BuildOptions{PIE: true}},
	{"hotcold", targets.BuildOptions{}},
	{"vecspin", targets.BuildOptions{}},
}

// buildInitramfs cross-builds gi, its test binaries and the targets for
// arch, and packs them with busybox, the dynamic loader and the scripts
// into a gzip'd newc archive under out; it returns the archive's path.
func buildInitramfs(root, cache, out, arch string) (string, error) {
	files := map[string]string{} // path in the guest -> file on the host
	bdir := filepath.Join(out, arch)
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		return "", err
	}
	gobuild := func(guest string, args ...string) error {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("GOARCH=%s go %s: %v\n%s", arch, strings.Join(args, " "), err, b)
		}
		files[guest] = filepath.Join(bdir, filepath.Base(guest))
		return nil
	}
	if err := gobuild("/gi", "build", "-o", filepath.Join(bdir, "gi"), "./cmd/gi"); err != nil {
		return "", err
	}
	for _, t := range []struct{ name, pkg string }{
		{"inspect.test", "./inspect/"}, {"trace.test", "./trace/"}, {"gi.test", "./cmd/gi/"}, {"bpf.test", "./bpf/"},
		{"leak.test", "./leak/"}, {"proc.test", "./proc/"}, {"ptrace.test", "./ptrace/"},
	} {
		if err := gobuild("/tests/"+t.name, "test", "-c", "-o", filepath.Join(bdir, t.name), t.pkg); err != nil {
			return "", err
		}
	}
	var pie string
	for _, tgt := range guestTargets {
		o := tgt.opts
		o.Arch = arch
		path, err := targets.BuildPath(tgt.name, o)
		if err != nil {
			return "", fmt.Errorf("target %s (%s): %w", tgt.name, o, err)
		}
		files["/targets/"+targets.PrebuiltName(tgt.name, o)] = path
		if o.PIE {
			pie = path
		}
	}
	// A PIE is dynamically linked: the kernel starts its loader, which
	// the guest gets from the architecture's libc6 at the path the PIE names.
	interp, err := interpreter(pie)
	if err != nil {
		return "", err
	}
	loader, err := resolveIn(filepath.Join(cache, "libc6-"+arch), interp)
	if err != nil {
		return "", fmt.Errorf("the loader %s from libc6:%s: %w", interp, arch, err)
	}
	files[interp] = loader
	files["/bin/busybox"] = filepath.Join(cache, "busybox-"+arch, "bin", "busybox")

	initScript, err := os.ReadFile(filepath.Join(root, "internal", "kernelgrid", "init.sh"))
	if err != nil {
		return "", err
	}
	cli, err := os.ReadFile(filepath.Join(root, "internal", "kernelgrid", "trace-cli.sh"))
	if err != nil {
		return "", err
	}
	var cmds strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&cmds, "echo 'GI-BEGIN %s'\nif %s; then echo 'GI-CHECK %s PASS'; else echo 'GI-CHECK %s FAIL'; fi\n", c.name, c.command, c.name, c.name)
	}
	if !bytes.Contains(initScript, []byte("\n@CHECKS@\n")) {
		return "", errors.New("init.sh has no @CHECKS@ line")
	}
	scripts := map[string][]byte{
		"/init":         bytes.Replace(initScript, []byte("@CHECKS@"), []byte(cmds.String()), 1),
		"/trace-cli.sh": cli,
	}
	path := filepath.Join(out, "initrd-"+arch+".gz")
	if err := writeInitramfs(path, files, scripts); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// interpreter returns the PT_INTERP of an ELF file.
func interpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err != nil {
				return "", fmt.Errorf("%s: PT_INTERP: %w", path, err)
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", fmt.Errorf("%s has no PT_INTERP", path)
}

// resolveIn returns the host path of the file at guest path p in the tree
// unpacked at root, following symbolic links as they would resolve with
// root as /: libc6's /lib64/ld-linux-x86-64.so.2 is an absolute link,
// which filepath.EvalSymlinks would follow into the host's own libc.
func resolveIn(root, p string) (string, error) {
	rest := strings.Split(strings.Trim(filepath.Clean("/"+p), "/"), "/")
	var done []string // resolved components, below root
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		host := filepath.Join(root, filepath.Join(done...), c)
		fi, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("%s: too many symbolic links", p)
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return filepath.Join(root, filepath.Join(done...)), nil
}

// writeInitramfs writes a gzip'd newc cpio archive with files (guest path
// -> host file) and scripts (guest path -> contents), each executable,
// and the directories they and the guest's mount points need.
func writeInitramfs(path string, files map[string]string, scripts map[string][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	w := &newcWriter{w: zw}
	dirs := map[string]bool{"/proc": true, "/sys": true, "/dev": true, "/tmp": true, "/root": true, "/bin": true}
	paths := slices.Concat(slices.Collect(maps.Keys(files)), slices.Collect(maps.Keys(scripts)))
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		w.entry(strings.TrimPrefix(d, "/"), 0o040755, 0, nil)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := w.file(strings.TrimPrefix(p, "/"), files[p]); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(scripts)) {
		w.entry(strings.TrimPrefix(p, "/"), 0o100755, int64(len(scripts[p])), bytes.NewReader(scripts[p]))
	}
	w.entry("TRAILER!!!", 0, 0, nil)
	if w.err != nil {
		return w.err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// newcWriter writes the "new ASCII" cpio format (magic 070701) the kernel
// unpacks into its initial root file system.
type newcWriter struct {
	w   io.Writer
	ino uint32
	off int64
	err error
}

func (c *newcWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.off += int64(n)
	c.err = err
}

func (c *newcWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// file adds the host file src, executable, as name.
func (c *newcWriter) file(name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	c.entry(name, 0o100755, fi.Size(), f)
	return c.err
}

// entry adds one entry: a header, the name, size bytes of data, each
// padded to 4 bytes.
func (c *newcWriter) entry(name string, mode uint32, size int64, data io.Reader) {
	if c.err != nil {
		return
	}
	if size > 0xffffffff {
		c.err = fmt.Errorf("%s: %d bytes do not fit a newc entry", name, size)
		return
	}
	c.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize (with its NUL), check.
	c.write(fmt.Appendf(nil, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0))
	c.write(append([]byte(name), 0))
	c.pad()
	if data != nil && c.err == nil {
		n, err := io.Copy(c.w, io.LimitReader(data, size))
		c.off += n
		if err == nil && n != size {
			err = fmt.Errorf("%s: %d bytes, want %d (changed while read?)", name, n, size)
		}
		c.err = err
	}
	c.pad()
}

// readNewc parses a newc archive into name -> contents (directories map to
// nil), for the writer's test.
func readNewc(b []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for range 1 << 20 {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			return nil, fmt.Errorf("no newc header at %d", off)
		}
		field := func(i int) int {
			v, _ := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			return int(v)
		}
		mode, size, namesize := field(1), field(6), field(11)
		nameEnd := off + 110 + namesize
		if namesize == 0 || nameEnd > len(b) {
			return nil, fmt.Errorf("bad name size at %d", off)
		}
		name := string(b[off+110 : nameEnd-1])
		data := align(nameEnd)
		if data+size > len(b) {
			return nil, fmt.Errorf("%s: truncated", name)
		}
		if name == "TRAILER!!!" {
			return out, nil
		}
		if mode&0o040000 != 0 {
			out[name] = nil
		} else {
			out[name] = b[data : data+size]
		}
		off = align(data + size)
	}
	return nil, errors.New("no trailer")
}
