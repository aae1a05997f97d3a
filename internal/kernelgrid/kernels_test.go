package kernelgrid

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// kernel is one row of the grid: a Debian kernel package fetch.sh unpacks
// under <cache>/kernel-<version>-<arch>.
type kernel struct{ version, arch string }

func (k kernel) String() string { return k.version + "-" + k.arch }

// grid is every kernel checked, in the order they boot.
var grid = []kernel{{"5.10", "amd64"}, {"6.1", "amd64"}, {"6.12", "amd64"}, {"6.1", "arm64"}, {"6.12", "arm64"}}

// bootTimeout bounds one guest: boot, checks and power-off. A boot with
// the checks takes 1 to 3 minutes under TCG on 2 cores.
const bootTimeout = 15 * time.Minute

// columns of the grid a check can fail.
const (
	colPs       = "gi ps"
	colTrace    = "gi trace"
	colMessages = "messages"
)

// checks are the guest's checks, each a shell command line run by /init
// and reported as "GI-CHECK <name> PASS|FAIL"; column is the grid's
// column it belongs to. The test binaries find the targets prebuilt in
// /targets (GI_TARGETS_PREBUILT) and gi in /gi (GI_BINARY).
var checks = []struct{ name, column, command string }{
	{"ps-runtime-dump", colPs, "/tests/inspect.test -test.v -test.timeout 15m -test.run '^(TestSnapshotMatchesRuntimeDump|TestSnapshotStripped|TestStacksCopiedBeforeStop)$'"},
	{"ps-waits", colPs, "/tests/inspect.test -test.v -test.timeout 15m -test.run '^TestWaitingOn$/^local'"},
	{"ps-cli", colPs, "/tests/gi.test -test.v -test.timeout 15m -test.run '^TestPsTable$'"},
	{"ps-core", colPs, "/tests/inspect.test -test.v -test.timeout 15m -test.run '^TestCoreMatchesRuntimeDump$/^local'"},
	{"ps-core-write", colPs, "/tests/inspect.test -test.v -test.timeout 15m -test.run '^TestSnapshotCoreReadsBack$/^local'"},
	// The vector registers: read as each architecture's kernel gives
	// them, and scanned.
	{"ps-leaks", colPs, "/tests/ptrace.test -test.v -test.timeout 5m -test.run '^(TestFreeze|TestFreezeGiKilled|TestFreezeSeccomp|TestReadVector)$' && /tests/proc.test -test.v -test.timeout 5m -test.run '^TestTracked$' && /tests/leak.test -test.v -test.timeout 15m -test.run '^(TestLeaksMatchTarget|TestLeaksMovingChannel)$/^local' && /tests/gi.test -test.v -test.timeout 5m -test.run '^TestLeaksVectorRegisters$'"},
	{"trace-trees", colTrace, "/tests/trace.test -test.v -test.timeout 15m -test.run '^(TestTraceWorkloads|TestTraceKernelFeatures|TestTraceCookieByIP|TestTracePerfEventFallback|TestTraceAdd|TestMemlockLimit)$'"},
	{"trace-verifier", colTrace, "/tests/bpf.test -test.v -test.timeout 5m -test.run '^TestVerifierBudget$'"},
	{"trace-args", colTrace, "/tests/trace.test -test.v -test.timeout 15m -test.run '^(TestArgsMatchTarget|TestFloatsSignalBlocked)$/^local$/^(pie)?$'"},
	// The phases four times as long: emulation's milliseconds (a spin, a
	// vCPU switch) must not weigh on them (see whyScale).
	// On the emulated 6.1 arm64 guest the first checked run has twice
	// put about 35 ms of the IO wait on CPU (at 2983001 and d4b5044, not
	// at 18c55cd): not understood yet, so the check runs again once
	// before it fails.
	{"trace-why", colTrace, "GI_WHY_SCALE=4 /tests/trace.test -test.v -test.timeout 15m -test.run '^TestWhyMatchesTarget$/^local' || GI_WHY_SCALE=4 /tests/trace.test -test.v -test.timeout 15m -test.run '^TestWhyMatchesTarget$/^local'"},
	// --max-overhead's windows: attached and detached over and over, as
	// the kernel links probes (the older kernels' ways, forced, run on
	// the host: on the emulated arm64 guests they once lost a light call,
	// not yet understood, and reported a sampled call unwound: its return
	// gone with its window's probes, its goroutine exited or called again
	// before the window's end cut it; such a call is now cut).
	{"trace-sampling", colTrace, "/tests/trace.test -test.v -test.timeout 15m -test.run '^TestSamplingWindowsWork$/^kernel'"},
	{"trace-cli-tests", colTrace, "/tests/gi.test -test.v -test.timeout 15m -test.run '^TestTraceTreesCLI$'"},
	{"trace-cli", colTrace, "/bin/sh /trace-cli.sh"},
}

