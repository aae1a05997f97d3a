package main

import (
	"encoding/json"
	"fmt"
	"io"
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

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/report"
)

// TestTraceSlowReaderCLI traces hotcold's hot loop, idle when gi counts the
// calls and hot once the trace runs, under a 5% budget, with gi's output
// going where nobody reads it: stdout (--json, trees, --stats) or the
// --perfetto file a pipe of a page that the test reads only after the
// trace. The budget must hold all the same: the governor moves main.hot
// to the sampling windows, and the hot loop keeps its pace, within what
// the untraced phases measured in the same run spread over; the output
// gi could not write is dropped, counted and reported; and when the trace
// ends gi detaches the probes before it waits for the reader. (gi used to
// print from the loop that drains the ring buffer and governs the budget:
// a write that blocked stopped the governor, and the hot loop ran at a
// few thousandths of a percent of its pace, traced whole.)
func TestTraceSlowReaderCLI(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "hotcold", targets.BuildOptions{})
	for _, c := range []struct {
		name     string
		args     []string
		perfetto bool
	}{
		{"json", []string{"--json"}, false},
		{"tree", nil, false},
		{"stats", []string{"--stats", "--interval", "20ms"}, false},
		{"export", []string{"--stats"}, true},
	} {
		t.Run(c.name, func(t *testing.T) { slowReader(t, bin, c.args, c.perfetto) })
	}
}

// slowReaderBacklog is the output backlog gi keeps for the slow reader in
// TestTraceSlowReaderCLI (GI_OUTPUT_BACKLOG): small, so that every output
// drops some.
const slowReaderBacklog = 8192

