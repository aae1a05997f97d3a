package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// BenchmarkPs measures `gi ps --stacks` on targets with 1k, 10k and 100k
// parked goroutines: how long the target is stopped (pause), the whole run
// (total, process start to exit), gi's peak memory, and as the baseline the
// same process's own runtime.Stack(all) time, measured in the same run.
// Goals at 100k: pause ≤ 100 ms, total ≤ 1 s, peak ≤ 300 MB.
func BenchmarkPs(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	bin := targets.Build(b, "psstates", targets.BuildOptions{})
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			p := targets.Start(b, bin, "-park", strconv.Itoa(n), "-depth", "50")
			var pause, total time.Duration
			var peakKB int64
			for i := 0; i < b.N; i++ {
				// The JSON run reports the pause; the --stacks run is the
				// full work (unwinding, symbolizing, printing every stack).
				out, err := exec.Command(gi, "ps", "--json", strconv.Itoa(p.Pid)).Output()
				if err != nil {
					b.Fatalf("gi ps --json: %v", err)
				}
				var doc struct {
					PauseNS int64 `json:"pause_ns"`
				}
				if err := json.Unmarshal(out, &doc); err != nil {
					b.Fatal(err)
				}
				pause += time.Duration(doc.PauseNS)

				cmd := exec.Command(gi, "ps", "--stacks", strconv.Itoa(p.Pid))
				cmd.Env = append(os.Environ(), "GI_PEAK_RSS=1")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatalf("gi ps --stacks: %v", err)
				}
				total += time.Since(start)
				// gi's own high-water mark: a child's rusage would count
				// this test process's memory, inherited at fork.
				var kb int64
				if _, err := fmt.Sscanf(stderr.String(), "gi: peak RSS %d kB", &kb); err != nil {
					b.Fatalf("no peak RSS from gi: %q", stderr.String())
				}
				peakKB = max(peakKB, kb)
				targets.CheckNotStopped(b, p.Pid)
			}
			baseline := p.DumpDuration // the target's own runtime.Stack(all), at the same goroutine count
			avgPause := pause / time.Duration(b.N)
			avgTotal := total / time.Duration(b.N)
			b.ReportMetric(float64(avgPause.Microseconds())/1000, "pause-ms")
			b.ReportMetric(float64(avgTotal.Microseconds())/1000, "total-ms")
			b.ReportMetric(float64(peakKB)/1024, "peak-MB")
			b.ReportMetric(float64(baseline.Microseconds())/1000, "runtime.Stack-ms")
			if baseline > 0 {
				b.ReportMetric(float64(avgPause)/float64(baseline), "pause/runtime.Stack")
			}
			b.Logf("%d goroutines: pause %v, total %v, peak %d MB; the target's own runtime.Stack(all): %v (stopped the world for all of it)",
				n, avgPause, avgTotal, peakKB/1024, baseline)
		})
	}
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