// TestKernels boots each kernel of the grid under qemu and runs gi's
// checks inside (make test-kernels).
func TestKernels(t *testing.T) {
	if os.Getenv("GI_TEST_KERNELS") != "1" {
		t.Skip("boots five Debian kernels in qemu, minutes each: run with GI_TEST_KERNELS=1 (make test-kernels)")
	}
	selected, err := selectKernels(os.Getenv("GI_KERNELS"))
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot()
	cache := os.Getenv("GI_KERNELS_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir() // $XDG_CACHE_HOME, else ~/.cache
		if err != nil {
			t.Fatalf("no cache directory for the kernels (set GI_KERNELS_CACHE): %v", err)
		}
		cache = filepath.Join(dir, "gi-kernels")
	}
	start := time.Now()
	fetch := exec.Command("bash", filepath.Join(root, "internal", "kernelgrid", "fetch.sh"), cache)
	fetch.Stdout, fetch.Stderr = os.Stdout, os.Stderr
	if err := fetch.Run(); err != nil {
		t.Fatalf("fetch.sh %s: %v", cache, err)
	}
	t.Logf("qemu and packages ready in %v (cache %s)", time.Since(start).Round(time.Second), cache)
	out := filepath.Join(root, "bin", "kernels")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	initrds := map[string]string{}
	var rows []*row
	for _, k := range selected {
		r := &row{k: k, cells: map[string]string{}}
		rows = append(rows, r)
		t.Run(k.String(), func(t *testing.T) {
			rd, ok := initrds[k.arch]
			if !ok {
				start := time.Now()
				var err error
				if rd, err = buildInitramfs(root, cache, out, k.arch); err != nil {
					r.fail("initramfs: " + err.Error())
					t.Fatalf("initramfs for %s: %v", k.arch, err)
				}
				initrds[k.arch] = rd
				t.Logf("initramfs for %s built in %v", k.arch, time.Since(start).Round(time.Second))
			}
			boot(t, cache, out, rd, r)
			for _, c := range []string{colPs, colTrace, colMessages} {
				if r.cells[c] != "✓" {
					t.Errorf("%s on %s (%s): %s", c, k, r.release, r.cells[c])
				}
			}
		})
	}
	table := formatGrid(rows)
	t.Logf("kernel grid:\n%s", table)
	fmt.Print(table)
}

// selectKernels returns the kernels GI_KERNELS names (comma-separated, such
// as "5.10-amd64,6.1-arm64"), or the whole grid if it is empty.
func selectKernels(v string) ([]kernel, error) {
	if strings.TrimSpace(v) == "" {
		return grid, nil
	}
	var out []kernel
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(grid, func(k kernel) bool { return k.String() == name })
		if i < 0 {
			var all []string
			for _, k := range grid {
				all = append(all, k.String())
			}
			return nil, fmt.Errorf("GI_KERNELS: %q is not in the grid (%s)", name, strings.Join(all, ", "))
		}
		if !slices.Contains(out, grid[i]) {
			out = append(out, grid[i])
		}
	}
	return out, nil
}

// row is one kernel's results.
type row struct {
	k        kernel
	release  string            // uname -r in the guest
	cells    map[string]string // column -> ✓, or ✗ and why
	messages []string          // what gi trace said on stderr
	failed   map[string][]string
	wall     time.Duration
}

// fail marks every column of the row failed (the guest did not run).
func (r *row) fail(why string) {
	for _, c := range []string{colPs, colTrace, colMessages} {
		r.cells[c] = "✗ " + why
	}
}

