package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/link"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/trace"
)

// Terminal control sequences gi top uses.
const (
	altScreenOn  = "\x1b[?1049h"
	altScreenOff = "\x1b[?1049l"
	cursorHide   = "\x1b[?25l"
	cursorShow   = "\x1b[?25h"
	clearHome    = "\x1b[H\x1b[2J"
	reverseOn    = "\x1b[7m"
	styleOff     = "\x1b[0m"
)

// How often the view refreshes and the traced functions may be re-attached.
const (
	topRefresh  = time.Second
	topReattach = 5 * time.Second
)

func newTopCommand(a *app) *cobra.Command {
	var tf targetFlags
	cmd := &cobra.Command{
		Use:   "top <pid|name> | --ns-pid N --in PID",
		Short: "A live view of a process's goroutines, grouped, with the latency of the functions they are in",
		Long: `top refreshes every second: goroutines grouped by state and function, how
many, how long they have waited, and the latency of those functions from a
trace kept running on them. Keys: c/w/p sort by count, wait, p99; / filter;
j/k or arrows move; Enter expands a group into its goroutines and stacks;
q quits (and detaches).`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTop(a, firstArg(args), tf)
		},
	}
	addTargetFlags(cmd.Flags(), &tf)
	return cmd
}

// topGroup is one row of the view.
type topGroup struct {
	state, function, location string
	goroutines                []*inspect.Goroutine
	maxWait                   time.Duration
}

// topView is the interactive state.
type topView struct {
	sortBy    byte // 'c', 'w', 'p'
	filter    *regexp.Regexp
	filterSrc string
	editing   bool
	input     string
	selected  int
	expanded  bool
	message   string
}

func runTop(a *app, target string, tf targetFlags) error {
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) || !term.IsTerminal(int(os.Stdin.Fd())) {
		return errors.New("gi top needs a terminal: use gi ps (or gi ps --trace D) for output that is not interactive")
	}
	pid, err := tf.resolve(target)
	if err != nil {
		return err
	}
	t, err := inspect.Open(pid)
	if err != nil {
		return err
	}
	defer t.Close()
	// The first snapshot before touching the terminal: errors stay plain.
	snap, err := t.Snapshot(a.tracer)
	if err != nil {
		return err
	}

	old, err := term.MakeRaw(int(os.Stdin.Fd()))
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	out := os.Stdout
	io.WriteString(out, altScreenOn+cursorHide)
	restore := func() {
		io.WriteString(out, styleOff+cursorShow+altScreenOff)
		term.Restore(int(os.Stdin.Fd()), old)
	}
	defer restore()

	ctx, stop := a.traceContext() // SIGTERM/SIGINT end the view cleanly
	defer stop()
	tt := link.NewLive(pid, topReattach)
	defer tt.Close()

	keys := make(chan byte, 64)
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := os.Stdin.Read(buf)
			if err != nil {
				close(keys)
				return
			}
			for _, b := range buf[:n] {
				keys <- b
			}
		}
	}()

	prog := link.ProgramOf(t.Binary)
	v := &topView{sortBy: 'c'}
	tick := time.NewTicker(topRefresh)
	defer tick.Stop()
	var groups []*topGroup
	refresh := func() {
		groups = groupForTop(prog, snap.Goroutines)
		var names []string
		for _, g := range groups {
			if g.function != "" {
				names = append(names, g.function)
			}
		}
		tt.Ensure(names)
	}
	refresh()
	draw := func() { drawTop(out, snap, groups, v, tt) }
	draw()
	escape := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			s, err := t.Snapshot(a.tracer)
			if err != nil {
				if !ptrace.Alive(pid) {
					restore()
					return fmt.Errorf("process %d exited", pid)
				}
				v.message = err.Error()
			} else {
				snap = s
				refresh()
			}
			draw()
		case b, ok := <-keys:
			if !ok {
				return nil
			}
			// Arrow keys arrive as ESC [ A / ESC [ B.
			switch {
			case escape == 1 && b == '[':
				escape = 2
				continue
			case escape == 2:
				escape = 0
				switch b {
				case 'A':
					b = 'k'
				case 'B':
					b = 'j'
				default:
					continue
				}
			case b == 0x1b && !v.editing:
				escape = 1
				continue
			}
			if v.editing {
				switch b {
				case '\r', '\n':
					v.editing = false
					re, err := regexp.Compile(v.input)
					if err != nil {
						v.message = "bad filter: " + err.Error()
					} else {
						v.filter, v.filterSrc, v.selected = re, v.input, 0
						if v.input == "" {
							v.filter = nil
						}
					}
				case 0x1b:
					v.editing = false
				case 0x7f, 0x08:
					if len(v.input) > 0 {
						v.input = v.input[:len(v.input)-1]
					}
				default:
					if b >= 0x20 && b < 0x7f {
						v.input += string(b)
					}
				}
				draw()
				continue
			}
			switch b {
			case 'q', 3: // q, Ctrl-C
				return nil
			case 'c', 'w', 'p':
				v.sortBy, v.selected = b, 0
			case '/':
				v.editing, v.input = true, ""
			case 'j':
				v.selected++
			case 'k':
				if v.selected > 0 {
					v.selected--
				}
			case '\r', '\n', 'e':
				v.expanded = !v.expanded
			}
			draw()
		}
	}
}

