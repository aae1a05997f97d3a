package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/gi-debug/gi/trace"
)

// tree builds root → (a → c), b with durations 100 → (60 → 25), 30.
func tree() (*trace.Call, []*trace.Function) {
	root, a, b, c := &trace.Function{Name: "main.root", Entry: 0x1000}, &trace.Function{Name: "main.a", Entry: 0x2000},
		&trace.Function{Name: "main.b", Entry: 0x3000}, &trace.Function{Name: "main.c", Entry: 0x4000}
	cc := &trace.Call{Func: c, Start: 20, End: 45, Depth: 2}
	ca := &trace.Call{Func: a, Start: 10, End: 70, Depth: 1, Children: []*trace.Call{cc}}
	cb := &trace.Call{Func: b, Start: 70, End: 100, Depth: 1, Unwound: true}
	return &trace.Call{Func: root, Start: 0, End: 100, Children: []*trace.Call{ca, cb}}, []*trace.Function{root, a, b, c}
}

func TestProfileSelfTimes(t *testing.T) {
	root, _ := tree()
	pr := NewProfile()
	h := trace.Header{Goid: 7, Labels: map[string]string{"worker": "w1"}}
	pr.Root(h, root)
	pr.Root(h, root)
	p := writeAndParse(t, pr)
	self := map[string]int64{}
	for _, s := range p.Sample {
		var path []string
		for _, l := range s.Location {
			path = append(path, l.Line[0].Function.Name)
		}
		self[joinPath(path)] = s.Value[1]
		if s.Label["worker"][0] != "w1" || s.Label["goroutine"][0] != "7" || s.Value[0] != 2 {
			t.Errorf("sample %v: labels %v, calls %d", path, s.Label, s.Value[0])
		}
	}
	want := map[string]int64{"main.root": 2 * 10, "main.a<main.root": 2 * 35, "main.c<main.a<main.root": 2 * 25, "main.b<main.root": 2 * 30}
	if len(self) != len(want) {
		t.Fatalf("samples %v, want %v", self, want)
	}
	for k, v := range want {
		if self[k] != v {
			t.Errorf("%s: %d ns, want %d", k, self[k], v)
		}
	}
	if pr.Nanos != 200 {
		t.Errorf("total %d, want 200", pr.Nanos)
	}
}

// writeCalls writes the calls of root's tree to pf, innermost first, as
// they complete.
func writeCalls(pf *Perfetto, h trace.Header, root *trace.Call) {
	for _, ch := range root.Children {
		writeCalls(pf, h, ch)
	}
	pf.Call(h, root)
}

func joinPath(p []string) string {
	out := ""
	for i, s := range p {
		if i > 0 {
			out += "<"
		}
		out += s
	}
	return out
}

func TestPerfettoStreams(t *testing.T) {
	var buf bytes.Buffer
	pf := NewPerfetto(&buf, trace.Clock{})
	if err := pf.Close(); err != nil {
		t.Fatal(err)
	}
	var empty []any
	if err := json.Unmarshal(buf.Bytes(), &empty); err != nil || len(empty) != 0 {
		t.Fatalf("an empty trace is not an empty JSON array: %v %q", err, buf.String())
	}

	buf.Reset()
	pf = NewPerfetto(&buf, trace.Clock{})
	root, _ := tree()
	h := trace.Header{Goid: 9, PID: 4}
	writeCalls(pf, h, root)
	if err := pf.Flush(); err != nil {
		t.Fatal(err)
	}
	// Mid-trace the file lacks its closing bracket: still a valid trace.
	if !bytes.HasPrefix(buf.Bytes(), []byte("[\n")) || bytes.HasSuffix(bytes.TrimSpace(buf.Bytes()), []byte("]")) {
		t.Errorf("mid-trace file: %q", buf.String())
	}
	pf.Close()
	var events []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &events); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2+4 || pf.Slices != 4 {
		t.Fatalf("%d events, %d slices: %s", len(events), pf.Slices, buf.String())
	}
	last := events[len(events)-1]
	if last["name"] != "main.root" || last["dur"].(float64) != 0.1 || last["tid"].(float64) != 9 {
		t.Errorf("root slice %v", last)
	}
	for _, e := range events {
		if e["name"] == "main.b" && e["args"].(map[string]any)["unwound"] != true {
			t.Errorf("unwound call not marked: %v", e)
		}
	}
}

