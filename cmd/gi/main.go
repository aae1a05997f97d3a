// Command gi inspects and traces live Go processes: `gi ps` lists every
// goroutine of a process, `gi trace` prints call trees and latencies of its
// functions through eBPF uprobes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gi-debug/gi/bincache"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// exitError carries a process exit status through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// memoryLimit is gi's soft memory limit (unless GOMEMLIMIT says otherwise):
// a snapshot of 100k goroutines decodes into a few hundred MB of short-lived
// objects, and a collector paced only by GOGC lets the heap double first.
const memoryLimit = 192 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	// GI_CPUPROFILE=file profiles gi itself (for working on its speed).
	if path := os.Getenv("GI_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args[1:])
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	code := run(os.Args[1:])
	// GI_PEAK_RSS=1 reports gi's own peak memory (for make bench: the
	// rusage of a child counts its parent's memory at fork time).
	if os.Getenv("GI_PEAK_RSS") == "1" {
		if v, err := proc.StatusField(0, 0, "VmHWM"); err == nil && v != "" {
			fmt.Fprintf(os.Stderr, "gi: peak RSS %s\n", v)
		}
	}
	os.Exit(code)
}

// run executes the command line and returns the exit status. Every failure
// ends as one line on stderr: never a Go panic trace.
func run(args []string) (code int) {
	tracer := ptrace.NewTracer()
	// No garbage collection while a target waits: a cycle started by the
	// copy's allocations would compete with it for the CPUs.
	tracer.WhileStopped = func() func() {
		old := debug.SetGCPercent(-1)
		return func() { debug.SetGCPercent(old) }
	}
	defer tracer.Close()
	defer func() {
		if r := recover(); r != nil {
			tracer.ResumeAll()
			fmt.Fprintf(os.Stderr, "gi: internal error: %v\n", r)
			if os.Getenv("GI_DEBUG") != "" {
				os.Stderr.Write(debug.Stack())
			}
			code = 2
		}
	}()

	// SIGINT/SIGTERM while a target is stopped: resume it before exiting.
	// (If gi is killed outright, the kernel detaches: PTRACE_SEIZE never
	// leaves a group stop behind.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	a := &app{tracer: tracer}
	// GI_PHASES=1 prints each snapshot's steps, measured, as one line
	// of JSON on stderr (for make bench: where a stop's time goes).
	if os.Getenv("GI_PHASES") == "1" {
		a.decoded = func(s *inspect.Snapshot) {
			fmt.Fprintf(os.Stderr, "gi: phases %s\n", s.Phases.JSON(s.Pause))
		}
	}
	go func() {
		for s := range sigs {
			// A running trace ends cleanly: statistics printed, probes
			// detached. A second signal, or one outside a trace, exits at
			// once (the kernel drops probes with gi's file descriptors).
			if a.cancelTrace() {
				continue
			}
			tracer.ResumeAll()
			if s == syscall.SIGTERM {
				os.Exit(143)
			}
			os.Exit(130)
		}
	}()

	root := newRootCommand(a)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(os.Stderr, "gi: %s\n", oneLine(err.Error()))
	return 1
}

// oneLine folds a message onto a single line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// app holds what every subcommand shares.
type app struct {
	tracer *ptrace.Tracer
	// beforeExit, if set, runs before a watchdog (watchEnd) ends gi:
	// gi top's restores the terminal.
	beforeExit func()
	// decoded, set by GI_PHASES=1, is called with every snapshot gi ps
	// and gi top take, once decoded: it prints its phases.
	decoded func(*inspect.Snapshot)

	mu          sync.Mutex
	traceCancel context.CancelFunc
}

func (a *app) setTraceCancel(c context.CancelFunc) {
	a.mu.Lock()
	a.traceCancel = c
	a.mu.Unlock()
}

// cancelTrace ends a running trace; it reports false if none runs (or it was
// already asked to end).
func (a *app) cancelTrace() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.traceCancel == nil {
		return false
	}
	a.traceCancel()
	a.traceCancel = nil
	return true
}

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "gi",
		Short:         "Inspect and trace live Go processes",
		Long:          "gi lists the goroutines of a live Go process (gi ps) and traces its functions with eBPF uprobes (gi trace).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&wideOutput, "wide", false, "print every cell whole: a listing on a terminal is otherwise shortened with … to its width (never when piped)")
	noCache := root.PersistentFlags().Bool("no-cache", false,
		"do not read or write the cache of what gi derives from binaries ($XDG_CACHE_HOME/gi, by build ID)")
	root.PersistentPreRun = func(*cobra.Command, []string) {
		if *noCache {
			bincache.SetDefault(nil)
		}
	}
	root.AddCommand(newPsCommand(a), newTraceCommand(a), newFuncsCommand(), newTopCommand(a), newRecordCommand(a))
	return root
}
