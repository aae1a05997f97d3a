package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gi-debug/gi/export"
	"github.com/gi-debug/gi/trace"
)

// traceExports are the files gi trace writes besides its normal output
// (--perfetto, --pprof); any combination works in one run.
type traceExports struct {
	perfetto     *export.Perfetto
	perfettoFile *os.File
	profile      *export.Profile
	pprofPath    string
}

// openExports creates the export files the options ask for.
func openExports(o traceOptions, clock trace.Clock) (*traceExports, error) {
	e := &traceExports{pprofPath: o.pprofFile}
	if o.perfetto != "" {
		f, err := os.Create(o.perfetto)
		if err != nil {
			return nil, fmt.Errorf("--perfetto: %w", err)
		}
		e.perfettoFile, e.perfetto = f, export.NewPerfetto(f, clock)
	}
	if o.pprofFile != "" {
		// Fail now, not after the trace, if the file cannot be written.
		f, err := os.Create(o.pprofFile)
		if err != nil {
			e.close(io.Discard)
			return nil, fmt.Errorf("--pprof: %w", err)
		}
		f.Close()
		e.profile = export.NewProfile()
	}
	return e, nil
}

// wrap adds the exports to the handlers of the normal output.
func (e *traceExports) wrap(hs trace.Handlers) trace.Handlers {
	if e.perfetto == nil && e.profile == nil {
		return hs
	}
	call, root, running, tick := hs.Call, hs.Root, hs.Running, hs.Tick
	hs.Call = func(h trace.Header, c *trace.Call) {
		if call != nil {
			call(h, c)
		}
		if e.perfetto != nil {
			e.perfetto.Call(h, c)
		}
	}
	hs.Root = func(h trace.Header, c *trace.Call) {
		if root != nil {
			root(h, c)
		}
		if e.profile != nil {
			e.profile.Root(h, c)
		}
	}
	hs.Running = func(h trace.Header, open []*trace.Call) {
		if running != nil {
			running(h, open)
		}
		if e.perfetto != nil {
			e.perfetto.Running(h, open)
		}
		if e.profile != nil {
			e.profile.Root(h, open[0])
		}
	}
	hs.Tick = func() {
		if tick != nil {
			tick()
		}
		if e.perfetto != nil {
			e.perfetto.Flush() // the file is readable while the trace runs
		}
	}
	return hs
}

// close finishes the files and says what was written.
func (e *traceExports) close(stderr io.Writer) error {
	var first error
	if e.perfetto != nil {
		err := e.perfetto.Close()
		if cerr := e.perfettoFile.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			first = fmt.Errorf("--perfetto: %w", err)
		} else {
			fmt.Fprintf(stderr, "gi: wrote %d call slices to %s\n", e.perfetto.Slices, e.perfettoFile.Name())
		}
		e.perfetto = nil
	}
	if e.profile != nil {
		f, err := os.Create(e.pprofPath)
		if err == nil {
			err = e.profile.Write(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil && first == nil {
			first = fmt.Errorf("--pprof: %w", err)
		} else if err == nil {
			fmt.Fprintf(stderr, "gi: wrote a profile of %v in traced functions to %s\n", time.Duration(e.profile.Nanos).Round(time.Microsecond), e.pprofPath)
		}
		e.profile = nil
	}
	return first
}