// boot runs one guest with initrd and fills r from its console.
func boot(t *testing.T, cache, out, initrd string, r *row) {
	k := r.k
	r.fail("no result")
	vmlinuz, err := filepath.Glob(filepath.Join(cache, "kernel-"+k.String(), "boot", "vmlinuz-*"))
	if err != nil || len(vmlinuz) != 1 {
		r.fail("no kernel image")
		t.Fatalf("kernel %s: vmlinuz %v in %s: %v", k, vmlinuz, cache, err)
	}
	// Emulated (TCG): nested KVM hangs the guest early. No NIC: no option
	// ROM to wait for, and the checks need no network. One host thread for
	// both vCPUs: with multi-threaded TCG (QEMU 7.2), Go programs under
	// uprobes crash on a corrupted return address or closure pointer (most
	// runs of the tracee's churn workload, on every kernel of the grid and
	// on Debian's 7.2, amd64 with -cpu max or qemu64, and arm64); with
	// thread=single, never. This machine's real CPU never does either.
	args := []string{"-smp", "2", "-m", "2048", "-nographic", "-no-reboot", "-nic", "none",
		"-accel", "tcg,thread=single", "-kernel", vmlinuz[0], "-initrd", initrd}
	qemu := "qemu-system-x86_64"
	switch k.arch {
	case "amd64":
		args = append(args, "-M", "q35", "-cpu", "max", "-append", "console=ttyS0 rdinit=/init panic=-1 quiet")
	case "arm64":
		// pauth-impdef: pointer authentication with QEMU's cheap hash
		// instead of QARMA, which costs TCG dearly on every call.
		qemu = "qemu-system-aarch64"
		args = append(args, "-M", "virt", "-cpu", "max,pauth-impdef=on", "-append", "console=ttyAMA0 rdinit=/init panic=-1 quiet")
	default:
		t.Fatalf("no qemu for %s", k.arch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.WaitDelay = 10 * time.Second
	// qemu dies with the test binary (a go test timeout, a kill).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(out, k.String()+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(logFile, pw), logFile
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})

	results := map[string]string{}
	r.failed = map[string][]string{}
	var done bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer io.Copy(io.Discard, pr) // never block qemu, whatever the scanner met
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		check := ""
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if i := strings.Index(line, "GI-"); i > 0 && !strings.Contains(line, "--- FAIL") {
				line = line[i:] // after the console's escape sequences
			}
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "GI-KERNEL":
				r.release = f[1]
				t.Logf("%s: %s", k, line)
			case len(f) == 2 && f[0] == "GI-BEGIN":
				check = f[1]
			case len(f) == 3 && f[0] == "GI-CHECK":
				results[f[1]] = f[2]
				t.Logf("%s: %s %s", k, f[1], f[2])
				check = ""
			case len(f) >= 1 && f[0] == "GI-MESSAGE":
				r.messages = append(r.messages, strings.TrimSpace(strings.TrimPrefix(line, "GI-MESSAGE")))
			case line == "GI-DONE":
				done = true
			case check != "" && strings.Contains(line, "--- FAIL: "):
				r.failed[check] = append(r.failed[check], strings.TrimSpace(line))
			}
		}
	}()
	start := time.Now()
	err = cmd.Run()
	pw.Close()
	wg.Wait()
	r.wall = time.Since(start)
	t.Logf("%s: %s booted and checked in %v (console: %s)", k, r.release, r.wall.Round(time.Second), logPath)
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", bootTimeout, err)
	}
	if err != nil || !done {
		t.Errorf("%s: qemu: %v; guest finished its checks: %v (see %s)", k, err, done, logPath)
	}
	for _, m := range r.messages {
		t.Logf("%s: gi trace said: %s", k, m)
	}

	why := map[string][]string{}
	for _, c := range checks {
		res, ok := results[c.name]
		if !ok {
			res = "no result"
		}
		if res != "PASS" {
			why[c.column] = append(why[c.column], c.name+" "+res)
			for _, f := range r.failed[c.name] {
				t.Logf("%s: %s: %s", k, c.name, f)
			}
		}
	}
	if _, ok := results["trace-cli"]; !ok {
		why[colMessages] = append(why[colMessages], "gi trace did not run")
	} else if msg := checkWarnings(r.release, r.messages); msg != "" {
		why[colMessages] = append(why[colMessages], msg)
	}
	for _, col := range []string{colPs, colTrace, colMessages} {
		if len(why[col]) == 0 {
			r.cells[col] = "✓"
		} else {
			r.cells[col] = "✗ " + strings.Join(why[col], ", ")
		}
	}
}

// checkWarnings compares the warnings gi trace printed with those the
// kernel's release calls for: one per feature of trace.KernelFeatures
// whose minimum release is above it (no uprobe_multi links before 6.6, no
// attach cookies before 5.15). It returns what is wrong, or "".
func checkWarnings(release string, messages []string) string {
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return fmt.Sprintf("kernel release %q unknown", release)
	}
	before := func(ma, mi int) bool { return major < ma || major == ma && minor < mi }
	var want, got []string
	for _, f := range trace.KernelFeatures {
		var ma, mi int
		if _, err := fmt.Sscanf(f.MinimumKernel, "%d.%d", &ma, &mi); err != nil {
			return fmt.Sprintf("feature %s: release %q unknown", f.Name, f.MinimumKernel)
		}
		if before(ma, mi) {
			want = append(want, f.Warning())
		}
	}
	for _, m := range messages {
		if w, ok := strings.CutPrefix(m, "gi: warning: "); ok {
			got = append(got, w)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if slices.Equal(want, got) {
		return ""
	}
	return fmt.Sprintf("warnings %q, want %q", got, want)
}

// formatGrid renders the grid as a Markdown table.
func formatGrid(rows []*row) string {
	var b strings.Builder
	b.WriteString("| kernel | arch | gi ps | gi trace | messages | boot and checks | gi trace warned |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		var warned []string
		for _, m := range r.messages {
			if w, ok := strings.CutPrefix(m, "gi: warning: "); ok {
				warned = append(warned, w)
			}
		}
		said := strings.Join(warned, "; ")
		if said == "" {
			said = "nothing"
		}
		release := r.release
		if release == "" {
			release = "did not boot"
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %s | %v | %s |\n", r.k.version, release, r.k.arch,
			r.cells[colPs], r.cells[colTrace], r.cells[colMessages], r.wall.Round(time.Second), said)
	}
	return b.String()
}

// repoRoot is the module's root directory: the parent of testdata.
func repoRoot() string { return filepath.Dir(targets.Dir()) }
