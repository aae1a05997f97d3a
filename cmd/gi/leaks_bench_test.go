package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// leaksRun is one measured run of gi ps --json, with or without --leaks.
type leaksRun struct {
	wall, pause, capture, precopy, walk time.Duration
	reapPause                           time.Duration
	frozen                              bool
	inStop                              string
	peakKB                              int64
	heapBytes                           int64
	leaked, candidates                  int
}

// runLeaks runs gi ps --json [args] on pid and measures it.
func runLeaks(b *testing.B, gi string, pid int, args ...string) leaksRun {
	b.Helper()
	cmd := exec.Command(gi, append(append([]string{"ps", "--json"}, args...), strconv.Itoa(pid))...)
	cmd.Env = append(os.Environ(), "GI_PEAK_RSS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// The output (half a gigabyte of JSON for 100k goroutines) goes to a
	// file, decoded after the run: read from a pipe as gi writes it, the
	// benchmark's own buffer growing and its collector would compete
	// with gi for the CPUs and fresh memory, and be measured with it.
	out, err := os.CreateTemp(b.TempDir(), "gi-ps-*.json")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		out.Close()
		os.Remove(out.Name())
		debug.FreeOSMemory() // the decode's garbage gone before the next run
	}()
	cmd.Stdout = out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("gi ps %v: %v: %s", args, err, stderr.String())
	}
	r := leaksRun{wall: time.Since(start)}
	if _, err := out.Seek(0, 0); err != nil {
		b.Fatal(err)
	}
	if _, err := fmt.Sscanf(stderr.String(), "gi: peak RSS %d kB", &r.peakKB); err != nil {
		b.Fatalf("no peak RSS from gi: %q", stderr.String())
	}
	var doc struct {
		PauseNS int64 `json:"pause_ns"`
		Leaks   *struct {
			Leaked     int    `json:"leaked"`
			Candidates int    `json:"candidates"`
			Undecided  string `json:"undecided"`
			CaptureNS  int64  `json:"capture_ns"`
			PreCopyNS  int64  `json:"precopy_ns"`
			WalkNS     int64  `json:"walk_ns"`
			HeapBytes  int64  `json:"heap_bytes"`
			Frozen     bool   `json:"frozen"`
			ReapNS     int64  `json:"reap_pause_ns"`
			InStop     string `json:"in_stop"`
		} `json:"leaks"`
	}
	if err := json.NewDecoder(bufio.NewReaderSize(out, 1<<20)).Decode(&doc); err != nil {
		b.Fatal(err)
	}
	r.pause = time.Duration(doc.PauseNS)
	if l := doc.Leaks; l != nil {
		if l.Undecided != "" {
			b.Fatalf("gi ps --leaks undecided: %s", l.Undecided)
		}
		r.capture, r.precopy, r.walk = time.Duration(l.CaptureNS), time.Duration(l.PreCopyNS), time.Duration(l.WalkNS)
		r.heapBytes, r.leaked, r.candidates = l.HeapBytes, l.Leaked, l.Candidates
		r.frozen, r.reapPause, r.inStop = l.Frozen, time.Duration(l.ReapNS), l.InStop
	}
	return r
}

// BenchmarkPsLeaks measures gi ps --leaks on the bigheap target with 1 GiB
// of live heap (half of it 4 KiB objects that point at each other, half
// pointer-free 1 MiB slices) and 100k goroutines parked on a channel a
// global holds (judged, none leaked): the pause, the wall time of the
// whole run and gi's peak memory, against plain gi ps of the same process
// in the same run. The process makes a copy of itself in the stop
// (ptrace.Freeze), read after it resumed: the pause is the stop and the
// copy (the kernel copying the page tables), and a second stop reaps
// the copy. Goals (issue 32): pause ≤ 2× plain gi ps, wall ≤ 3 s per GB
// of heap.
func BenchmarkPsLeaks(b *testing.B) {
	requirePrivilege(b)
	gi := buildGi(b)
	const heapMB, goroutines = 1024, 100_000
	p := targets.Start(b, targets.Build(b, "bigheap", targets.BuildOptions{}),
		"-heap-mb", strconv.Itoa(heapMB), "-goroutines", strconv.Itoa(goroutines))
	runLeaks(b, gi, p.Pid) // fills gi's cache of the binary's facts
	b.ResetTimer()
	var plain, leaks []leaksRun
	for i := 0; i < b.N; i++ {
		plain = append(plain, runLeaks(b, gi, p.Pid))
		leaks = append(leaks, runLeaks(b, gi, p.Pid, "--leaks"))
	}
	b.StopTimer()
	targets.CheckNotStopped(b, p.Pid)
	mean := func(rs []leaksRun, f func(leaksRun) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pause, plainPause := mean(leaks, func(r leaksRun) float64 { return ms(r.pause) }), mean(plain, func(r leaksRun) float64 { return ms(r.pause) })
	wall, plainWall := mean(leaks, func(r leaksRun) float64 { return ms(r.wall) }), mean(plain, func(r leaksRun) float64 { return ms(r.wall) })
	peak, plainPeak := mean(leaks, func(r leaksRun) float64 { return float64(r.peakKB) / 1024 }), mean(plain, func(r leaksRun) float64 { return float64(r.peakKB) / 1024 })
	capture := mean(leaks, func(r leaksRun) float64 { return ms(r.capture) })
	precopy := mean(leaks, func(r leaksRun) float64 { return ms(r.precopy) })
	walk := mean(leaks, func(r leaksRun) float64 { return ms(r.walk) })
	heapGB := float64(heapMB) / 1024
	b.ReportMetric(pause, "pause-ms")
	b.ReportMetric(plainPause, "plain-pause-ms")
	b.ReportMetric(pause/plainPause, "pause/plain")
	b.ReportMetric(wall/1000/heapGB, "wall-s/GB")
	b.ReportMetric(peak, "peak-MB")
	b.ReportMetric(plainPeak, "plain-peak-MB")
	reap := mean(leaks, func(r leaksRun) float64 { return ms(r.reapPause) })
	b.ReportMetric(reap, "reap-pause-ms")
	mode := "the heap copied in the stop: " + leaks[0].inStop
	switch {
	case leaks[0].frozen:
		mode = fmt.Sprintf("read from a copy the process made of itself in the stop (reaped in a second stop of %.1f ms)", reap)
	case leaks[0].inStop == "":
		mode = "the heap copied before the stop (soft-dirty)"
	}
	fmt.Printf("gi ps --leaks, %d MiB heap (%.0f MB copied), %d goroutines (%d judged, %d leaked), %s: pause %.1f ms (capture %.1f ms; pre-copy %.1f ms) against %.1f ms plain (%.2fx, goal ≤ 2x); wall %.2f s against %.2f s plain (%.2f s per GB of heap, goal ≤ 3 s); walk %.0f ms; peak %.0f MB against %.0f MB plain; mean of %d\n",
		heapMB, float64(leaks[0].heapBytes)/1e6, goroutines, leaks[0].candidates, leaks[0].leaked, mode, pause, capture, precopy, plainPause, pause/plainPause,
		wall/1000, plainWall/1000, wall/1000/heapGB, walk, peak, plainPeak, b.N)
	if leaks[0].candidates < goroutines {
		b.Errorf("%d goroutines judged, want the %d parked on a channel", leaks[0].candidates, goroutines)
	}
	if leaks[0].leaked != 0 {
		b.Errorf("%d goroutines reported leaked: every parked one waits on a channel a global holds", leaks[0].leaked)
	}
}