// TestPerfettoWaits checks that a call's waits (--why) are drawn as
// slices in its own on the goroutine's track, with an arrow from the
// goroutine that ended one.
func TestPerfettoWaits(t *testing.T) {
	var buf bytes.Buffer
	pf := NewPerfetto(&buf, trace.Clock{})
	c := &trace.Call{Func: &trace.Function{Name: "main.f"}, Start: 0, End: 10_000, Time: &trace.TimeSplit{Intervals: []trace.Interval{
		{Start: 1000, End: 6000, Reason: "chan receive", Object: trace.WaitObject{Kind: "chan", Addr: 0xc000}, WokenBy: 12, WokenByFunction: "main.producer"},
		{Start: 6000, End: 7000},
	}}}
	pf.Call(trace.Header{Goid: 9, PID: 4}, c)
	pf.Close()
	var events []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &events); err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]any{}
	flows := map[string]map[string]any{}
	for _, e := range events {
		if e["cat"] == "wake" && e["ph"] != "X" {
			flows[e["ph"].(string)] = e
			continue
		}
		byName[e["name"].(string)] = e
	}
	base := byName["main.f"]["ts"].(float64)
	at := func(e map[string]any) float64 { return e["ts"].(float64) - base }
	w := byName["chan receive"]
	if w == nil || at(w) != 1 || w["dur"].(float64) != 5 || w["tid"].(float64) != 9 ||
		w["args"].(map[string]any)["object"] != "chan 0xc000" || w["args"].(map[string]any)["woken_by"].(float64) != 12 {
		t.Errorf("wait slice %v", w)
	}
	if r := byName["runnable"]; r == nil || at(r) != 6 || r["dur"].(float64) != 1 {
		t.Errorf("runnable slice %v", r)
	}
	if k := byName["wakes goroutine 9"]; k == nil || k["tid"].(float64) != 12 {
		t.Errorf("waker's slice %v", k)
	}
	s, f := flows["s"], flows["f"]
	if s == nil || f == nil || s["tid"].(float64) != 12 || f["tid"].(float64) != 9 || s["id"] != f["id"] || at(f) != 6 || f["bp"] != "e" {
		t.Errorf("flow %v → %v", s, f)
	}
}

// TestProfileLabelsKeptApart: label sets that would join to the same text
// stay two samples.
func TestProfileLabelsKeptApart(t *testing.T) {
	root, _ := tree()
	pr := NewProfile()
	pr.Root(trace.Header{Goid: 1, Labels: map[string]string{"a": "b,\"c\"=d"}}, root)
	pr.Root(trace.Header{Goid: 1, Labels: map[string]string{"a": "b", "c": "d"}}, root)
	p := writeAndParse(t, pr)
	if len(p.Sample) != 8 {
		t.Errorf("%d samples, want 8 (4 paths x 2 label sets)", len(p.Sample))
	}
}

// writeAndParse writes pr and parses it back with pprof's own parser.
func writeAndParse(t *testing.T, pr *Profile) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := pr.Write(&buf); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExportsMarkSampled checks that the calls of a function traced in
// sampling windows are marked in every export: a "sampled" arg on its
// Perfetto slices and a global "gi: sampled" event naming it, the
// gi_sampled label on its pprof samples and a comment, and gi.sampled on
// its OTLP spans (TestOTLPSpans' span builder).
func TestExportsMarkSampled(t *testing.T) {
	root, fns := tree()
	hot := fns[3] // main.c
	hot.Sampled = true
	sm := &trace.Sampling{Budget: 0.05, Windows: 4, Traced: 1, Elapsed: 10, Functions: []trace.SampledFunction{{Func: hot, Calls: 1}}}
	h := trace.Header{Goid: 9, PID: 4}

	var buf bytes.Buffer
	pf := NewPerfetto(&buf, trace.Clock{})
	writeCalls(pf, h, root)
	pf.Sampling(sm, 200)
	if err := pf.Close(); err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &events); err != nil {
		t.Fatal(err)
	}
	marked, global := 0, false
	for _, e := range events {
		args, _ := e["args"].(map[string]any)
		switch {
		case e["name"] == "gi: sampled":
			fs, _ := args["functions"].([]any)
			global = e["s"] == "g" && len(fs) == 1 && fs[0] == "main.c" && args["windows"].(float64) == 4 && args["traced_share"].(float64) == 0.1
		case args["sampled"] == true:
			if e["name"] != "main.c" {
				t.Errorf("%v marked sampled", e["name"])
			}
			marked++
		}
	}
	if marked != 1 || !global {
		t.Errorf("perfetto: %d slices marked sampled, global event %v:\n%s", marked, global, buf.String())
	}

	pr := NewProfile()
	pr.Root(h, root)
	pr.Sampling(sm)
	p := writeAndParse(t, pr)
	labelled := 0
	for _, s := range p.Sample {
		inner := s.Location[0].Line[0].Function.Name
		if got := s.Label["gi_sampled"]; (inner == "main.c") != (len(got) == 1 && got[0] == "true") {
			t.Errorf("sample of %s: gi_sampled %v", inner, got)
		} else if inner == "main.c" {
			labelled++
		}
	}
	if labelled != 1 || len(p.Comments) != 1 || !strings.Contains(p.Comments[0], "main.c traced in 4 sampling windows covering 10.0% of the trace") {
		t.Errorf("pprof: %d samples labelled, comments %q", labelled, p.Comments)
	}
}
