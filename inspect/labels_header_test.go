package inspect

import (
	"maps"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestHeaderLabels checks the goroutine header's labels against the formats
// of the runtime (Go 1.26: inside the brackets, always quoted; Go 1.27:
// after them, quoted where needed) and that the dump parser reads back
// every label, awkward strings included.
func TestHeaderLabels(t *testing.T) {
	g := &Goroutine{ID: 7, State: "chan receive", LockedToThread: true, Labels: map[string]string{"worker": "w1", "shard": "3"}}
	for _, c := range []struct {
		minor  int
		labels bool
		want   string
	}{
		{27, true, `goroutine 7 [chan receive, locked to thread] {shard: 3, worker: w1}:`},
		{26, true, `goroutine 7 [chan receive, locked to thread labels:{"shard": "3", "worker": "w1"}]:`},
		{27, false, `goroutine 7 [chan receive, locked to thread]:`},
		{25, true, `goroutine 7 [chan receive, locked to thread]:`},
	} {
		if got := header(g, c.labels, c.minor); got != c.want {
			t.Errorf("go1.%d labels %v:\n got %s\nwant %s", c.minor, c.labels, got, c.want)
		}
	}

	odd := map[string]string{"a b": "x,y", "quote\"": "new\nline", "ünï": "tab\there", "bad": "\xff", "emoji": "😀", "k:": "v: w", "ok/path_1.2": "}"}
	for _, minor := range []int{26, 27} {
		g := &Goroutine{ID: 9, State: "select", Labels: odd}
		h := header(g, true, minor)
		dump := h + "\nmain.f(...)\n\t/src/main.go:1 +0x1\n"
		gs, err := targets.ParseDump(strings.NewReader(dump))
		if err != nil || len(gs) != 1 {
			t.Fatalf("go1.%d: %v: cannot parse %q", minor, err, h)
		}
		want := maps.Clone(odd)
		want["bad"] = "\xff"
		if !maps.Equal(gs[0].Labels, want) {
			t.Errorf("go1.%d: header %q parsed back as %q", minor, h, gs[0].Labels)
		}
	}
	if q := runtimeQuote("a\x07\xffé😀\\\""); q != `"a\x07\xff\u00e9\U0001f600\\\""` {
		t.Errorf("runtimeQuote = %s", q)
	}
}

func TestTracebackLabelsAtStart(t *testing.T) {
	for _, c := range []struct {
		minor        int
		def, environ string
		want         bool
	}{
		{25, "", "GODEBUG=tracebacklabels=1", false},
		{26, "", "", false},
		{26, "", "PATH=/bin\x00GODEBUG=tracebacklabels=1", true},
		{27, "", "", true},
		{27, "panicnil=1,tracebacklabels=0,x=1", "", false},
		{27, "tracebacklabels=0", "GODEBUG=tracebacklabels=1", true},
		{27, "", "GODEBUG=tracebacklabels=1,tracebacklabels=0", false},
		{27, "", "GODEBUG=tracebacklabels=0\x00GODEBUG=tracebacklabels=1", false},
	} {
		if got := tracebackLabelsAtStart(c.minor, c.def, []byte(c.environ)); got != c.want {
			t.Errorf("go1.%d DefaultGODEBUG %q environ %q: %v, want %v", c.minor, c.def, c.environ, got, c.want)
		}
	}
}
