package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/service"
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

// How often the view refreshes and the traced functions may be re-attached,
// and how long an incomplete escape sequence waits for its end.
const (
	topRefresh  = time.Second
	topReattach = 5 * time.Second
	escapeWait  = 40 * time.Millisecond
)

func newTopCommand(a *app) *cobra.Command {
	var tf targetFlags
	var why bool
	var maxOverhead string
	cmd := &cobra.Command{
		Use:   "top <pid|name> | --ns-pid N --in PID",
		Short: "A live view of a process's goroutines, grouped, with the latency of the functions they are in",
		Long: `top refreshes every second: goroutines grouped by state and function, how
many, how long they have waited, and the latency of those functions from a
trace kept running on them. Keys: c/w/p sort by count, wait, p99; / filter;
j/k or arrows move; Enter expands a group into its goroutines and stacks;
q quits (and detaches). With --why, a MOSTLY column says which part of each
function's calls' time dominates (on CPU, runnable or a wait reason).`,
		Example: `  gi top 4242
  gi top myserver                         # by process name
  gi top --why 4242                       # and where the calls' time goes
  gi top --ns-pid 1 --in 8406             # pid 1 of the container that host pid 8406 is in
  kubectl debug -it mypod --target=app --image=gi --profile=sysadmin -- gi top 1`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			budget, err := parseBudget(maxOverhead)
			if err != nil {
				return err
			}
			return runTop(a, firstArg(args), tf, service.TopRequest{Reattach: topReattach, Why: why, MaxOverhead: budget})
		},
	}
	addTargetFlags(cmd.Flags(), &tf)
	addBudgetFlag(cmd.Flags(), &maxOverhead, " (the functions' CALLS so traced show ~ an estimate)")
	cmd.Flags().BoolVar(&why, "why", false, "split the traced calls' time as gi trace --why does and show the part that dominates each function's calls (MOSTLY; probes on the scheduler: every goroutine switch of the process pays one)")
	return cmd
}

// topGrace is how long gi top may take to detach its probes once the view
// ends (0.1-0.2 s a probe without uprobe_multi links); GI_TEST_TOP_GRACE
// shortens it for tests.
func topGrace() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("GI_TEST_TOP_GRACE")); err == nil && d > 0 {
		return d
	}
	return time.Minute
}

// testCloseDelay sleeps GI_TEST_CLOSE_DELAY, for tests: a detach that
// hangs.
func testCloseDelay() {
	if d, err := time.ParseDuration(os.Getenv("GI_TEST_CLOSE_DELAY")); err == nil && d > 0 {
		time.Sleep(d)
	}
}

func runTop(a *app, target string, tf targetFlags, lo service.TopRequest) error {
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) || !term.IsTerminal(int(os.Stdin.Fd())) {
		return errors.New("gi top needs a terminal: use gi ps (or gi ps --trace D) for output that is not interactive")
	}
	pid, err := tf.resolve(target)
	if err != nil {
		return err
	}
	// The first snapshot before touching the terminal: errors stay plain.
	lo.PID, lo.Decoded = pid, a.decoded
	w, err := service.StartWatch(a.tracer, lo)
	if err != nil {
		return err
	}
	defer w.Close()

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
	// A watchdog: once the view ends, gi exits within topGrace, the
	// terminal restored, whatever detaching the probes takes (the kernel
	// detaches what is left when gi exits).
	quit, quitted := context.WithCancel(context.Background())
	defer a.watchEnd(quit, 0, topGrace(), nil, os.Stderr)()
	a.beforeExit = restore
	defer w.Close() // the probes out while the watchdog runs
	defer testCloseDelay()
	defer quitted() // first on the way out: the watchdog starts

	input := make(chan []byte, 16)
	go func() {
		for {
			buf := make([]byte, 64)
			n, err := os.Stdin.Read(buf)
			if err != nil {
				close(input)
				return
			}
			input <- buf[:n]
		}
	}()

	v := &topView{sortBy: 'c'}
	tick := time.NewTicker(topRefresh)
	defer tick.Stop()
	var groups []*measure.Group
	refresh := func() { groups = w.Groups(v.byObject) }
	refresh()
	draw := func() { drawTop(out, w.Snapshot(), groups, v, w.Latency()) }
	draw()
	var dec keyDecoder
	escTimer := time.NewTimer(time.Hour)
	escTimer.Stop()
	// handle applies keys and redraws; true when a key quits.
	handle := func(keys []topKey) bool {
		if len(keys) == 0 {
			return false
		}
		_, height, err := term.GetSize(int(os.Stdout.Fd()))
		if err != nil || height < 10 {
			height = 40
		}
		for _, k := range keys {
			byObject := v.byObject
			if v.apply(k, height/2) {
				return true
			}
			if v.byObject != byObject {
				refresh()
			}
		}
		draw()
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := w.Refresh(); err != nil {
				if errors.Is(err, proc.ErrNoSuchProcess) {
					restore()
					return fmt.Errorf("process %d exited", pid)
				}
				v.message = err.Error()
			} else {
				refresh()
			}
			draw()
		case chunk, ok := <-input:
			if !ok {
				return nil
			}
			if handle(dec.Feed(chunk)) {
				return nil
			}
			if dec.Pending() {
				// An escape sequence cut between reads, or the Escape key.
				escTimer.Reset(escapeWait)
			}
		case <-escTimer.C:
			if handle(dec.Flush()) {
				return nil
			}
		}
	}
}

// drawTop writes one frame of the view to the terminal.
func drawTop(w io.Writer, snap *inspect.Snapshot, groups []*measure.Group, v *topView, tt *measure.Live) {
	width, height, err := term.GetSize(int(os.Stdout.Fd()))
	if err != nil || width < 40 || height < 10 {
		width, height = 120, 40
	}
	sc := topScreen{snap: snap, groups: groups, hist: tt.Histogram, sampled: tt.Sampled, traceErr: tt.Err(), traceWarnings: tt.Warnings(),
		width: width, height: height - 1, now: time.Now()}
	if tt.Why() {
		sc.mostly = tt.Mostly
	}
	lines := renderTop(sc, v)
	var b strings.Builder
	b.WriteString(clearHome)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	io.WriteString(w, b.String())
}
