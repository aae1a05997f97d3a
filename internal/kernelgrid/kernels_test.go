package kernelgrid

import (
	"bufio"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// kernel is one cell row of the grid: a Debian kernel package fetch.sh
// unpacks under <cache>/kernel-<version>-<arch>.
type kernel struct{ version, arch string }

func (k kernel) String() string { return k.version + "-" + k.arch }

// grid is every kernel checked, in the order they boot.
var grid = []kernel{{"5.10", "amd64"}, {"6.1", "amd64"}, {"6.12", "amd64"}, {"6.1", "arm64"}, {"6.12", "arm64"}}

// bootTimeout bounds one guest: boot, checks and power-off.
const bootTimeout = 25 * time.Minute

// checks are the guest's checks, each a shell command line run by /init
// and reported as "GI-CHECK <name> PASS|FAIL"; column says which column of
// the grid it belongs to.
var checks = []struct{ name, column, command string }{
	{"ps-runtime-dump", "gi ps", "/tests/inspect.test -test.v -test.timeout 15m -test.run '^TestSnapshotMatchesRuntimeDump$'"},
	{"ps-cli", "gi ps", "/tests/gi.test -test.v -test.timeout 15m -test.run '^TestPsTable$'"},
	{"trace-trees", "gi trace", "/tests/trace.test -test.v -test.timeout 15m -test.run '^(TestTraceWorkloads|TestTraceKernelFeatures|TestTraceCookieByIP|TestTracePerfEventFallback|TestMemlockLimit)$'"},
	{"trace-cli", "gi trace", "/tests/gi.test -test.v -test.timeout 15m -test.run '^(TestTraceTreesCLI|TestPsTraceLatencies)$/^(local)?$'"},
	{"trace-messages", "gi trace", "/messages.sh"},
}

// initScript is the guest's /init: mount what gi and the tests need, run
// the checks, print the results on the console, power off.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs root /root
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
echo "GI-KERNEL $(uname -r) $(uname -m) memlock=$(ulimit -l)"
export GI_TEST_TOOLCHAINS=local GI_TARGETS_PREBUILT=/targets GI_REQUIRE_PRIVILEGED=1 GI_BINARY=/gi
{{CHECKS}}
echo GI-DONE
poweroff -f
`

// messagesScript traces the tracee with the gi command and prints what gi
// says on stderr (the one-line warnings about missing kernel features) as
// GI-MESSAGE lines; it fails if gi fails or sees no call.
const messagesScript = `#!/bin/sh
mkfifo /tmp/tracee.in
/targets/tracee-local-pie < /tmp/tracee.in > /tmp/tracee.out 2>&1 &
pid=$!
exec 3>/tmp/tracee.in
i=0
until grep -q READY /tmp/tracee.out; do i=$((i+1)); [ $i -gt 300 ] && { echo "tracee not ready"; exit 1; }; sleep 0.1; done
/gi trace --duration 6s $pid 'main.chain*' > /tmp/trace.out 2> /tmp/trace.err &
gi=$!
i=0
until grep -q 'tracing' /tmp/trace.err; do i=$((i+1)); [ $i -gt 600 ] && { cat /tmp/trace.err; echo "gi trace never attached"; exit 1; }; sleep 0.1; done
echo "chain 2" >&3
wait $gi; rc=$?
sed 's/^/GI-MESSAGE /' /tmp/trace.err
grep -c 'main.chainA() {' /tmp/trace.out
grep -q 'main.chainA() {' /tmp/trace.out || { echo "no chainA in the trace"; exit 1; }
grep -E '^(State|TracerPid)' /proc/$pid/status
grep -q 'TracerPid:	0' /proc/$pid/status || exit 1
kill $pid
exit $rc
`

func TestKernels(t *testing.T) {
	if os.Getenv("GI_TEST_KERNELS") != "1" {
		t.Skip("boots five kernels in qemu, minutes each: make test-kernels (GI_TEST_KERNELS=1)")
	}
	root := repoRoot()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "gi-kernels")
	fetch := exec.Command("bash", filepath.Join(root, "internal", "kernelgrid", "fetch.sh"), cache)
	fetch.Stdout, fetch.Stderr = os.Stdout, os.Stderr
	if err := fetch.Run(); err != nil {
		t.Fatalf("fetch.sh: %v", err)
	}
	out := filepath.Join(root, "bin", "kernels")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	selected := grid
	if v := os.Getenv("GI_KERNELS"); v != "" {
		selected = nil
		for _, k := range grid {
			if slices.Contains(strings.Split(v, ","), k.String()) {
				selected = append(selected, k)
			}
		}
		if len(selected) == 0 {
			t.Fatalf("GI_KERNELS=%s names no kernel of the grid", v)
		}
	}
	initrds := map[string]string{}
	var rows []row
	for _, k := range selected {
		t.Run(k.String(), func(t *testing.T) {
			rd, ok := initrds[k.arch]
			if !ok {
				start := time.Now()
				var err error
				if rd, err = buildInitramfs(root, cache, out, k.arch); err != nil {
					t.Fatalf("initramfs for %s: %v", k.arch, err)
				}
				initrds[k.arch] = rd
				t.Logf("initramfs for %s built in %v", k.arch, time.Since(start).Round(time.Second))
			}
			r := boot(t, cache, out, k, rd)
			rows = append(rows, r)
			for _, c := range []string{"gi ps", "gi trace"} {
				if r.cells[c] != "✓" {
					t.Errorf("%s on %s: %s", c, k, r.cells[c])
				}
			}
		})
	}
	table := formatGrid(rows)
	t.Logf("\n%s", table)
	fmt.Print(table)
}

// row is one kernel's results.
type row struct {
	k        kernel
	release  string
	cells    map[string]string // column -> ✓ or ✗ with the failed checks
	messages []string
	wall     time.Duration
}

// boot runs one guest and reads its results from the console.
func boot(t *testing.T, cache, out string, k kernel, initrd string) row {
	kdir := filepath.Join(cache, "kernel-"+k.String(), "boot")
	vmlinuz, err := filepath.Glob(filepath.Join(kdir, "vmlinuz-*"))
	if err != nil || len(vmlinuz) != 1 {
		t.Fatalf("kernel %s: %v %v", k, vmlinuz, err)
	}
	args := []string{"-smp", "2", "-m", "2048", "-nographic", "-no-reboot", "-accel", "tcg,thread=multi",
		"-kernel", vmlinuz[0], "-initrd", initrd}
	qemu := "qemu-system-x86_64"
	switch k.arch {
	case "amd64":
		args = append(args, "-M", "q35", "-cpu", "max", "-append", "console=ttyS0 rdinit=/init panic=-1 quiet")
	case "arm64":
		qemu = "qemu-system-aarch64"
		args = append(args, "-M", "virt", "-cpu", "cortex-a72", "-append", "console=ttyAMA0 rdinit=/init panic=-1 quiet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.WaitDelay = 10 * time.Second
	logPath := filepath.Join(out, k.String()+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(logFile, pw), logFile
	r := row{k: k, cells: map[string]string{}}
	results := map[string]string{}
	var done bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if i := strings.Index(line, "GI-"); i > 0 {
				line = line[i:] // after the console's escape sequences
			}
			switch f := strings.Fields(line); {
			case len(f) >= 2 && f[0] == "GI-KERNEL":
				r.release = f[1]
			case len(f) == 3 && f[0] == "GI-CHECK":
				results[f[1]] = f[2]
			case len(f) >= 1 && f[0] == "GI-MESSAGE":
				r.messages = append(r.messages, strings.TrimSpace(strings.TrimPrefix(line, "GI-MESSAGE")))
			case line == "GI-DONE":
				done = true
			}
		}
	}()
	start := time.Now()
	err = cmd.Run()
	pw.Close()
	wg.Wait()
	r.wall = time.Since(start)
	t.Logf("%s: %s booted and checked in %v (console: %s)", k, r.release, r.wall.Round(time.Second), logPath)
	if err != nil || !done {
		t.Errorf("%s: qemu %v, guest finished: %v (see %s)", k, err, done, logPath)
	}
	for _, c := range checks {
		res, ok := results[c.name]
		if !ok {
			res = "no result"
		}
		if res != "PASS" {
			r.cells[c.column] += " " + c.name + ": " + res
		}
	}
	for _, col := range []string{"gi ps", "gi trace"} {
		if r.cells[col] == "" {
			r.cells[col] = "✓"
		} else {
			r.cells[col] = "✗" + r.cells[col]
		}
	}
	return r
}

// formatGrid renders the grid as a Markdown table.
func formatGrid(rows []row) string {
	var b strings.Builder
	b.WriteString("| kernel | arch | gi ps | gi trace | boot and checks | what gi said |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		msgs := strings.Join(r.messages, "; ")
		if msgs == "" {
			msgs = "nothing"
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %v | %s |\n", r.k.version, r.release, r.k.arch, r.cells["gi ps"], r.cells["gi trace"], r.wall.Round(time.Second), msgs)
	}
	return b.String()
}

// repoRoot is the module's root directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// buildInitramfs cross-builds gi, its test binaries and the targets for
// arch, and packs them with busybox and the dynamic loader into a gzip'd
// newc archive; it returns the archive's path.
func buildInitramfs(root, cache, out, arch string) (string, error) {
	files := map[string]string{} // path in the guest -> file on the host
	bdir := filepath.Join(out, arch)
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		return "", err
	}
	gobuild := func(dst string, args ...string) error {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		files[dst] = filepath.Join(bdir, filepath.Base(dst))
		return nil
	}
	if err := gobuild("/gi", "build", "-o", filepath.Join(bdir, "gi"), "./cmd/gi"); err != nil {
		return "", err
	}
	for name, pkg := range map[string]string{"inspect.test": "./inspect/", "trace.test": "./trace/", "gi.test": "./cmd/gi/"} {
		if err := gobuild("/tests/"+name, "test", "-c", "-o", filepath.Join(bdir, name), pkg); err != nil {
			return "", err
		}
	}
	for _, tgt := range []struct {
		name string
		opts targets.BuildOptions
	}{
		{"psstates", targets.BuildOptions{}}, {"psstates", targets.BuildOptions{PIE: true}},
		{"tracee", targets.BuildOptions{}}, {"tracee", targets.BuildOptions{PIE: true}},
		{"tracee", targets.BuildOptions{Stripped: true}}, {"tracee", targets.BuildOptions{PIE: true, Stripped: true}},
		{"lockserver", targets.BuildOptions{}},
	} {
		o := tgt.opts
		o.Arch = arch
		path, err := targets.BuildPath(tgt.name, o)
		if err != nil {
			return "", err
		}
		files["/targets/"+targets.PrebuiltName(tgt.name, o)] = path
		if o.PIE && !o.Stripped && tgt.name == "tracee" {
			interp, err := interpreter(path)
			if err != nil {
				return "", err
			}
			loader, err := filepath.EvalSymlinks(filepath.Join(cache, "libc6-"+arch, interp))
			if err != nil {
				return "", fmt.Errorf("the loader %s from libc6:%s: %w", interp, arch, err)
			}
			files[interp] = loader
		}
	}
	files["/bin/busybox"] = filepath.Join(cache, "busybox-"+arch, "bin", "busybox")

	var cmds strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&cmds, "echo 'GI-BEGIN %s'\nif %s; then echo 'GI-CHECK %s PASS'; else echo 'GI-CHECK %s FAIL'; fi\n", c.name, c.command, c.name, c.name)
	}
	scripts := map[string]string{
		"/init":        strings.Replace(initScript, "{{CHECKS}}", cmds.String(), 1),
		"/messages.sh": messagesScript,
	}
	path := filepath.Join(out, "initrd-"+arch+".gz")
	if err := writeInitramfs(path, files, scripts); err != nil {
		return "", err
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
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return "", err
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", fmt.Errorf("%s has no PT_INTERP", path)
}

// writeInitramfs writes a gzip'd newc cpio archive with files (guest path
// -> host file) and scripts (guest path -> contents), each executable,
// and the directories they and the guest's mount points need.
func writeInitramfs(path string, files, scripts map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	w := &newcWriter{w: zw}
	dirs := map[string]bool{"/proc": true, "/sys": true, "/dev": true, "/tmp": true, "/root": true, "/bin": true}
	for p := range files {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		w.entry(strings.TrimPrefix(d, "/"), 0o040755, nil)
	}
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		b, err := os.ReadFile(files[p])
		if err != nil {
			return err
		}
		w.entry(strings.TrimPrefix(p, "/"), 0o100755, b)
	}
	for p, s := range scripts {
		w.entry(strings.TrimPrefix(p, "/"), 0o100755, []byte(s))
	}
	w.entry("TRAILER!!!", 0, nil)
	if w.err != nil {
		return w.err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// newcWriter writes the "new ASCII" cpio format the kernel unpacks.
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

func (c *newcWriter) entry(name string, mode uint32, data []byte) {
	c.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}
