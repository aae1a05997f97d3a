package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/report"
)

func parseTraceJSON(t *testing.T, out string) []report.TraceCall {
	t.Helper()
	var lines []report.TraceCall
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return lines
		} else if err != nil {
			t.Fatal(err)
		}
		if _, ok := raw["summary"]; ok {
			continue
		}
		b, _ := json.Marshal(raw)
		var l report.TraceCall
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
}

var otlpSummary = regexp.MustCompile(`gi: OTLP: sent (\d+) spans to \S+, dropped (\d+)`)

// otlpCounts reads the sent and dropped counts of gi's OTLP summary line.
func otlpCounts(t *testing.T, stderr string) (sent, dropped int) {
	t.Helper()
	m := otlpSummary.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no OTLP summary line in gi's output:\n%s", stderr)
	}
	sent, _ = strconv.Atoi(m[1])
	dropped, _ = strconv.Atoi(m[2])
	return sent, dropped
}

// TestOTLPCollector sends a trace to a real OpenTelemetry Collector (OTLP
// receiver, file exporter) and checks what the collector received against
// the JSON lines of the same run and the target's own measurements: one
// span per call with the same goroutine, start and duration; nested calls
// are children of their caller's span in the root call's trace; unwound
// calls carry an error status; attributes and resource as documented.
func TestOTLPCollector(t *testing.T) {
	requirePrivilege(t)
	col := targets.StartCollector(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{PIE: true}))
	g := startGiTrace(t, "--json", "--otlp", col.URL, "--service", "tracee-svc", strconv.Itoa(p.Pid),
		"main.chain*", "main.multiRet", "main.recoverer", "main.panicky", "main.thrower")
	chain, err := p.Do("chain 3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"multi 20", "panic 4"} {
		if _, err := p.Do(cmd, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if code := g.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("gi exited %d: %s", code, g.stderr)
	}
	lines := parseTraceJSON(t, g.stdout.String())
	const calls = 3*3 + 20 + 4*3
	if len(lines) != calls {
		t.Fatalf("%d JSON call lines, want %d", len(lines), calls)
	}
	if sent, dropped := otlpCounts(t, g.stderr.String()); sent != calls || dropped != 0 {
		t.Errorf("gi says it sent %d spans and dropped %d, want %d and 0", sent, dropped, calls)
	}
	spans, err := col.WaitSpans(calls, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != calls {
		t.Fatalf("the collector wrote %d spans, want %d\n%s", len(spans), calls, col.Log())
	}

	host, _ := os.Hostname()
	byID := map[string]*targets.OTLPSpan{}
	for i := range spans {
		s := &spans[i]
		byID[s.TraceID+"/"+s.SpanID] = s
		if s.Resource["service.name"] != "tracee-svc" || s.Resource["process.pid"] != strconv.Itoa(p.Pid) || s.Resource["host.name"] != host {
			t.Fatalf("resource %v, want service.name tracee-svc, process.pid %d, host.name %s", s.Resource, p.Pid, host)
		}
	}
	// Every JSON line has its span: same function, goroutine, call site,
	// start and duration, error status exactly when unwound.
	used := map[*targets.OTLPSpan]bool{}
	for _, l := range lines {
		var match *targets.OTLPSpan
		for i := range spans {
			s := &spans[i]
			if !used[s] && s.Name == l.Function && s.Attributes["go.goroutine.id"] == strconv.FormatUint(l.Goid, 10) &&
				math.Abs(float64(s.StartNS()-l.StartNS)) < 2e3 && math.Abs(float64(s.EndNS()-s.StartNS()-l.DurationNS)) < 2e3 {
				match = s
				break
			}
		}
		if match == nil {
			t.Errorf("no span for call %+v", l)
			continue
		}
		used[match] = true
		a := match.Attributes
		if a["code.function.name"] != l.Function || a["code.file.path"] != l.CallerFile || a["code.line.number"] != strconv.Itoa(l.CallerLine) {
			t.Errorf("%s: attributes %v, want the call site %s:%d", l.Function, a, l.CallerFile, l.CallerLine)
		}
		if (match.Status.Code == 2) != l.Unwound {
			t.Errorf("%s: status %+v, unwound %v", l.Function, match.Status, l.Unwound)
		}
		// Parent links: a nested call's parent is its caller's span, in
		// the same trace, around it; a root call starts a trace of its own.
		if l.Depth == 0 {
			if match.ParentSpanID != "" {
				t.Errorf("root call %s has parent span %s", l.Function, match.ParentSpanID)
			}
			continue
		}
		parent := byID[match.TraceID+"/"+match.ParentSpanID]
		if parent == nil {
			t.Errorf("%s: parent span %s not in trace %s", l.Function, match.ParentSpanID, match.TraceID)
			continue
		}
		if parent.StartNS() > match.StartNS() || parent.EndNS() < match.EndNS() {
			t.Errorf("%s [%d, %d] is not inside its parent %s [%d, %d]", l.Function, match.StartNS(), match.EndNS(), parent.Name, parent.StartNS(), parent.EndNS())
		}
		wantParent := map[string]string{"main.chainB": "main.chainA", "main.chainC": "main.chainB", "main.panicky": "main.recoverer", "main.thrower": "main.panicky"}[l.Function]
		if parent.Name != wantParent {
			t.Errorf("%s: parent span is %s, want %s", l.Function, parent.Name, wantParent)
		}
	}
	roots := map[string]int{}
	for _, s := range spans {
		if s.ParentSpanID == "" {
			roots[s.TraceID]++
		}
	}
	if len(roots) != 3+20+4 {
		t.Errorf("%d traces with a root span, want %d (one per root call)", len(roots), 3+20+4)
	}

	// Against the target's own: chainA's spans average what the target
	// measured around its calls, on the goroutine it names.
	var sum int64
	n := 0
	for _, s := range spans {
		if s.Name == "main.chainA" {
			sum += s.EndNS() - s.StartNS()
			n++
			if s.Attributes["go.goroutine.id"] != chain["goid"] {
				t.Errorf("chainA span on goroutine %s, the target says %s", s.Attributes["go.goroutine.id"], chain["goid"])
			}
		}
	}
	avg, _ := strconv.ParseInt(chain["avg_ns"], 10, 64)
	if n != 3 || math.Abs(float64(sum/int64(n)-avg)) > 0.05*float64(avg) {
		t.Errorf("%d chainA spans averaging %d ns; the target measured %d ns", n, sum/int64(max(n, 1)), avg)
	}
}

// TestOTLPCollectorKilled kills the collector in the middle of a trace of a
// busy service: gi keeps tracing, finishes in bounded time, says how many
// spans it sent and dropped, and the target runs on untouched. The spans
// received before carry the goroutines' labels and creators.
func TestOTLPCollectorKilled(t *testing.T) {
	requirePrivilege(t)
	col := targets.StartCollector(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	g := startGiTrace(t, "--max-overhead", "none", "--otlp", col.URL, strconv.Itoa(p.Pid), "main.handle")
	spans, err := col.WaitSpans(100, time.Minute)
	if err != nil || len(spans) < 100 {
		t.Fatalf("the collector received %d spans (%v)\n%s", len(spans), err, g.stderr)
	}
	for _, s := range spans[:100] {
		a := s.Attributes
		if s.Name != "main.handle" || !strings.HasPrefix(a["go.goroutine.label.worker"], "w") ||
			!strings.HasPrefix(a["go.goroutine.created_by"], "main.main") || s.Resource["service.name"] == "" {
			t.Fatalf("span %s: attributes %v, resource %v: want main.handle with the worker label, created by main.main", s.Name, a, s.Resource)
		}
	}
	col.Kill()
	before, err := p.Do("calls", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Keep tracing while the collector is gone: at ~1000 calls/s, until a
	// few hundred more calls went by.
	for {
		now, err := p.Do("calls", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := strconv.Atoi(before["calls"])
		b, _ := strconv.Atoi(now["calls"])
		if b-a >= 500 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := time.Now()
	if code := g.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("gi exited %d: %s", code, g.stderr)
	}
	if d := time.Since(stopped); d > otlpCloseTimeout+10*time.Second {
		t.Errorf("gi took %v to finish with the collector gone", d)
	}
	sent, dropped := otlpCounts(t, g.stderr.String())
	if sent < 100 || dropped < 500 {
		t.Errorf("gi sent %d and dropped %d spans; want at least the 100 received and the 500 made after the kill dropped\n%s", sent, dropped, g.stderr)
	}
	targets.CheckNotStopped(t, p.Pid)
	if _, tracer, err := targets.ProcState(p.Pid); err != nil || tracer != 0 {
		t.Errorf("target: tracer %d, %v", tracer, err)
	}
	if _, err := p.Do("calls", 10*time.Second); err != nil {
		t.Errorf("the target does not answer after the trace: %v", err)
	}
}

// TestOTLPBadInput: bad --otlp options end in one line and a non-zero
// exit, before anything is attached.
func TestOTLPBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp", "ftp://x"}, `--otlp "ftp://x": want the collector's http:// or https:// URL`},
		{[]string{"--otlp", "::"}, `--otlp "::": want the collector's http:// or https:// URL`},
		{[]string{"--otlp", "http://127.0.0.1:1", "--otlp-header", "novalue"}, `--otlp-header "novalue": want NAME=VALUE`},
		{[]string{"--service", "s"}, "--otlp-header and --service need --otlp URL"},
	} {
		_, stderr, code := runGi(t, append(append([]string{"trace"}, c.args...), "1", "main.*")...)
		checkOneLineError(t, stderr, code, c.want)
	}
}
