package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// BenchmarkPs measures `gi ps --stacks` on targets with 1k, 10k and 100k
// parked goroutines: how long the target is stopped (pause), the whole run
// (total, process start to exit), gi's peak memory, and as the baseline the
// same process's own runtime.Stack(all) time, measured in the same run.
// The pause is also measured with every stack copied in the stop (the
// baseline of copying parked goroutines' stacks before it), and without
// reading what blocked goroutines wait on (every parked goroutine here
// waits on one channel: one sudog each; in the cond case, 100k wait on
// one sync.Cond, found through their sudogs since Go 1.26, and the pause
// shows what following them costs).
// Beside the pause, the pause felt inside the target: a goroutine of it
// sleeping 200 µs at a time reports its longest gap between two wake-ups
// that overlaps the stop (gi prints when the stop began and ended with
// GI_PHASES=1), its longest gap over the whole gi run (gi competes with the
// target for the CPUs before and after the stop), and as the baseline its
// longest gap over as long a time without gi. Where the stop's time goes,
// phase by phase (wall, gi's CPU time, page faults, process_vm_readv calls
// and bytes), is printed as a table (GI_PHASES=1: inspect.Phases).
// The pause is measured once more with --core writing a core of what the
// listing read (the core output: the table and the core written).
// Each output's run is also given as gi's CPU time, and measured once more
// on a 100k target without its three spinning goroutines (idle): on a
// 2-CPU machine the spinners take the CPUs gi's threads would use, and
// the wall time of a run is then its CPU time shared, not its work.
// Goals at 100k (issue 16): pause ≤ 25 ms, every output ≤ 1 s, peak ≤ 200 MB.
func BenchmarkPs(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	bin := targets.Build(b, "psstates", targets.BuildOptions{})
	for _, c := range []struct {
		n    int
		on   string
		idle bool // no spinning goroutines: gi has both CPUs to itself
	}{{1_000, "chan", false}, {10_000, "chan", false}, {100_000, "chan", false}, {100_000, "cond", false}, {100_000, "chan", true}} {
		name := fmt.Sprintf("goroutines=%d", c.n)
		if c.on != "chan" {
			name += "/on=" + c.on
		}
		spin := "3" // psstates' default: more spinners than this machine's 2 CPUs
		if c.idle {
			name += "/idle"
			spin = "0"
		}
		n := c.n
		b.Run(name, func(b *testing.B) {
			p := targets.Start(b, bin, "-park", strconv.Itoa(n), "-depth", "50", "-park-on", c.on, "-felt", "-spin", spin)
			var pause, pauseNoWaits, pauseInStop, pauseCore time.Duration
			var felt, feltRun, feltBaseline time.Duration
			var phases phaseSums
			formatTotal, formatCPU, formatPeak := map[string]time.Duration{}, map[string]time.Duration{}, map[string]int64{}
			for i := 0; i < b.N; i++ {
				// The JSON run reports the pause; the --stacks run is the
				// full work (unwinding, symbolizing, printing every stack).
				// The baseline: the same stop without what blocked
				// goroutines wait on (--waits=false), run alternately.
				jsonPause := func(args ...string) time.Duration {
					out, err := exec.Command(gi, append([]string{"ps", "--json"}, append(args, strconv.Itoa(p.Pid))...)...).Output()
					if err != nil {
						b.Fatalf("gi ps --json %v: %v", args, err)
					}
					var doc struct {
						PauseNS int64 `json:"pause_ns"`
					}
					if err := json.Unmarshal(out, &doc); err != nil {
						b.Fatal(err)
					}
					return time.Duration(doc.PauseNS)
				}
				pauseNoWaits += jsonPause("--waits=false")
				pauseInStop += jsonPause("--copy-stacks-early=false")
				pauseCore += jsonPause("--core", filepath.Join(b.TempDir(), "core"))
				// The pause with its phases, and as the target felt it.
				gap(b, p, "gap")
				start := time.Now()
				ph := psPhases(b, gi, p.Pid)
				took := time.Since(start)
				g := gap(b, p, fmt.Sprintf("gap %d %d", ph.From, ph.To))
				pause += time.Duration(ph.PauseNS)
				phases.add(ph)
				felt += time.Duration(g["in_ns"])
				feltRun += time.Duration(g["max_ns"])
				time.Sleep(took)
				feltBaseline += time.Duration(gap(b, p, "gap")["max_ns"])

				// Every output, whole (reading the binary, the snapshot,
				// unwinding, printing), with gi's own peak memory: a
				// child's rusage would count this test process's memory,
				// inherited at fork.
				for _, f := range psFormats {
					args := append([]string{"ps"}, f.args...)
					switch f.name {
					case "pprof":
						args = append(args, filepath.Join(b.TempDir(), "gi.pb.gz"))
					case "core":
						args = append(args, filepath.Join(b.TempDir(), "core"))
					case "graph":
						args = append(args, filepath.Join(b.TempDir(), "wf.dot"))
					}
					cmd := exec.Command(gi, append(args, strconv.Itoa(p.Pid))...)
					cmd.Env = append(os.Environ(), "GI_PEAK_RSS=1")
					var stderr strings.Builder
					// Straight to /dev/null: a pipe to this process would
					// time this process's reading too.
					null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					cmd.Stdout, cmd.Stderr = null, &stderr
					start := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("gi %v: %v: %s", args, err, stderr.String())
					}
					formatTotal[f.name] += time.Since(start)
					formatCPU[f.name] += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
					null.Close()
					var kb int64
					m := peakRSS.FindStringSubmatch(stderr.String())
					if m == nil {
						b.Fatalf("no peak RSS from gi: %q", stderr.String())
					}
					kb, _ = strconv.ParseInt(m[1], 10, 64)
					formatPeak[f.name] = max(formatPeak[f.name], kb)
				}
				targets.CheckNotStopped(b, p.Pid)
			}
			baseline := p.DumpDuration // the target's own runtime.Stack(all), at the same goroutine count
			avgPause := pause / time.Duration(b.N)
			b.ReportMetric(float64(avgPause.Microseconds())/1000, "pause-ms")
			noWaits := pauseNoWaits / time.Duration(b.N)
			b.ReportMetric(float64(noWaits.Microseconds())/1000, "pause-without-waits-ms")
			b.ReportMetric(float64(avgPause)/float64(max(noWaits, 1)), "pause/without-waits")
			withCore := pauseCore / time.Duration(b.N)
			b.ReportMetric(float64(withCore.Microseconds())/1000, "pause-core-ms")
			b.ReportMetric(float64(withCore)/float64(max(avgPause, 1)), "pause-core/pause")
			inStop := pauseInStop / time.Duration(b.N)
			b.ReportMetric(float64(inStop.Microseconds())/1000, "pause-stacks-in-stop-ms")
			b.ReportMetric(float64(avgPause)/float64(max(inStop, 1)), "pause/stacks-in-stop")
			b.ReportMetric(float64(baseline.Microseconds())/1000, "runtime.Stack-ms")
			if baseline > 0 {
				b.ReportMetric(float64(avgPause)/float64(baseline), "pause/runtime.Stack")
			}
			feltAvg := felt / time.Duration(b.N)
			b.ReportMetric(float64(feltAvg.Microseconds())/1000, "felt-pause-ms")
			b.ReportMetric(float64(feltBaseline.Microseconds())/1000/float64(b.N), "felt-baseline-ms")
			b.ReportMetric(float64(feltRun.Microseconds())/1000/float64(b.N), "longest-gap-in-run-ms")
			// Printed, not logged: a benchmark's log is cut after ten lines.
			fmt.Printf("%s: pause %v, felt inside the target %v (its longest gap over the whole gi run %v; without gi, over as long: %v); where the time went (mean of %d runs; CPU and faults are gi's, all threads):\n%s",
				name, avgPause.Round(10*time.Microsecond), feltAvg.Round(10*time.Microsecond), (feltRun / time.Duration(b.N)).Round(10*time.Microsecond),
				(feltBaseline / time.Duration(b.N)).Round(10*time.Microsecond), b.N, phases.table(b.N))
			var lines []string
			for _, f := range psFormats {
				avg := formatTotal[f.name] / time.Duration(b.N)
				cpu := formatCPU[f.name] / time.Duration(b.N)
				b.ReportMetric(float64(avg.Microseconds())/1000, f.name+"-ms")
				b.ReportMetric(float64(cpu.Microseconds())/1000, f.name+"-cpu-ms")
				b.ReportMetric(float64(formatPeak[f.name])/1024, f.name+"-peak-MB")
				lines = append(lines, fmt.Sprintf("%s %v (CPU %v), %d MB", f.name, avg.Round(time.Millisecond), cpu.Round(time.Millisecond), formatPeak[f.name]/1024))
			}
			// Printed too: the log of a benchmark with sub-benchmarks is cut.
			fmt.Printf("%s: whole runs, wall (gi's CPU, user and system, all threads), peak RSS (goal: ≤1 s, ≤200 MB at 100k): %s\n", name, strings.Join(lines, "; "))
			b.Logf("%d goroutines: pause %v (%v copying every stack in the stop, as gi did before it copied stacks early; %v without reading what they wait on; %v writing a core with --core; the target's own runtime.Stack(all) %v, stopping the world for all of it); whole runs (goal: ≤1 s, ≤200 MB at 100k): %s",
				n, avgPause, inStop, noWaits, withCore, baseline, strings.Join(lines, "; "))
		})
	}
}

