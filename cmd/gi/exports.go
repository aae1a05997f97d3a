package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/export"
	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/trace"
)

// traceExports are what gi trace writes besides its normal output
// (--perfetto, --pprof, --otlp); any combination works in one run.
type traceExports struct {
	perfetto     *export.Perfetto
	perfettoFile *os.File
	// perfettoOut queues what perfetto writes to perfettoFile: a file
	// that cannot take it (a pipe, a slow disk) costs calls, dropped and
	// counted, never the trace's pace (trace.OutputQueue).
	perfettoOut *trace.OutputQueue
	profile     *export.Profile
	pprofPath   string
	otlp        *export.OTLP
	otlpURL     string
}

// otlpCloseTimeout bounds how long gi waits at exit for the collector to
// take the last spans.
const otlpCloseTimeout = 5 * time.Second

// checkExports validates the export options before anything is attached.
func (o traceOptions) checkExports() error {
	if o.otlp == "" {
		if len(o.otlpHeaders) > 0 || o.service != "" {
			return errors.New("--otlp-header and --service need --otlp URL")
		}
		return nil
	}
	u, err := url.Parse(o.otlp)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--otlp %q: want the collector's http:// or https:// URL, e.g. http://localhost:4318", o.otlp)
	}
	_, err = parseHeaders(o.otlpHeaders)
	return err
}

// parseHeaders reads --otlp-header K=V flags.
func parseHeaders(kvs []string) (map[string]string, error) {
	h := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" || strings.ContainsAny(k, " :\r\n") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("--otlp-header %q: want NAME=VALUE", kv)
		}
		h[k] = v
	}
	return h, nil
}

// serviceName is the OTLP service.name: --service, else the name of the
// traced binary.
func serviceName(pid int, binPath, flag string) string {
	if flag != "" {
		return flag
	}
	if pid != 0 {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
			binPath = strings.TrimSuffix(exe, " (deleted)")
		}
	}
	return filepath.Base(binPath)
}

// exportFiles are the files gi trace writes its exports to, created before
// anything is attached: a path that cannot be written fails with the
// target untouched.
type exportFiles struct {
	perfetto *os.File
}

// createExportFiles creates the file of --perfetto, refusing a symbolic
// link at its name, and tries the directory of --pprof's (the profile
// is written whole at the end, under a temporary name renamed over the
// name: outfile), to fail now.
func (o traceOptions) createExportFiles() (*exportFiles, error) {
	files := &exportFiles{}
	if o.perfetto != "" {
		f, err := outfile.OpenStream(o.perfetto, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--perfetto: %w", err)
		}
		files.perfetto = f
	}
	if o.pprofFile != "" {
		if err := outfile.Probe(o.pprofFile); err != nil {
			files.close()
			return nil, fmt.Errorf("--pprof: %w", err)
		}
	}
	return files, nil
}

// close closes the files no exporter took over.
func (f *exportFiles) close() {
	if f.perfetto != nil {
		f.perfetto.Close()
		f.perfetto = nil
	}
}

// openExports makes the exporters the options ask for, writing to files
// (which they take over) and to the OTLP collector.
func openExports(o traceOptions, files *exportFiles, clock trace.Clock, sym *trace.Symbols, service string) (*traceExports, error) {
	e := &traceExports{pprofPath: o.pprofFile}
	if files.perfetto != nil {
		e.perfettoFile, e.perfettoOut = files.perfetto, trace.NewOutputQueue(files.perfetto, outputBacklog())
		e.perfetto = export.NewPerfetto(e.perfettoOut, clock)
		files.perfetto = nil
	}
	if o.pprofFile != "" {
		e.profile = export.NewProfile()
	}
	if o.otlp != "" {
		headers, err := parseHeaders(o.otlpHeaders)
		if err == nil {
			host, _ := os.Hostname()
			e.otlp, err = export.NewOTLP(export.OTLPOptions{Endpoint: o.otlp, Headers: headers, Service: service,
				Host: host, Symbols: sym, Clock: clock})
		}
		if err != nil {
			e.close(io.Discard, nil)
			return nil, fmt.Errorf("--otlp: %w", err)
		}
		e.otlpURL = o.otlp
	}
	return e, nil
}

// wrap adds the exports to the handlers of the normal output.
func (e *traceExports) wrap(hs trace.Handlers) trace.Handlers {
	if e.perfetto == nil && e.profile == nil && e.otlp == nil {
		return hs
	}
	call, root, running, tick := hs.Call, hs.Root, hs.Running, hs.Tick
	hs.Call = func(h trace.Header, c *trace.Call) {
		if call != nil {
			call(h, c)
		}
		if e.perfetto != nil {
			e.perfettoOut.Print(func() { e.perfetto.Call(h, c) })
		}
		if e.otlp != nil {
			e.otlp.Call(h, c)
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
		if e.otlp != nil {
			e.otlp.Running(h, open)
		}
	}
	hs.Tick = func() {
		if tick != nil {
			tick()
		}
		if e.perfetto != nil {
			e.perfetto.Flush() // the file is readable while the trace runs
			e.perfettoOut.Flush()
		}
	}
	return hs
}

// close finishes the files and says what was written; sampling (nil
// when nothing was) marks them as sampled where they are.
func (e *traceExports) close(stderr io.Writer, sampling *trace.Sampling) error {
	var first error
	if e.perfetto != nil {
		e.perfetto.Sampling(sampling, uint64(trace.MonotonicNow()))
		err := e.perfetto.Close()
		// As long as the file's reader takes: the caller detached first.
		if qerr := e.perfettoOut.Close(); err == nil {
			err = qerr
		}
		if cerr := e.perfettoFile.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			first = fmt.Errorf("--perfetto: %w", err)
		} else {
			fmt.Fprintf(stderr, "gi: wrote %d call slices to %s\n", e.perfetto.Slices, e.perfettoFile.Name())
		}
		if n := e.perfettoOut.Dropped(); n > 0 {
			fmt.Fprintf(stderr, "gi: warning: --perfetto %s was not read fast enough: %d calls dropped (past a backlog of %s, rather than slow the trace and the overhead budget)\n",
				e.perfettoFile.Name(), n, kib(outputBacklog()))
		}
		e.perfetto = nil
	}
	if e.profile != nil {
		e.profile.Sampling(sampling)
		f, err := outfile.Create(e.pprofPath, 0o644)
		if err == nil {
			if err = e.profile.Write(f); err == nil {
				err = f.Commit()
			}
			f.Abort()
		}
		if err != nil && first == nil {
			first = fmt.Errorf("--pprof: %w", err)
		} else if err == nil {
			fmt.Fprintf(stderr, "gi: wrote a profile of %v in traced functions to %s\n", time.Duration(e.profile.Nanos).Round(time.Microsecond), e.pprofPath)
		}
		e.profile = nil
	}
	if e.otlp != nil {
		st := e.otlp.Close(otlpCloseTimeout)
		fmt.Fprintf(stderr, "gi: OTLP: sent %d spans to %s, dropped %d", st.Sent, e.otlpURL, st.Dropped)
		if st.Dropped > 0 && st.LastError != "" {
			fmt.Fprintf(stderr, " (%s)", st.LastError)
		}
		fmt.Fprintln(stderr)
		e.otlp = nil
	}
	return first
}
