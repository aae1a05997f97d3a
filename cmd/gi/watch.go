package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/report"
)

// growthRows bounds the rows of each growth table.
const growthRows = 10

// isListing reports whether path is a file holding a saved gi ps --json
// listing (a JSON document), not a pid, a name or a core.
func isListing(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [64]byte
	n, _ := f.Read(head[:])
	return len(bytes.TrimLeft(head[:n], " \t\r\n")) > 0 && bytes.TrimLeft(head[:n], " \t\r\n")[0] == '{'
}

// readListing reads a saved gi ps --json listing.
func readListing(path string) (*inspect.Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	snap, err := report.ReadPs(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}

// runWatch takes a snapshot of the target now and one every interval, and
// prints after each how the goroutines grew since the first: count
// intervals, or until Ctrl-C when count is 0.
func runWatch(a *app, out, errOut io.Writer, t *inspect.Target, interval time.Duration, count int, json bool) error {
	first, err := t.Snapshot(a.tracer)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "gi: watching pid %d every %v from %s: %d goroutines (paused %v)\n", t.PID, interval,
		first.Taken.Format("15:04:05"), len(first.Goroutines), first.Pause.Round(time.Microsecond))
	ctx, stop := a.traceContext()
	defer stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; count == 0 || i < count; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := t.Snapshot(a.tracer)
		if err != nil {
			return err
		}
		if err := writeGrowth(out, t.PID, inspect.Compare(first, now), json, now.Pause); err != nil {
			return err
		}
	}
	return nil
}

// writeGrowth prints how the goroutines grew: one JSON line, or the
// tables of creation sites and stacks; pause is the stop of the later
// snapshot (0: not a live one).
func writeGrowth(out io.Writer, pid int, g *inspect.Growth, json bool, pause time.Duration) error {
	if json {
		return report.WriteLine(out, report.NewGrowth(pid, g, 0))
	}
	doc := report.NewGrowth(pid, g, growthRows)
	rate := func(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) + "/s" }
	delta := func(after, before int) string { return fmt.Sprintf("%+d", after-before) }
	fmt.Fprintf(out, "%s: %d goroutines, %s in %v (%s); %d have not moved", time.Now().Format("15:04:05"), g.After, delta(g.After, g.Before),
		g.Interval.Round(time.Millisecond), rate(rateOf(g.After-g.Before, g.Interval)), len(g.Unmoved))
	if pause > 0 {
		fmt.Fprintf(out, "; paused %v", pause.Round(time.Microsecond))
	}
	fmt.Fprintln(out)
	sites := newListing(out)
	sites.Header("GROWTH", "NOW", "BEFORE", "RATE", "UNMOVED", "CREATED AT")
	sites.Shrink("CREATED AT")
	for _, s := range doc.Sites {
		where := s.Function
		if s.File != "" {
			where += fmt.Sprintf(" (%s:%d)", inspect.ShortPath(s.File), s.Line)
		}
		if err := sites.Append([]string{delta(s.After, s.Before), strconv.Itoa(s.After), strconv.Itoa(s.Before), rate(s.PerSec), strconv.Itoa(s.Unmoved), where}); err != nil {
			return err
		}
	}
	if err := sites.Render(); err != nil {
		return err
	}
	stacks := newListing(out)
	stacks.Header("GROWTH", "NOW", "BEFORE", "RATE", "UNMOVED", "STATE", "FUNCTION", "LOCATION", "E.G.")
	stacks.Shrink("E.G.", "LOCATION", "FUNCTION")
	for _, s := range doc.Stacks {
		if err := stacks.Append([]string{delta(s.After, s.Before), strconv.Itoa(s.After), strconv.Itoa(s.Before), rate(s.PerSec), strconv.Itoa(s.Unmoved),
			s.State, s.Function, fmt.Sprintf("%s:%d", inspect.ShortPath(s.File), s.Line), strconv.FormatUint(s.Goid, 10)}); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	if err := stacks.Render(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return nil
}

// rateOf is delta per second over d.
func rateOf(delta int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(delta) / d.Seconds()
}
