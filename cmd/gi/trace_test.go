package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/report"
)

// giTrace is a running `gi trace`.
type giTrace struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{}
}

// startGiTrace starts gi trace and waits until it reports the probes
// attached. Unless args set --max-overhead, every call is traced whole:
// the tests that use it compare calls with the target's, and under a
// budget a function of a target mostly idle is sampled once it runs
// (TestSamplingLoadChange), as TestTraceJSONAndStatsCLI's main.multiRet
// was in one run.
func startGiTrace(t *testing.T, args ...string) *giTrace {
	t.Helper()
	return startGiTraceWith(t, nil, args...)
}

// startGiTraceWith is startGiTrace with setup, if set, run on the command
// before it starts (its stdout elsewhere than g.stdout, say).
func startGiTraceWith(t *testing.T, setup func(*exec.Cmd), args ...string) *giTrace {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--max-overhead") }) {
		args = append([]string{"--max-overhead", "none"}, args...)
	}
	cmd := exec.Command(buildGi(t), append([]string{"trace"}, args...)...)
	g := &giTrace{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout = g.stdout
	if setup != nil {
		setup(cmd)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	attached := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sent := false
		for sc.Scan() {
			g.stderr.WriteString(sc.Text() + "\n")
			if !sent && strings.Contains(sc.Text(), "gi: tracing ") {
				attached <- true
				sent = true
			}
		}
		if !sent {
			attached <- false
		}
		cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-g.done
	})
	select {
	case ok := <-attached:
		if !ok {
			<-g.done
			t.Fatalf("gi trace %v failed: %s", args, g.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("gi trace %v did not attach", args)
	}
	return g
}

// stop sends sig and waits for gi to exit, returning its exit code.
func (g *giTrace) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	g.cmd.Process.Signal(sig)
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		t.Fatalf("gi trace did not exit after %v", sig)
	}
	return g.cmd.ProcessState.ExitCode()
}

// bpfObjectsOf returns the ids of the BPF programs and links process pid holds.
func bpfObjectsOf(t *testing.T, pid int) (progs, links []uint32) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				continue
			}
			switch k {
			case "prog_id":
				progs = append(progs, uint32(id))
			case "link_id":
				links = append(links, uint32(id))
			}
		}
	}
	return progs, links
}

// checkReleased fails unless every program and link is gone from the kernel.
func checkReleased(t *testing.T, progs, links []uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, id := range progs {
			if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("program %d", id))
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("look up program %d: %v", id, err)
			}
		}
		for _, id := range links {
			if l, err := link.NewFromID(link.ID(id)); err == nil {
				l.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("look up link %d: %v", id, err)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in the kernel after gi exited: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTraceTreesCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	g := startGiTrace(t, strconv.Itoa(p.Pid), "main.chain*")
	progs, links := bpfObjectsOf(t, g.cmd.Process.Pid)
	// Before 5.15 perf events take their program by ioctl, with no link.
	if len(progs) == 0 {
		t.Fatalf("gi holds %d programs and %d links while tracing", len(progs), len(links))
	}
	if _, err := p.Do("chain 2", time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if code := g.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("gi trace exit code %d after Ctrl-C: %s", code, g.stderr)
	}
	out := g.stdout.String()
	for _, want := range []string{"goroutine 1", "main.chainA() {", "  main.chainB() {", "    main.chainC() {", "} main.chainC", "} main.chainA", "main.main+0x"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "main.chainA() {"); n != 2 {
		t.Errorf("%d chainA trees, want 2:\n%s", n, out)
	}
	if !strings.Contains(g.stderr.String(), "0 lost") {
		t.Errorf("no loss summary on stderr: %s", g.stderr)
	}
	checkReleased(t, progs, links)
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("chain 1", time.Minute); err != nil {
		t.Errorf("target no longer works after the trace: %v", err)
	}
}

func TestTraceJSONAndStatsCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{PIE: true}))

	g := startGiTrace(t, "--json", strconv.Itoa(p.Pid), "main.chain*", "main.multiRet")
	if _, err := p.Do("chain 3", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Do("multi 30", time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGTERM)
	counts := map[string]int{}
	var summary map[string]any
	dec := json.NewDecoder(strings.NewReader(g.stdout.String()))
	for {
		var line map[string]any
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("bad JSON line: %v\n%s", err, g.stdout)
		}
		if s, ok := line["summary"]; ok {
			summary = s.(map[string]any)
			continue
		}
		for _, k := range []string{"goid", "function", "file", "line", "caller_function", "caller_file", "caller_line", "depth", "start_ns", "duration_ns", "unwound"} {
			if _, ok := line[k]; !ok {
				t.Fatalf("JSON call lacks %q: %v", k, line)
			}
		}
		counts[line["function"].(string)]++
		if line["function"] == "main.chainC" && (line["depth"].(float64) != 2 || line["caller_function"] != "main.chainB" || line["duration_ns"].(float64) < 5e6) {
			t.Errorf("chainC line wrong: %v", line)
		}
	}
	if counts["main.chainA"] != 3 || counts["main.chainC"] != 3 || counts["main.multiRet"] != 30 {
		t.Errorf("calls per function %v", counts)
	}
	if summary == nil || summary["lost"].(float64) != 0 || summary["events"].(float64) != 2*(3*3+30) || summary["probes"].(float64) < 4 {
		t.Errorf("summary %v", summary)
	}
	// Every event is a probe hit; the goroutine-exit probe may add some.
	if ov, ok := summary["overhead"].(map[string]any); !ok || ov["hits"].(float64) < summary["events"].(float64) ||
		ov["probe_ns"].(float64) <= 0 || ov["target_cpu_ns"].(float64) <= ov["probe_ns"].(float64) || ov["costs_measured"] != true {
		t.Errorf("summary's overhead %v", summary["overhead"])
	}
	if !strings.Contains(g.stderr.String(), "gi: overhead: probes took ") {
		t.Errorf("no overhead line: %s", g.stderr)
	}

	g = startGiTrace(t, "--stats", "--duration", "3s", strconv.Itoa(p.Pid), "main.multiRet")
	if _, err := p.Do("multi 90", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		t.Fatal("--duration did not end the trace")
	}
	out := g.stdout.String()
	if !strings.Contains(out, "CALLS") || !strings.Contains(out, "P99") {
		t.Fatalf("no stats table:\n%s", out)
	}
	found := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "main.multiRet" {
			found = true
			if f[1] != "90" {
				t.Errorf("stats row %q: want 90 calls", line)
			}
		}
	}
	if !found {
		t.Errorf("no row for main.multiRet:\n%s", out)
	}
}

func TestTraceKilledCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	for i := 0; i < 5; i++ {
		g := startGiTrace(t, strconv.Itoa(p.Pid), "main.*")
		progs, links := bpfObjectsOf(t, g.cmd.Process.Pid)
		go p.Do("parallel 4 20", time.Minute)
		time.Sleep(time.Duration(i*20) * time.Millisecond)
		g.stop(t, syscall.SIGKILL)
		checkReleased(t, progs, links)
		targets.CheckNotStopped(t, p.Pid)
		if _, err := p.WaitLine("DONE parallel", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Do("chain 1", time.Minute); err != nil {
		t.Errorf("target broken after gi was killed: %v", err)
	}
}

func TestTraceErrorsCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	_, stderr, code := runGi(t, "trace", strconv.Itoa(p.Pid), "main.noSuchFunction*")
	checkOneLineError(t, stderr, code, `matches no function`)
	_, stderr, code = runGi(t, "trace", "999999999", "main.*")
	checkOneLineError(t, stderr, code, `no such process`)
	_, stderr, code = runGi(t, "trace", strconv.Itoa(p.Pid), "runtime.mallocgc")
	checkOneLineError(t, stderr, code, `cannot be traced`)
	_, stderr, code = runGi(t, "trace", "/no/such/binary", "main.*")
	checkOneLineError(t, stderr, code, `no such file`)
	// The pattern is named once, with the flag it came from.
	_, stderr, code = runGi(t, "trace", strconv.Itoa(p.Pid), "main.[")
	checkOneLineError(t, stderr, code, `^gi: pattern "main\.\[": unbalanced brackets\n$`)
	_, stderr, code = runGi(t, "trace", "--exclude", "x[", strconv.Itoa(p.Pid), "main.*")
	checkOneLineError(t, stderr, code, `^gi: --exclude: pattern "x\[": unbalanced brackets\n$`)
	// An output file that cannot be written fails before anything is
	// attached: one line, no "tracing" line, no warning.
	for _, flag := range []string{"--perfetto", "--pprof"} {
		_, stderr, code = runGi(t, "trace", flag, "/no/such/dir/out", strconv.Itoa(p.Pid), "main.chainA")
		checkOneLineError(t, stderr, code, `^gi: `+flag+`: (open|create) /no/such/dir/out: no such file or directory\n$`)
	}
	_, stderr, code = runGi(t, "ps", "--trace", "1s", "--pprof", "/no/such/dir/out", strconv.Itoa(p.Pid))
	checkOneLineError(t, stderr, code, `^gi: --pprof: create /no/such/dir/out: no such file or directory`)

	cmd := exec.Command(buildGi(t), "trace", strconv.Itoa(p.Pid), "main.*")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	cmd.Run()
	checkOneLineError(t, errBuf.String(), cmd.ProcessState.ExitCode(), `needs CAP_BPF and CAP_PERFMON`)
}