// groupForTop folds goroutines by state and the function they are in: the
// measured one (link.Program.MeasuredFrames), traced and shown, or where
// no frame can be traced, the goroutine's location.
func groupForTop(prog link.Program, gs []*inspect.Goroutine) []*topGroup {
	index := map[string]*topGroup{}
	var out []*topGroup
	for _, g := range gs {
		if g.System {
			continue
		}
		fn, loc := location(g)
		traced := ""
		if m := prog.MeasuredFrames(g, 1); len(m) > 0 {
			traced, fn, loc = m[0].Function, m[0].Function, fmt.Sprintf("%s:%d", shortFile(m[0].File), m[0].Line)
		}
		key := g.State + "\x00" + fn
		tg := index[key]
		if tg == nil {
			tg = &topGroup{state: g.State, function: traced, location: fn + " " + loc}
			index[key] = tg
			out = append(out, tg)
		}
		tg.goroutines = append(tg.goroutines, g)
		if g.WaitKnown && g.Wait > tg.maxWait {
			tg.maxWait = g.Wait
		}
	}
	return out
}

func drawTop(w io.Writer, snap *inspect.Snapshot, groups []*topGroup, v *topView, tt *link.Live) {
	width, height, err := term.GetSize(int(os.Stdout.Fd()))
	if err != nil || width < 40 || height < 10 {
		width, height = 120, 40
	}
	type row struct {
		g *topGroup
		h *trace.Histogram
	}
	var rows []row
	for _, g := range groups {
		if v.filter != nil && !v.filter.MatchString(g.state+" "+g.location) {
			continue
		}
		rows = append(rows, row{g: g, h: tt.Histogram(g.function)})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch v.sortBy {
		case 'w':
			return a.g.maxWait > b.g.maxWait
		case 'p':
			return p99(a.h) > p99(b.h)
		}
		return len(a.g.goroutines) > len(b.g.goroutines)
	})
	if v.selected >= len(rows) {
		v.selected = max(0, len(rows)-1)
	}
	var lines []string
	total := 0
	for _, g := range snap.Goroutines {
		if !g.System {
			total++
		}
	}
	sortName := map[byte]string{'c': "count", 'w': "wait", 'p': "p99"}[v.sortBy]
	lines = append(lines, fmt.Sprintf("gi top - pid %s (%s) - %d goroutines - paused %v - %s - sort: %s",
		pidText(snap.PID, snap.NSPid), snap.GoVersion, total, snap.Pause.Round(10*time.Microsecond), time.Now().Format("15:04:05"), sortName))
	filter := "filter: " + v.filterSrc
	if v.editing {
		filter = "filter: /" + v.input + "_"
	}
	lines = append(lines, "keys: c w p sort  / filter  j k move  Enter expand  q quit   "+filter)
	if err := tt.Err(); err != "" {
		lines = append(lines, "trace: "+err)
	}
	if v.message != "" {
		lines = append(lines, v.message)
	}
	lines = append(lines, fmt.Sprintf("%6s  %-22s %8s %8s %9s %9s  %s", "COUNT", "STATE", "MAXWAIT", "CALLS", "P50", "P99", "FUNCTION"))
	for i, r := range rows {
		calls, p50s, p99s := "", "", ""
		if r.h != nil {
			calls = strconv.FormatUint(r.h.Count(), 10)
			p50s, p99s = trace.FormatDuration(r.h.Quantile(0.5)), trace.FormatDuration(r.h.Quantile(0.99))
		}
		line := fmt.Sprintf("%6d  %-22s %8s %8s %9s %9s  %s", len(r.g.goroutines), clip(r.g.state, 22),
			formatWait(r.g.maxWait, r.g.maxWait > 0), calls, p50s, p99s, r.g.location)
		if i == v.selected {
			line = reverseOn + clip(line, width) + styleOff
		}
		lines = append(lines, line)
		if i == v.selected && v.expanded {
			lines = append(lines, expandGroup(snap, r.g, height/2)...)
		}
	}
	var b strings.Builder
	b.WriteString(clearHome)
	for i, l := range lines {
		if i >= height-1 {
			break
		}
		if !strings.Contains(l, reverseOn) {
			l = clip(l, width)
		}
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	io.WriteString(w, b.String())
}

// expandGroup lists a group's goroutines and the stack of the first.
func expandGroup(snap *inspect.Snapshot, g *topGroup, limit int) []string {
	var ids []string
	for i, gr := range g.goroutines {
		if i == 20 {
			ids = append(ids, fmt.Sprintf("+%d more", len(g.goroutines)-20))
			break
		}
		ids = append(ids, strconv.FormatUint(gr.ID, 10))
	}
	out := []string{"        goroutines " + strings.Join(ids, ", ")}
	var sb strings.Builder
	inspect.WriteDump(&sb, snap, g.goroutines[:1], false)
	for _, l := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		if len(out) >= limit {
			out = append(out, "        ...")
			break
		}
		out = append(out, "        "+strings.ReplaceAll(l, "\t", "    "))
	}
	return out
}

func p99(h *trace.Histogram) time.Duration {
	if h == nil {
		return -1
	}
	return h.Quantile(0.99)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
