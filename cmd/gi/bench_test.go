package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
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
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatalf("gi ps --stacks: %v", err)
				}
				total += time.Since(start)
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peakKB {
					peakKB = ru.Maxrss
				}
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