func TestFuncsCLI(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "tracee", targets.BuildOptions{})
	out, stderr, code := runGi(t, "funcs", bin, "main.multiRet", "main.chainA", "runtime.goexit0")
	if code != 0 {
		t.Fatalf("gi funcs: %s", stderr)
	}
	for _, want := range []string{"main.multiRet", "main.chainA", "cannot trace: runtime internals", "2 traceable functions"} {
		if !strings.Contains(out, want) {
			t.Errorf("gi funcs output lacks %q:\n%s", want, out)
		}
	}

	// --json: the same functions, with their probe sites, as the schema says.
	out, stderr, code = runGi(t, "funcs", "--json", bin, "main.multiRet", "main.chainA", "runtime.goexit0")
	if code != 0 {
		t.Fatalf("gi funcs --json: %s", stderr)
	}
	validate(t, compileSchema(t, "funcs"), "gi funcs --json", out)
	var doc struct {
		Probes    int `json:"probes"`
		Functions []struct {
			Name      string   `json:"name"`
			Entry     uint64   `json:"entry"`
			EntrySite uint64   `json:"entry_site"`
			Returns   []uint64 `json:"returns"`
		} `json:"functions"`
		Untraceable []struct{ Name, Reason string } `json:"untraceable"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	probes := 0
	for _, f := range doc.Functions {
		probes += 1 + len(f.Returns)
		if f.EntrySite < f.Entry || len(f.Returns) == 0 {
			t.Errorf("%s: entry %#x, entry probe %#x, returns %#x", f.Name, f.Entry, f.EntrySite, f.Returns)
		}
	}
	if len(doc.Functions) != 2 || doc.Probes != probes || len(doc.Untraceable) != 1 || doc.Untraceable[0].Name != "runtime.goexit0" ||
		!strings.Contains(doc.Untraceable[0].Reason, "runtime internals") {
		t.Errorf("gi funcs --json: %+v", doc)
	}
}

// TestHelpExamples: each command's --help opens with the invocations a user
// needs first, the container and kubectl debug forms among them.
func TestHelpExamples(t *testing.T) {
	for _, cmd := range []string{"ps", "trace", "top", "funcs"} {
		out, stderr, code := runGi(t, cmd, "--help")
		if code != 0 {
			t.Fatalf("gi %s --help: %s", cmd, stderr)
		}
		_, examples, ok := strings.Cut(out, "Examples:\n")
		examples, _, _ = strings.Cut(examples, "\n\n")
		if !ok || strings.Count(examples, "  gi "+cmd+" ") < 3 || !strings.Contains(examples, "kubectl debug") {
			t.Errorf("gi %s --help: want an Examples section with at least 3 invocations and the kubectl debug form:\n%s", cmd, out)
		}
	}
}

// TestTraceTargetExitsCLI: when the traced process exits, gi notices, prints
// what it has, detaches and exits by itself.
func TestTraceTargetExitsCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	g := startGiTrace(t, "--stats", strconv.Itoa(p.Pid), "main.chain*")
	progs, links := bpfObjectsOf(t, g.cmd.Process.Pid)
	if _, err := p.Do("chain 2", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("gi trace still running 30s after its target exited")
	}
	if !strings.Contains(g.stderr.String(), "exited") {
		t.Errorf("no word of the target exiting: %s", g.stderr)
	}
	if !strings.Contains(g.stdout.String(), "main.chainA") {
		t.Errorf("statistics gathered before the exit were not printed:\n%s", g.stdout)
	}
	checkReleased(t, progs, links)
}

// TestTraceNeverReturnsCLI: gi funcs lists functions without a RET as
// entry only; gi trace traces them. A worker loop's tasks nest under it and
// the loop is printed at exit as still running, with its time so far, in the
// tree and in --json; an always-panicking function is shown unwound. All is
// compared with what the target reports.
func TestTraceNeverReturnsCLI(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "tracee", targets.BuildOptions{})
	out, stderr, code := runGi(t, "funcs", bin, "main.worker*", "main.doom*")
	if code != 0 {
		t.Fatalf("gi funcs: %s", stderr)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[0], "main.") {
			rows[f[0]] = f
		}
	}
	for _, name := range []string{"main.workerLoop", "main.doomed"} {
		f := rows[name]
		if len(f) < 8 || f[2] != "0" || strings.Join(f[4:], " ") != "entry only: no RET" {
			t.Errorf("gi funcs row of %s: %q, want 0 returns and \"entry only: no RET\"\n%s", name, f, out)
		}
	}
	for _, name := range []string{"main.workerTask", "main.doomCatcher"} {
		if f := rows[name]; len(f) != 4 || f[2] == "0" {
			t.Errorf("gi funcs row of %s: %q, want return probes and no note", name, f)
		}
	}
	if !strings.Contains(out, "not traceable; 2 at entry only (no RET)") || strings.Contains(out, "cannot trace") {
		t.Errorf("gi funcs summary:\n%s", out)
	}

	p := targets.Start(t, bin)
	// The tree: doomCatcher trees as they return, the worker's at exit.
	g := startGiTrace(t, strconv.Itoa(p.Pid), "main.worker*", "main.doomCatcher", "main.doomed")
	if !strings.Contains(g.stderr.String(), "gi: entry only (no RET): main.workerLoop, main.doomed") &&
		!strings.Contains(g.stderr.String(), "gi: entry only (no RET): main.doomed, main.workerLoop") {
		t.Errorf("no note of the entry-only functions: %s", g.stderr)
	}
	worker, err := p.Do("worker 4", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	doom, err := p.Do("doom 3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	if code := g.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("gi trace exit code %d: %s", code, g.stderr)
	}
	exitedAt := time.Now()
	start := time.Unix(0, int64(atoiT(t, worker["start_unix_ns"])))
	var loopBlock, doomBlocks []string
	for _, block := range strings.Split(strings.TrimSpace(g.stdout.String()), "\n\n") {
		lines := strings.Split(block, "\n")
		switch {
		case strings.Contains(lines[1], "main.workerLoop("):
			loopBlock = lines
		case strings.Contains(lines[1], "main.doomCatcher("):
			doomBlocks = append(doomBlocks, block)
			if len(lines) != 5 || !strings.Contains(lines[2], "  main.doomed(i=") || !strings.Contains(lines[3], "  } main.doomed") ||
				!strings.HasSuffix(lines[3], "unwound (panic, recover or Goexit)") || !strings.Contains(lines[4], "} main.doomCatcher") ||
				strings.Contains(lines[4], "unwound") || !strings.HasPrefix(lines[0]+" ", "goroutine "+doom["goid"]+" ") {
				t.Errorf("doom tree:\n%s", block)
			}
		}
	}
	if len(doomBlocks) != atoiT(t, doom["calls"]) {
		t.Errorf("%d doomCatcher trees, the target made %s calls:\n%s", len(doomBlocks), doom["calls"], g.stdout)
	}
	if loopBlock == nil {
		t.Fatalf("no tree of main.workerLoop:\n%s", g.stdout)
	}
	if !strings.HasPrefix(loopBlock[0], "goroutine "+worker["goid"]+" (created by main.main") {
		t.Errorf("worker tree header %q, the worker is goroutine %s", loopBlock[0], worker["goid"])
	}
	tasks := atoiT(t, worker["calls"])
	if len(loopBlock) != 3+2*tasks || strings.Count(strings.Join(loopBlock, "\n"), "  main.workerTask(j=") != tasks {
		t.Fatalf("worker tree has %d lines, want %d task calls nested under the loop:\n%s", len(loopBlock), tasks, strings.Join(loopBlock, "\n"))
	}
	for i := 0; i < tasks; i++ {
		if closing := loopBlock[3+2*i]; !strings.Contains(closing, "  } main.workerTask") || !strings.Contains(closing, "main.go:") {
			t.Errorf("task %d does not return through a RET: %q", i, closing)
		}
	}
	// Entered when the target says the loop began (the tree prints the
	// time of day to the microsecond).
	entered, err := time.ParseInLocation("15:04:05.000000", strings.Fields(loopBlock[1])[0], time.Local)
	if err != nil {
		t.Fatal(err)
	}
	y, m, d := start.Date()
	entered = time.Date(y, m, d, entered.Hour(), entered.Minute(), entered.Second(), entered.Nanosecond(), time.Local)
	if diff := entered.Sub(start); diff > time.Millisecond || diff < -20*time.Millisecond {
		t.Errorf("loop printed as entered at %v, the target says %v", entered, start)
	}
	last := loopBlock[len(loopBlock)-1]
	if !strings.Contains(last, "} main.workerLoop") || !strings.HasSuffix(last, "still running at exit (time so far)") {
		t.Fatalf("the loop's closing line %q does not say it is still running", last)
	}
	soFar, err := time.ParseDuration(strings.Fields(last)[1])
	if err != nil {
		t.Fatalf("closing line %q: %v", last, err)
	}
	// Printed with 3 decimals: allow 1ms of rounding either way.
	if lo, hi := stopAt.Sub(start)-time.Millisecond, exitedAt.Sub(start)+time.Millisecond; soFar < lo || soFar > hi {
		t.Errorf("loop running for %v at exit, the target began it %v before Ctrl-C and %v before gi exited", soFar, lo, hi)
	}
	if !strings.Contains(g.stderr.String(), " 1 calls still running") {
		t.Errorf("stderr does not count the running loop: %s", g.stderr)
	}

	// --json: one line per completed call, then the running loop.
	g = startGiTrace(t, "--json", strconv.Itoa(p.Pid), "main.worker*", "main.doomCatcher", "main.doomed")
	worker, err = p.Do("worker 3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	doom, err = p.Do("doom 2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stopAt = time.Now()
	g.stop(t, syscall.SIGTERM)
	exitedAt = time.Now()
	start = time.Unix(0, int64(atoiT(t, worker["start_unix_ns"])))
	type jsonLine struct {
		Goid           uint64 `json:"goid"`
		Function       string `json:"function"`
		CallerFunction string `json:"caller_function"`
		Depth          int    `json:"depth"`
		StartNS        int64  `json:"start_ns"`
		DurationNS     int64  `json:"duration_ns"`
		Unwound        *bool  `json:"unwound"`
		Running        *bool  `json:"running"`
		Summary        *struct {
			Events, Lost float64
		} `json:"summary"`
	}
	var lines []jsonLine
	dec := json.NewDecoder(strings.NewReader(g.stdout.String()))
	for {
		var l jsonLine
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("bad JSON line: %v\n%s", err, g.stdout)
		}
		lines = append(lines, l)
	}
	if len(lines) < 2 || lines[len(lines)-1].Summary == nil {
		t.Fatalf("no summary:\n%s", g.stdout)
	}
	sum := lines[len(lines)-1].Summary
	calls := lines[:len(lines)-1]
	counts := map[string]int{}
	for i, l := range calls {
		if l.Running == nil || l.Unwound == nil {
			t.Fatalf("JSON line lacks running or unwound: %+v", l)
		}
		counts[l.Function]++
		switch l.Function {
		case "main.workerTask":
			if strconv.FormatUint(l.Goid, 10) != worker["goid"] || l.Depth != 1 || l.CallerFunction != "main.workerLoop" || *l.Running || *l.Unwound || l.DurationNS < 1e6 {
				t.Errorf("task line %+v", l)
			}
		case "main.doomed":
			if strconv.FormatUint(l.Goid, 10) != doom["goid"] || l.Depth != 1 || l.CallerFunction != "main.doomCatcher" || *l.Running || !*l.Unwound {
				t.Errorf("doomed line %+v", l)
			}
		case "main.doomCatcher":
			if l.Depth != 0 || *l.Running || *l.Unwound {
				t.Errorf("doomCatcher line %+v", l)
			}
		case "main.workerLoop":
			if i != len(calls)-1 {
				t.Errorf("the running loop is not the last call line")
			}
			if strconv.FormatUint(l.Goid, 10) != worker["goid"] || l.Depth != 0 || !*l.Running || *l.Unwound {
				t.Errorf("loop line %+v", l)
			}
			if diff := time.Duration(l.StartNS - start.UnixNano()); diff > time.Millisecond || diff < -20*time.Millisecond {
				t.Errorf("loop start_ns %d, the target says %d (%v apart)", l.StartNS, start.UnixNano(), diff)
			}
			soFar := time.Duration(l.DurationNS)
			if lo, hi := stopAt.Sub(start), exitedAt.Sub(start); soFar < lo || soFar > hi {
				t.Errorf("loop duration_ns %v, the target began it %v before SIGTERM and %v before gi exited", soFar, lo, hi)
			}
		default:
			t.Errorf("unexpected call %+v", l)
		}
	}
	want := map[string]int{"main.workerTask": atoiT(t, worker["calls"]), "main.workerLoop": 1,
		"main.doomCatcher": atoiT(t, doom["calls"]), "main.doomed": atoiT(t, doom["calls"])}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("JSON lines per function %v, want %v", counts, want)
	}
	// Events: the loop's entry, an entry and a return per task, and per
	// doom call two entries and doomCatcher's return.
	if wantEvents := 1 + 2*want["main.workerTask"] + 3*want["main.doomCatcher"]; sum.Lost != 0 || sum.Events != float64(wantEvents) {
		t.Errorf("summary %+v, want %d events and none lost", *sum, wantEvents)
	}
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

// TestTraceWhereCLI filters main.query of the argfuncs target on its
// arguments in the kernel: only the matching calls arrive, with their
// arguments and results, and the summary's event count shows that the
// others produced no event at all (an unfiltered function beside it is
// still traced in full).
func TestTraceWhereCLI(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "argfuncs", targets.BuildOptions{PIE: true})
	const rounds = 4 // round n calls query(n, "user:n") and query(42, "user:42")
	for _, tc := range []struct {
		where string
		ids   []string // the ids of the calls that must arrive
	}{
		{`main.query: id == 42`, []string{"42", "42", "42", "42"}},
		{`main.query: key =~ "user:*" && id < 3`, []string{"0", "1", "2"}},
		{`main.query: key == "user:2"`, []string{"2"}},
		{`main.query: key != "user:42" && id > 0`, []string{"1", "2", "3"}},
	} {
		t.Run(tc.where, func(t *testing.T) {
			p := targets.Start(t, bin, "-stdin")
			g := startGiTrace(t, "--json", "--where", tc.where, strconv.Itoa(p.Pid), "main.query", "main.threeIntsAndString")
			for range rounds {
				if _, err := p.Do("round", time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			g.stop(t, syscall.SIGTERM)
			var ids []string
			others := 0
			var summary map[string]any
			dec := json.NewDecoder(strings.NewReader(g.stdout.String()))
			for {
				var line struct {
					Function string
					Args     []struct{ Name, Type, Value string }
					Results  []struct{ Name, Type, Value string }
					Summary  map[string]any
				}
				if err := dec.Decode(&line); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("bad JSON line: %v\n%s", err, g.stdout)
				}
				switch {
				case line.Summary != nil:
					summary = line.Summary
				case line.Function == "main.query":
					if len(line.Args) != 2 || line.Args[0].Name != "id" || line.Args[1].Value != fmt.Sprintf("%q", "user:"+line.Args[0].Value) || len(line.Results) != 2 {
						t.Errorf("query call %+v", line)
						continue
					}
					ids = append(ids, line.Args[0].Value)
					if line.Args[0].Value == "42" && !strings.HasPrefix(line.Results[1].Value, "(*main.NotFound)(0x") {
						t.Errorf("query(42) returned %+v, want a *main.NotFound", line.Results)
					}
				case line.Function == "main.threeIntsAndString":
					others++
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("query calls with ids %v arrived, want %v", ids, tc.ids)
			}
			if others != rounds {
				t.Errorf("%d threeIntsAndString calls, want %d (no filter on it)", others, rounds)
			}
			// Two events per call that arrived, none for the others.
			if summary == nil || summary["events"].(float64) != float64(2*(len(tc.ids)+rounds)) || summary["lost"].(float64) != 0 {
				t.Errorf("summary %v, want %d events", summary, 2*(len(tc.ids)+rounds))
			}
		})
	}

	p := targets.Start(t, bin, "-stdin")
	for _, bad := range []struct{ where, want string }{
		{`main.query: nope == 1`, `no argument "nope" (it has: id, key)`},
		{`main.nothere: x == 1`, `main.nothere: the function is not traced`},
		{`main.query: id =~ "4*"`, `id has type int, not string`},
		{`main.query id == 1`, `want FUNCTION: CONDITION`},
	} {
		_, stderr, code := runGi(t, "trace", "--where", bad.where, strconv.Itoa(p.Pid), "main.query")
		checkOneLineError(t, stderr, code, regexp.QuoteMeta(bad.want))
	}
	// The flags are named by the command, not by the library.
	_, stderr, code := runGi(t, "trace", "--string-size", "4", "--where", `main.query: key == "user:1"`, strconv.Itoa(p.Pid), "main.query")
	checkOneLineError(t, stderr, code, `^gi: --where main\.query: "user:1": not shorter than the bytes read per string \(4\) \(--string-size\)\n$`)
	_, stderr, code = runGi(t, "trace", "--where", `main.query id == 1`, strconv.Itoa(p.Pid), "main.query")
	checkOneLineError(t, stderr, code, `^gi: --where "main\.query id == 1": want FUNCTION: CONDITION \[&& CONDITION\]\n$`)
	stripped := targets.Start(t, targets.Build(t, "argfuncs", targets.BuildOptions{Stripped: true}), "-stdin")
	_, stderr, code = runGi(t, "trace", "--where", "main.query: id == 1", strconv.Itoa(stripped.Pid), "main.query")
	checkOneLineError(t, stderr, code, `^gi: --where: arguments need DWARF`)

	// Without a filter, a stripped binary is traced without arguments,
	// after one line that says why.
	g := startGiTrace(t, strconv.Itoa(stripped.Pid), "main.query")
	if _, err := stripped.Do("round", time.Minute); err != nil {
		t.Fatal(err)
	}
	g.stop(t, syscall.SIGTERM)
	if n := strings.Count(g.stderr.String(), "arguments need DWARF, and the binary has none (stripped): tracing without them"); n != 1 {
		t.Errorf("%d lines about DWARF on stderr, want 1:\n%s", n, g.stderr)
	}
	if n := strings.Count(g.stdout.String(), "main.query() {"); n != 2 {
		t.Errorf("%d calls of main.query without arguments, want 2:\n%s", n, g.stdout)
	}
}

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "0.5%": 0.005, "none": 0, "0": 0, "20%": 0.2} {
		if got, err := parseBudget(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("parseBudget(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"5", "", "-1%", "100%", "x%", "NaN%"} {
		if _, err := parseBudget(in); err == nil {
			t.Errorf("parseBudget(%q) accepted", in)
		}
	}
}

// TestTraceMaxOverheadCLI traces a function a goroutine calls as fast as
// it can under gi's default budget: gi names it as sampled at start, says
// what it sampled at exit, and the JSON summary (valid by the schema)
// carries the sampling and the overhead. main.hot would take its thread
// many times over traced whole, whatever the machine, so the first window
// waits what one costs at a whole CPU against 40% of the budget, a
// second: a 4 s trace has one at least. How many follow depends on what
// the first measured (their period runs from 0.5 to 10 s), which is
// TestSamplingKeepsBudget's to check.
func TestTraceMaxOverheadCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-hot", "-light", "100ms")
	out, stderr, code := runGi(t, "trace", "--json", "--duration", "4s", strconv.Itoa(p.Pid), "main.hot", "main.light")
	if code != 0 {
		t.Fatalf("gi trace: %s", stderr)
	}
	for _, want := range []string{"traced in sampling windows: main.hot (", "gi: calls before the trace: main.hot ", "gi: sampled main.hot: ", "gi: overhead: probes took "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %q in:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "sampled main.light") {
		t.Errorf("the light function was sampled:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	validate(t, compileSchema(t, "traceSummary"), "gi trace --json summary", last)
	var sum struct {
		Summary report.TraceSummary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(last), &sum); err != nil {
		t.Fatal(err)
	}
	sm := sum.Summary.Sampling
	if sm == nil || sm.Budget != 0.05 || sm.Windows < 1 || len(sm.Functions) != 1 || sm.Functions[0].Function != "main.hot" ||
		sm.Functions[0].Calls == 0 || sm.Functions[0].EstimatedCalls <= float64(sm.Functions[0].Calls) {
		t.Errorf("sampling summary %+v; stderr:\n%s", sm, stderr)
	}
	hot := 0
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, `"function":"main.hot"`) {
			hot++
		}
	}
	if sm != nil && len(sm.Functions) == 1 && uint64(hot) != sm.Functions[0].Calls {
		t.Errorf("%d main.hot lines, the summary says %d calls", hot, sm.Functions[0].Calls)
	}
	if _, _, code := runGi(t, "trace", "--max-overhead", "5", "--duration", "1ms", strconv.Itoa(p.Pid), "main.hot"); code == 0 {
		t.Error("--max-overhead 5 (no %) accepted")
	}
}

// TestTraceWhyCLI checks gi trace --why's output against whyphases's own
// measurements: each JSON call line's time split (valid by the schema)
// and the line under each call of a tree.
func TestTraceWhyCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "whyphases", targets.BuildOptions{}))
	pid := strconv.Itoa(p.Pid)

	g := startGiTrace(t, "--why", "--json", "--max-overhead", "none", pid, "main.phases", "main.burn")
	r, err := p.Do("run", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code := g.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("gi trace exited %d: %s", code, g.stderr)
	}
	schema := compileSchema(t, "traceCall")
	var phases, burn *report.TraceCall
	for _, l := range strings.Split(strings.TrimSpace(g.stdout.String()), "\n") {
		if strings.HasPrefix(l, `{"summary"`) {
			continue
		}
		validate(t, schema, "gi trace --why --json call", l)
		var c report.TraceCall
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		switch c.Function {
		case "main.phases":
			phases = &c
		case "main.burn":
			burn = &c
		}
	}
	if phases == nil || burn == nil || phases.Time == nil || burn.Time == nil {
		t.Fatalf("no split of main.phases or main.burn in:\n%s", g.stdout)
	}
	want := func(key string) int64 { return int64(atoiT(t, r[key])) }
	near := func(what string, got uint64, want int64) {
		t.Helper()
		if d := int64(got) - want; d > 3e6+want/7 || -d > 3e6+want/7 {
			t.Errorf("%s: gi %v, the target measured %v", what, time.Duration(got), time.Duration(want))
		}
	}
	// On CPU in Go's view lies between the burn's thread CPU time and
	// its wall clock (TestWhyMatchesTarget says why).
	within := func(what string, got uint64) {
		t.Helper()
		lo, hi := want("cpu"), want("cpuwall")
		if int64(got) < lo-3e6-lo/7 || int64(got) > hi+3e6+hi/7 {
			t.Errorf("%s: gi %v, the target measured %v of its thread's CPU time in %v", what, time.Duration(got), time.Duration(lo), time.Duration(hi))
		}
	}
	within("main.burn on CPU", burn.Time.OnCPUNS)
	within("main.phases on CPU", phases.Time.OnCPUNS)
	waits := map[string]report.TraceWait{}
	sum := phases.Time.OnCPUNS + phases.Time.RunnableNS + phases.Time.UnknownNS
	for _, w := range phases.Time.Blocked {
		if w.Object != nil || waits[w.Reason].Object == nil {
			waits[w.Reason] = w
		}
		sum += w.NS
	}
	if sum != uint64(phases.DurationNS) {
		t.Errorf("main.phases: parts add up to %d ns, duration %d ns", sum, phases.DurationNS)
	}
	mu, ch, sl, io := waits["sync.Mutex.Lock"], waits["chan receive"], waits["sleep"], waits["IO wait"]
	if mu.Object == nil || mu.Object.Kind != "mutex" || mu.Object.Name != "main.cacheMu" {
		t.Errorf("mutex wait on %+v, want main.cacheMu", mu.Object)
	}
	if io.Object == nil || io.Object.Kind != "fd" || io.Object.Type != "tcp" || io.Object.Remote != r["peer"] {
		t.Errorf("IO wait on %+v, want the tcp socket to %s", io.Object, r["peer"])
	}
	near("sync.Mutex.Lock", mu.NS, want("mutex"))
	near("chan receive", ch.NS, want("chan"))
	near("sleep", sl.NS, want("sleep"))
	near("IO wait", io.NS, want("io"))
	if mu.WokenBy != uint64(want("holder")) || mu.WokenByFunction != "main.holdLock" {
		t.Errorf("mutex wait ended by %d %s, the holder is %s", mu.WokenBy, mu.WokenByFunction, r["holder"])
	}
	if ch.WokenBy != uint64(want("sender")) || ch.WokenByFunction != "main.sendLater" || ch.Object == nil || ch.Object.Kind != "chan" {
		t.Errorf("channel wait %+v, the sender is %s", ch, r["sender"])
	}
	if sl.WokenBy != 0 || io.WokenBy != 0 {
		t.Errorf("sleep ended by %d, IO wait by %d: a timer and the poller end them", sl.WokenBy, io.WokenBy)
	}

	// Trees: a line under each call.
	g = startGiTrace(t, "--why", "--max-overhead", "none", pid, "main.phases")
	if r, err = p.Do("run", time.Minute); err != nil {
		t.Fatal(err)
	}
	g.stop(t, syscall.SIGTERM)
	for _, s := range []string{"cpu ", " · sync.Mutex.Lock ", "(mutex main.cacheMu, goroutine " + r["holder"] + " main.holdLock)", " · chan receive ", "goroutine " + r["sender"] + " main.sendLater)", " · IO wait "} {
		if !strings.Contains(g.stdout.String(), s) {
			t.Errorf("no %q in the tree:\n%s", s, g.stdout)
		}
	}

	// --stats: the parts per function, the mutex's share the largest.
	g = startGiTrace(t, "--why", "--stats", "--max-overhead", "none", pid, "main.phases")
	if _, err = p.Do("run", time.Minute); err != nil {
		t.Fatal(err)
	}
	g.stop(t, syscall.SIGTERM)
	out := g.stdout.String()
	_, parts, ok := strings.Cut(out, "where the time went (--why):")
	if !ok {
		t.Fatalf("no parts table:\n%s", out)
	}
	var rows []string
	for _, l := range strings.Split(parts, "\n") {
		for _, part := range []string{"sync.Mutex.Lock", "chan receive", "on CPU", "IO wait", "sleep", "syscall", "runnable"} {
			if strings.Contains(l, " "+part+" ") {
				rows = append(rows, part)
			}
		}
	}
	if len(rows) != 7 || rows[0] != "sync.Mutex.Lock" {
		t.Errorf("parts %v (the mutex first, by share), in:\n%s", rows, out)
	}
}

// TestTraceWhyBudgetCLI runs gi trace --why under the default budget on a
// process whose goroutines switch millions of times a second: the
// start-up warning says the scheduler's probes go in sampling windows,
// the exit line how many windows and calls unsplit, and the JSON
// summary says so too, in the schema. The scheduler's probes would take
// the process's CPU time over again traced whole (141% here), 28 times
// the budget, whatever the machine; the first window waits a second for
// the budget to pay for it, so the trace lasts several.
func TestTraceWhyBudgetCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-switch", "-light", "100ms", "-lightsleep", "20ms")
	before := lastLightLine(t, p)
	out, stderr, code := runGi(t, "trace", "--why", "--json", "--duration", "4s", strconv.Itoa(p.Pid), "main.light")
	after := lastLightLine(t, p)
	if code != 0 {
		t.Fatalf("gi trace exited %d: %s", code, stderr)
	}
	targets.CheckNotStopped(t, p.Pid)
	for _, want := range []string{"--why's probes on the scheduler", "are attached in sampling windows", "gi: --why: the scheduler's probes were attached in "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	schema := compileSchema(t, "traceSummary")
	var sum struct {
		Summary report.TraceSummary `json:"summary"`
	}
	calls, unsplit := 0, uint64(0)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, `{"summary"`) {
			var c report.TraceCall
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			calls++
			if c.Time == nil {
				unsplit++
			}
			continue
		}
		validate(t, schema, "gi trace --why --json summary", l)
		if err := json.Unmarshal([]byte(l), &sum); err != nil {
			t.Fatal(err)
		}
	}
	sm := sum.Summary.Sampling
	if sm == nil || !sm.WhyWindowed || sm.Windows == 0 || len(sm.Functions) != 0 {
		t.Fatalf("summary's sampling %+v: want the scheduler's probes in windows, no function sampled; stderr:\n%s", sm, stderr)
	}
	// main.light, eight calls a second, traced whole: every call shown
	// (no more than the target made while gi ran, and most of them:
	// gi's start, counting and attaching before the probes went in take
	// a second or two of a busy machine), those without a time split as
	// many as the summary says.
	made := after - before
	if calls > made+1 || calls < made/2 || unsplit != sm.Unsplit {
		t.Errorf("%d calls of main.light, the target made %d while gi ran; %d without a split, the summary says %d", calls, made, unsplit, sm.Unsplit)
	}
}

// lastLightLine returns the count of hotcold p's last "light N" line.
func lastLightLine(t *testing.T, p *targets.Process) int {
	t.Helper()
	lines := p.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if n, ok := strings.CutPrefix(lines[i], "light "); ok {
			return atoiT(t, n)
		}
	}
	return 0
}

// TestFuncsRatesCLI: gi funcs on a process counts each function's calls
// for 50 ms: hotcold's main.hot, called from a loop as fast as it goes,
// counts tens of thousands a second (as fast as the counting probe lets
// it) and would cost the process most of a thread traced whole; main.light, five calls a second, next to
// nothing. The JSON says the same, in the schema; --rates=false counts
// nothing; the target runs on.
func TestFuncsRatesCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-hot", "-light", "200ms")
	pid := strconv.Itoa(p.Pid)
	out, stderr, code := runGi(t, "funcs", "--json", pid, "main.hot", "main.light")
	if code != 0 {
		t.Fatalf("gi funcs --json: %s", stderr)
	}
	validate(t, compileSchema(t, "funcs"), "gi funcs --json", out)
	var doc report.Funcs
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	rates := map[string][2]float64{}
	for _, f := range doc.Functions {
		if f.CallsPerSecond == nil || f.TracedCost == nil {
			t.Fatalf("%s: no call rate (rates_error %q)", f.Name, doc.RatesError)
		}
		rates[f.Name] = [2]float64{*f.CallsPerSecond, *f.TracedCost}
	}
	// The counting probe on main.hot, a leaf the kernel single-steps,
	// lets through tens of thousands of calls a second: counted at that
	// rate, and costly all the same.
	if r := rates["main.hot"]; r[0] < 1e4 || r[1] < 0.05 {
		t.Errorf("main.hot: %.0f calls/s, %.3f of the CPU if traced whole; want tens of thousands at least, most of a thread", r[0], r[1])
	}
	if r := rates["main.light"]; r[0] > 40 || r[1] > 0.01 {
		t.Errorf("main.light: %.0f calls/s, %.3f if traced whole; it is called five times a second", r[0], r[1])
	}
	table, stderr, code := runGi(t, "funcs", pid, "main.hot", "main.light")
	if code != 0 || !strings.Contains(table, "CALLS/S") || !strings.Contains(table, "IF TRACED") {
		t.Errorf("gi funcs table (exit %d, %s):\n%s", code, stderr, table)
	}
	plain, _, code := runGi(t, "funcs", "--rates=false", pid, "main.hot")
	if code != 0 || strings.Contains(plain, "CALLS/S") {
		t.Errorf("gi funcs --rates=false (exit %d):\n%s", code, plain)
	}
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.WaitLineAfter(len(p.Lines()), "rate hot ", 10*time.Second); err != nil {
		t.Errorf("the target stopped reporting after gi funcs: %v", err)
	}
}

// TestTraceMissedCLI: hotcold's light function makes 400 calls of
// main.work a call, which --max-overhead 5% samples. The trees say under
// each light call what it missed of them, the JSON call lines carry it
// (valid by the schema), and the exit line and the summary sum it up. How
// close the estimates come is TestSampledChildrenMissed's to check,
// against the spread the machine gives them: a call a window covered 4%
// of, on a busy machine, saw 54 of its 400 there and estimated ~1500.
func TestTraceMissedCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-light", "20ms", "-lightwork", "400")
	pid := strconv.Itoa(p.Pid)
	out, stderr, code := runGi(t, "trace", "--json", "--args=false", "--duration", "3s", pid, "main.light", "main.work")
	if code != 0 {
		t.Fatalf("gi trace: %s", stderr)
	}
	if !strings.Contains(stderr, "traced in sampling windows: main.work (") || !strings.Contains(stderr, "gi: calls traced whole missed about ") {
		t.Errorf("stderr:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	schema := compileSchema(t, "traceCall")
	var estimated, unknown int
	var sum uint64
	for _, l := range lines[:len(lines)-1] {
		var c report.TraceCall
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		if c.Function != "main.light" || len(c.Missed) == 0 {
			continue
		}
		validate(t, schema, "a light call line", l)
		m := c.Missed[0]
		switch {
		case len(c.Missed) != 1 || m.Function != "main.work" || m.Seen > 400 || m.Floor:
			t.Errorf("light call: missed %+v", c.Missed)
		case m.Unknown:
			unknown++
		case m.Missed > 0:
			estimated++
		}
		sum += m.Missed
	}
	var doc struct {
		Summary report.TraceSummary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &doc); err != nil {
		t.Fatal(err)
	}
	sm := doc.Summary.Sampling
	if sm == nil || sm.Missed != sum || sm.MissedUnknown != uint64(unknown) || estimated == 0 || unknown == 0 {
		t.Errorf("summary %+v; the lines: %d estimates summing to %d, %d unknown", sm, estimated, sum, unknown)
	}
	trees, stderr, code := runGi(t, "trace", "--args=false", "--duration", "2s", pid, "main.light", "main.work")
	if code != 0 || !regexp.MustCompile(`sampled out: ~\d+ calls of main\.work \(\d+ seen in the windows, which covered \d+% of the call\)`).MatchString(trees) ||
		!strings.Contains(trees, "sampled out: the calls of main.work in it (no window covered this call)") {
		t.Errorf("trees (exit %d, %s):\n%.3000s", code, stderr, trees)
	}
}

// TestTraceSampledFirstLines: a trace that samples says in its first
// lines how many functions it traces whole and the budget that would
// trace every call whole, and with --min-duration how many root calls it
// chose among, the windows' share of the trace beside.
func TestTraceSampledFirstLines(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "hotcold", targets.BuildOptions{}), "-hot", "-light", "100ms")
	_, stderr, code := runGi(t, "trace", "--duration", "3s", "--min-duration", "1ns", strconv.Itoa(p.Pid), "main.hot", "main.light")
	if code != 0 {
		t.Fatalf("gi trace: exit %d: %s", code, stderr)
	}
	lines := strings.Split(stderr, "\n")
	hint := regexp.MustCompile(`^gi: warning: 1 of 2 functions traced whole; to trace every call whole: --max-overhead (\d+)% \(the probes would take about (\d+)% of the process's CPU time\)$`)
	at := -1
	for i, l := range lines {
		if m := hint.FindStringSubmatch(l); m != nil {
			at = i
			budget, _ := strconv.Atoi(m[1])
			cost, _ := strconv.Atoi(m[2])
			if budget <= cost || budget > cost+6 {
				t.Errorf("suggested --max-overhead %d%% for probes taking %d%%", budget, cost)
			}
		}
	}
	if at < 0 || at > 3 {
		t.Errorf("the hint is not among the first lines (line %d):\n%s", at, stderr)
	}
	if !regexp.MustCompile(`(?m)^gi: --min-duration 1ns: \d+ of the \d+ root calls seen took that long; the sampling windows covered [\d.]+% of the trace`).MatchString(stderr) {
		t.Errorf("no --min-duration line:\n%s", stderr)
	}
}