// psPhases runs gi ps --json on pid with GI_PHASES=1 and returns the
// phases gi printed.
func psPhases(b *testing.B, gi string, pid int) stopPhases {
	cmd := exec.Command(gi, "ps", "--json", strconv.Itoa(pid))
	cmd.Env = append(os.Environ(), "GI_PHASES=1")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("gi ps --json: %v: %s", err, stderr.String())
	}
	_, line, ok := strings.Cut(stderr.String(), "gi: phases ")
	if !ok {
		b.Fatalf("no phases from gi: %q", stderr.String())
	}
	var ph stopPhases
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &ph); err != nil {
		b.Fatalf("gi's phases: %v: %q", err, line)
	}
	return ph
}

// gap sends the gap command to a psstates -felt target and returns the
// fields of its answer.
func gap(b *testing.B, p *targets.Process, command string) map[string]int64 {
	r, err := p.Do(command, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for k, v := range r {
		out[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return out
}

// stopPhases is what gi prints with GI_PHASES=1 (inspect.Phases.JSON).
type stopPhases struct {
	PauseNS int64   `json:"pause_ns"`
	From    int64   `json:"stop_from_unix_ns"`
	To      int64   `json:"stop_to_unix_ns"`
	Stop    phase   `json:"stop"`
	Phases  []phase `json:"phases"`
}

type phase struct {
	Name       string `json:"name"`
	InStop     bool   `json:"in_stop"`
	WallNS     int64  `json:"wall_ns"`
	UserNS     int64  `json:"user_ns"`
	SysNS      int64  `json:"sys_ns"`
	MinFlt     int64  `json:"minflt"`
	MajFlt     int64  `json:"majflt"`
	Readv      int64
	Iovecs     int64
	ReadvBytes int64
}

// phaseSums adds up the phases of several runs, by name, in order.
type phaseSums struct {
	names []string
	sums  map[string]*phase
}

func (s *phaseSums) add(ph stopPhases) {
	if s.sums == nil {
		s.sums = map[string]*phase{}
	}
	stop := ph.Stop
	stop.Name = "= stop"
	for _, p := range append(ph.Phases, stop) {
		q := s.sums[p.Name]
		if q == nil {
			q = &phase{Name: p.Name, InStop: p.InStop}
			s.sums[p.Name] = q
			s.names = append(s.names, p.Name)
		}
		q.WallNS += p.WallNS
		q.UserNS += p.UserNS
		q.SysNS += p.SysNS
		q.MinFlt += p.MinFlt
		q.MajFlt += p.MajFlt
		q.Readv += p.Readv
		q.Iovecs += p.Iovecs
		q.ReadvBytes += p.ReadvBytes
	}
}

// table prints the mean of n runs, one phase a line.
func (s *phaseSums) table(n int) string {
	var w strings.Builder
	fmt.Fprintf(&w, "%-9s %5s %9s %8s %8s %7s %6s %6s %7s %8s\n", "phase", "stop", "wall ms", "user ms", "sys ms", "minflt", "majflt", "readv", "iovecs", "MB read")
	ms := func(ns int64) float64 { return float64(ns) / 1e6 / float64(n) }
	for _, name := range s.names {
		p := s.sums[name]
		in := ""
		if p.InStop || name == "= stop" {
			in = "yes"
		}
		fmt.Fprintf(&w, "%-9s %5s %9.2f %8.2f %8.2f %7d %6d %6d %7d %8.2f\n", name, in, ms(p.WallNS), ms(p.UserNS), ms(p.SysNS),
			p.MinFlt/int64(n), p.MajFlt/int64(n), p.Readv/int64(n), p.Iovecs/int64(n), float64(p.ReadvBytes)/float64(n)/(1<<20))
	}
	return w.String()
}

// psFormats are the outputs of gi ps BenchmarkPs measures whole.
// peakRSS is the line gi prints with GI_PEAK_RSS=1.
var peakRSS = regexp.MustCompile(`(?m)^gi: peak RSS (\d+) kB$`)

var psFormats = []struct {
	name string
	args []string
}{
	{"table", nil},
	{"group", []string{"--group"}},
	{"json", []string{"--json"}},
	{"stacks", []string{"--stacks"}},
	{"pprof", []string{"--pprof"}},
	{"core", []string{"--core"}}, // the table, and a core of what it read
	{"objects", []string{"--objects"}},
	{"objects-json", []string{"--objects", "--json"}}, // with the wait-for graph
	{"graph", []string{"--graph"}},                    // DOT, the table too
}

// BenchmarkTopOverhead measures the lockserver target's throughput (handler
// calls per second) while gi top runs on it in a terminal, against the same
// target without gi, in one run. gi top stops the target once a second for
// a snapshot and keeps probes on the functions its goroutines are in.
func BenchmarkTopOverhead(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	p := targets.Start(b, targets.Build(b, "lockserver", targets.BuildOptions{}), "-workers", "1", "-pause", "0s", "-hold", "0s", "-work", "20000")
	rate := func(d time.Duration) float64 {
		count := func() float64 {
			r, err := p.Do("calls", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := strconv.ParseFloat(r["calls"], 64)
			return n
		}
		c0, t0 := count(), time.Now()
		time.Sleep(d)
		return (count() - c0) / time.Since(t0).Seconds()
	}
	var without, with float64
	for i := 0; i < b.N; i++ {
		without += rate(5 * time.Second)
		name := "gibench" + strconv.Itoa(i)
		if out, err := exec.Command("tmux", "new-session", "-d", "-s", name, "-x", "200", "-y", "50", gi+" top "+strconv.Itoa(p.Pid)).CombinedOutput(); err != nil {
			b.Fatalf("tmux: %v %s", err, out)
		}
		time.Sleep(2 * time.Second) // attached and refreshing
		with += rate(5 * time.Second)
		exec.Command("tmux", "send-keys", "-t", name, "q").Run()
		time.Sleep(500 * time.Millisecond)
		exec.Command("tmux", "kill-session", "-t", name).Run()
	}
	without, with = without/float64(b.N), with/float64(b.N)
	b.ReportMetric(without, "calls/s-alone")
	b.ReportMetric(with, "calls/s-under-top")
	b.ReportMetric(with/without, "throughput-ratio")
	fmt.Printf("lockserver throughput: %.0f calls/s alone, %.0f calls/s under gi top (%.1f%%)\n", without, with, 100*with/without)
}

// BenchmarkTraceOutputs measures what each output of gi trace costs while
// two goroutines of the tracee call a traced function as fast as they can:
// events per second sustained (target's wall time), events lost, and gi's
// CPU per event, for the call trees (the baseline), --json, --perfetto with
// --pprof, and --otlp to a local OpenTelemetry Collector, in one run.
func BenchmarkTraceOutputs(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	p := targets.Start(b, targets.Build(b, "tracee", targets.BuildOptions{}))
	col := targets.StartCollector(b)
	dir := b.TempDir()
	eventsRe := regexp.MustCompile(`gi: (\d+) events, (\d+) lost`)
	type result struct{ rate, lost, cpuPerEvent float64 }
	run := func(extra ...string) (result, string) {
		args := append([]string{"trace"}, extra...)
		args = append(args, strconv.Itoa(p.Pid), "main.tiny")
		cmd := exec.Command(gi, args...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		pr, pw := io.Pipe()
		cmd.Stderr = io.MultiWriter(&stderr, pw)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		attached := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(pr)
			once := false
			for sc.Scan() {
				if !once && strings.HasPrefix(sc.Text(), "gi: tracing ") {
					close(attached)
					once = true
				}
			}
		}()
		select {
		case <-attached:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			b.Fatalf("gi %v did not attach: %s", args, stderr.String())
		}
		r, err := p.Do("tinypar 2 100000", 5*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		pw.Close()
		m := eventsRe.FindStringSubmatch(stderr.String())
		if m == nil {
			b.Fatalf("gi %v: no summary: %s", args, stderr.String())
		}
		events, _ := strconv.ParseFloat(m[1], 64)
		lost, _ := strconv.ParseFloat(m[2], 64)
		wall, _ := strconv.ParseFloat(r["wall_ns"], 64)
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return result{rate: events / (wall / 1e9), lost: lost, cpuPerEvent: float64(cpu.Nanoseconds()) / max(events, 1)}, stderr.String()
	}
	modes := []struct {
		name string
		args []string
	}{
		{"trees", nil},
		{"json", []string{"--json"}},
		{"perfetto+pprof", []string{"--perfetto", filepath.Join(dir, "t.json"), "--pprof", filepath.Join(dir, "t.pprof")}},
		{"otlp", []string{"--otlp", col.URL}},
	}
	sums := make([]result, len(modes))
	var otlpLine string
	for i := 0; i < b.N; i++ {
		for j, m := range modes {
			r, stderr := run(m.args...)
			sums[j].rate += r.rate / float64(b.N)
			sums[j].lost += r.lost
			sums[j].cpuPerEvent += r.cpuPerEvent / float64(b.N)
			if m.name == "otlp" {
				otlpLine = otlpSummary.FindString(stderr)
			}
		}
	}
	base := sums[0]
	for j, m := range modes {
		s := sums[j]
		b.ReportMetric(s.rate/1e3, m.name+"-k-events/s")
		b.ReportMetric(s.cpuPerEvent, m.name+"-gi-cpu-ns/event")
		fmt.Printf("gi trace %-15s %7.1f k events/s (%.2f× the trees'), %3.0f lost, gi CPU %5.0f ns/event (%.2f× the trees')\n",
			m.name, s.rate/1e3, s.rate/base.rate, s.lost, s.cpuPerEvent, s.cpuPerEvent/base.cpuPerEvent)
		if s.lost > 0 {
			b.Errorf("%s: %v events lost", m.name, s.lost)
		}
	}
	fmt.Printf("last --otlp run: %s\n", otlpLine)
}

// BenchmarkPsCache times a whole gi ps of a small process whose binary's
// derived facts are in the cache against the same run with --no-cache,
// alternately in one run: what the cache saves is reading the binary's
// DWARF (on caddy v2.8.4, a 62 MB binary: 0.51 s uncached, 0.07 s cached).
func BenchmarkPsCache(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	p := targets.Start(b, targets.Build(b, "psstates", targets.BuildOptions{}), "-park", "10")
	dir := b.TempDir()
	run := func(args ...string) time.Duration {
		cmd := exec.Command(gi, append(args, strconv.Itoa(p.Pid))...)
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+dir)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("gi %v: %v: %s", args, err, out)
		}
		return time.Since(start)
	}
	run("ps") // fill the cache
	var cached, uncached time.Duration
	for i := 0; i < b.N; i++ {
		uncached += run("ps", "--no-cache")
		cached += run("ps")
	}
	c, u := cached/time.Duration(b.N), uncached/time.Duration(b.N)
	b.ReportMetric(float64(c.Microseconds())/1000, "cached-ms")
	b.ReportMetric(float64(u.Microseconds())/1000, "uncached-ms")
	b.ReportMetric(float64(c)/float64(u), "cached/uncached")
	fmt.Printf("gi ps of a small process: cached %v, --no-cache %v: ratio %.2f\n", c.Round(time.Millisecond), u.Round(time.Millisecond), float64(c)/float64(u))
}
