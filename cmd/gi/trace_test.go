package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gi-debug/gi/internal/targets"
)

// giTrace is a running `gi trace`.
type giTrace struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{}
}

// startGiTrace starts gi trace and waits until it reports the probes attached.
func startGiTrace(t *testing.T, args ...string) *giTrace {
	t.Helper()
	cmd := exec.Command(buildGi(t), append([]string{"trace"}, args...)...)
	g := &giTrace{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout = g.stdout
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
	if len(progs) == 0 || len(links) == 0 {
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