func slowReader(t *testing.T, bin string, args []string, perfetto bool) {
	const (
		budget   = 0.05
		traceFor = 11 * time.Second
	)
	p := targets.Start(t, bin, "-hot", "-hotwait", "-light", "200ms", "-every", "250ms")
	// The pipe nobody reads while the trace runs, as small as a pipe can
	// be: gi's writes block within milliseconds.
	var unread, writeEnd *os.File
	var err error
	if perfetto {
		path := filepath.Join(t.TempDir(), "trace.json")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if unread, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--perfetto", path)
	} else if unread, writeEnd, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	defer unread.Close()
	if _, err := unix.FcntlInt(unread.Fd(), unix.F_SETPIPE_SZ, os.Getpagesize()); err != nil {
		t.Fatalf("shrink the pipe: %v", err)
	}
	args = append(args, "--max-overhead", "5%", "--duration", traceFor.String(), strconv.Itoa(p.Pid), "main.hot", "main.light")
	g := startGiTraceWith(t, func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), fmt.Sprintf("GI_OUTPUT_BACKLOG=%d", slowReaderBacklog))
		if writeEnd != nil {
			cmd.Stdout = writeEnd
		}
	}, args...)
	attached := time.Now()
	if writeEnd != nil {
		writeEnd.Close() // gi's copy is the only one: EOF when it exits
	}

	// The hot loop starts: traced whole, as the count found it idle.
	seen := len(p.Lines())
	if err := p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitLineAfter(seen, "hot started", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Past the governor's period and the first window's wait (about 2.2
	// s to a closed window, TestSamplingLoadChange), three phases of 1.5
	// s while the trace runs and its output is not read.
	time.Sleep(3 * time.Second)
	var traced []float64
	for range 3 {
		traced = append(traced, p.LoopPace(t, "hot", len(p.Lines()), 1, 6))
	}
	if time.Since(attached) > traceFor {
		t.Fatalf("the traced phases ended %v after the probes went in, past the trace's %v: the machine is too slow for the test", time.Since(attached).Round(time.Millisecond), traceFor)
	}

	// The trace ends; its output is still not read. The probes must go
	// all the same: gi waits for the reader with nothing attached.
	killed := false
	for {
		time.Sleep(100 * time.Millisecond)
		_, links := bpfObjectsOf(t, g.cmd.Process.Pid)
		if len(links) == 0 && time.Since(attached) > traceFor {
			break
		}
		if time.Since(attached) > traceFor+10*time.Second {
			t.Errorf("gi still holds %d BPF links %v after its %v trace: the probes stay in while it waits for its output to be read", len(links), time.Since(attached).Round(time.Second), traceFor)
			g.cmd.Process.Kill()
			killed = true
			break
		}
	}
	var untraced []float64
	for range 3 {
		untraced = append(untraced, p.LoopPace(t, "hot", len(p.Lines()), 1, 6))
	}
	// The untraced pace spreads over phases with what else the machine
	// runs: the bound gives the budget twice over, and three times the
	// spread (a fixed bound flakes on a busy machine).
	u := median(untraced)
	spread := (slices.Max(untraced) - slices.Min(untraced)) / u
	bound := max(0.5, 1-2*budget-3*spread)
	ratio := median(traced) / u
	t.Logf("hot loop: untraced %.0f calls/CPU-s (phases %.0f, spread %.1f%%), traced with the output unread %.0f (phases %.0f): %.4f%% of its pace, bound %.1f%%",
		u, untraced, 100*spread, median(traced), traced, 100*ratio, 100*bound)
	if ratio < bound {
		t.Errorf("with its output unread, the hot loop kept %.4f%% of its untraced pace under a 5%% budget (bound %.1f%%)", 100*ratio, 100*bound)
	}
	if killed {
		<-g.done
		t.Fatalf("gi killed; stderr:\n%s", g.stderr)
	}

	// Now read: gi writes what it kept, and exits.
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(unread)
		read <- b
	}()
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		t.Fatalf("gi did not exit once its output was read; stderr:\n%s", g.stderr)
	}
	out := <-read
	stderr := g.stderr.String()
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("gi trace exited %d:\n%s", code, stderr)
	}
	t.Logf("%d bytes read after the trace; stderr:\n%s", len(out), stderr)

	// The governor acted: main.hot went to the sampling windows.
	if !strings.Contains(stderr, "main.hot (") || !strings.Contains(stderr, "became costly during the trace") {
		t.Errorf("main.hot not moved to the sampling windows")
	}
	if m := regexp.MustCompile(`gi: sampled main\.hot: \d+ calls traced whole.* in (\d+) windows`).FindStringSubmatch(stderr); m == nil || atoiT(t, m[1]) == 0 {
		t.Errorf("no sampling window of main.hot")
	}
	// What could not be written was dropped, counted and said once.
	drops := regexp.MustCompile(`gi: warning: (.*) was not read fast enough: (\d+) (.*) dropped`).FindAllStringSubmatch(stderr, -1)
	if len(drops) != 1 || atoiT(t, drops[0][2]) == 0 {
		t.Fatalf("the dropped output said %d times, not once", len(drops))
	}
	dropped := atoiT(t, drops[0][2])
	if perfetto != strings.HasPrefix(drops[0][1], "--perfetto") {
		t.Errorf("the drops are said of %q", drops[0][1])
	}
	switch {
	case perfetto:
		if !json.Valid(out) {
			t.Errorf("the --perfetto file (%d bytes) is not valid JSON with %d calls dropped: %.300s…", len(out), dropped, out)
		}
	case slices.Contains(args, "--json"):
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		validate(t, compileSchema(t, "traceSummary"), "gi trace --json summary", last)
		var sum struct {
			Summary report.TraceSummary `json:"summary"`
		}
		if err := json.Unmarshal([]byte(last), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Summary.Dropped != uint64(dropped) {
			t.Errorf("the summary says %d calls dropped, stderr %d", sum.Summary.Dropped, dropped)
		}
		sm := sum.Summary.Sampling
		if sm == nil || !slices.ContainsFunc(sm.Functions, func(f report.SampledFunction) bool { return f.Function == "main.hot" }) {
			t.Errorf("sampling summary %+v", sm)
		}
		for _, l := range lines[:len(lines)-1] {
			if !json.Valid([]byte(l)) {
				t.Fatalf("a call line is not JSON: %.300s", l)
			}
		}
	}
}

// median returns the median of v (not empty).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
