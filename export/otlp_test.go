package export

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/trace"
)

// testSymbols resolves addresses in the test binary itself.
func testSymbols(t *testing.T) *trace.Symbols {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := elfbin.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bin.Close() })
	return trace.NewSymbols(bin)
}

// collectorStub is an OTLP/HTTP endpoint that decodes requests with the
// collector's own request type, and answers what reply says.
type collectorStub struct {
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	headers  []http.Header
	reply    func(n int) (status int, body []byte)
	calls    atomic.Int32
}

func (c *collectorStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(c.calls.Add(1))
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad path or content type", http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	status, body := http.StatusOK, []byte(nil)
	if c.reply != nil {
		status, body = c.reply(n)
	}
	if status == http.StatusOK {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.requests = append(c.requests, &req)
		c.headers = append(c.headers, r.Header.Clone())
		c.mu.Unlock()
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
	w.Write(body)
}

func (c *collectorStub) spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, r := range c.requests {
		for _, rs := range r.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

// numberTree sets Parent and Seq on the calls of a tree as trace.Builder
// does, and lists the calls, parents first.
func numberTree(root *trace.Call) []*trace.Call {
	var all []*trace.Call
	var walk func(c, parent *trace.Call)
	walk = func(c, parent *trace.Call) {
		c.Parent = parent
		c.Seq = uint64(len(all) + 1)
		all = append(all, c)
		for _, ch := range c.Children {
			walk(ch, c)
		}
	}
	walk(root, nil)
	return all
}

// TestOTLPSpans checks the spans of a tree: one trace, parents by caller,
// error status for the unwound call, goroutine attributes, resource, and
// the request decoded by the collector's own message type.
func TestOTLPSpans(t *testing.T) {
	stub := &collectorStub{}
	srv := httptest.NewTLSServer(stub)
	defer srv.Close()
	root, _ := tree()
	all := numberTree(root)
	o, err := NewOTLP(OTLPOptions{Endpoint: srv.URL, Client: srv.Client(), Service: "svc", Host: "h1",
		Headers: map[string]string{"Authorization": "Bearer s3cret"}, Symbols: testSymbols(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := trace.Header{Goid: 7, PID: 42, Labels: map[string]string{"worker": "w1"}, Known: true, ParentID: 3,
		CreatedBy: trace.Site{Function: "main.serve", File: "/src/main.go", Line: 12}}
	// main.c (20 to 45) waited 15 ns on a mutex goroutine 8 released.
	for _, c := range all {
		if c.Func.Name == "main.c" {
			c.Func.Sampled = true // traced in sampling windows: gi.sampled
			c.Time = &trace.TimeSplit{OnCPU: 10, Blocked: []trace.BlockedTime{{Reason: "sync.Mutex.Lock", NS: 15, Count: 1, WokenBy: 8}},
				Intervals: []trace.Interval{{Start: 25, End: 40, Reason: "sync.Mutex.Lock", Object: trace.WaitObject{Kind: "mutex", Name: "main.mu"}, WokenBy: 8, WokenByFunction: "main.refresh"}}}
		}
	}
	for i := len(all) - 1; i >= 0; i-- { // innermost first, as calls complete
		o.Call(h, all[i])
	}
	st := o.Close(5 * time.Second)
	if st.Sent != 4 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 4 sent", st)
	}
	if got := stub.headers[0].Get("Authorization"); got != "Bearer s3cret" {
		t.Errorf("Authorization header %q", got)
	}
	res := stub.requests[0].ResourceSpans[0].Resource.Attributes
	if len(res) != 3 || res[0].Value.GetStringValue() != "svc" || res[1].Value.GetIntValue() != 42 || res[2].Value.GetStringValue() != "h1" {
		t.Errorf("resource %v", res)
	}
	spans := stub.spans()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if string(s.TraceId) != string(spans[0].TraceId) {
			t.Errorf("%s in another trace", s.Name)
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = kv.Value.String()
		}
		for _, k := range []string{"code.function.name", "go.goroutine.id", "go.goroutine.created_by", "go.goroutine.parent.id", "go.goroutine.label.worker"} {
			if attrs[k] == "" {
				t.Errorf("%s: no attribute %s in %v", s.Name, k, attrs)
			}
		}
	}
	parents := map[string]string{"main.a": "main.root", "main.b": "main.root", "main.c": "main.a"}
	for child, parent := range parents {
		if string(byName[child].ParentSpanId) != string(byName[parent].SpanId) {
			t.Errorf("%s: parent span %x, want %s's %x", child, byName[child].ParentSpanId, parent, byName[parent].SpanId)
		}
	}
	if len(byName["main.root"].ParentSpanId) != 0 {
		t.Error("the root span has a parent")
	}
	if byName["main.b"].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || byName["main.a"].Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("status: unwound b %v, returned a %v", byName["main.b"].Status, byName["main.a"].Status)
	}
	if d := byName["main.a"].EndTimeUnixNano - byName["main.a"].StartTimeUnixNano; d != 60 {
		t.Errorf("main.a lasted %d ns, want 60", d)
	}
	// --why: the parts as attributes, the wait as an event.
	c := byName["main.c"]
	attrs := map[string]int64{}
	for _, kv := range c.Attributes {
		attrs[kv.Key] = kv.Value.GetIntValue()
	}
	if attrs["gi.time.on_cpu_ns"] != 10 || attrs["gi.time.blocked_ns"] != 15 || attrs["gi.time.blocked.sync.Mutex.Lock_ns"] != 15 {
		t.Errorf("main.c's time attributes %v", attrs)
	}
	if len(c.Events) != 1 || c.Events[0].Name != "sync.Mutex.Lock" || c.Events[0].TimeUnixNano != c.StartTimeUnixNano+5 {
		t.Fatalf("main.c's events %v", c.Events)
	}
	ev := map[string]string{}
	for _, kv := range c.Events[0].Attributes {
		ev[kv.Key] = kv.Value.String()
	}
	if !strings.Contains(ev["gi.wait.object"], "mutex main.mu") || !strings.Contains(ev["gi.wait.woken_by"], "8") ||
		!strings.Contains(ev["gi.wait.woken_by_function"], "main.refresh") || !strings.Contains(ev["gi.wait.duration_ns"], "15") {
		t.Errorf("wait event attributes %v", ev)
	}
	if len(byName["main.a"].Events) != 0 {
		t.Errorf("main.a has events: %v", byName["main.a"].Events)
	}
	for name, span := range byName {
		sampled := false
		for _, kv := range span.Attributes {
			sampled = sampled || (kv.Key == "gi.sampled" && kv.Value.GetBoolValue())
		}
		if sampled != (name == "main.c") {
			t.Errorf("%s: gi.sampled %v", name, sampled)
		}
	}
}

// TestOTLPRetries checks that temporary refusals are retried until the
// collector takes the batch, that a partial success counts the rejected
// spans as dropped, and that a permanent refusal drops the batch.
func TestOTLPRetries(t *testing.T) {
	root, _ := tree()
	all := numberTree(root)
	partial, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1, ErrorMessage: "too old"}})
	for _, tc := range []struct {
		name          string
		reply         func(n int) (int, []byte)
		sent, dropped uint64
	}{
		{"retried", func(n int) (int, []byte) {
			if n <= 2 {
				return http.StatusServiceUnavailable, nil
			}
			return http.StatusOK, nil
		}, 4, 0},
		{"partial", func(int) (int, []byte) { return http.StatusOK, partial }, 3, 1},
		{"refused", func(int) (int, []byte) { return http.StatusBadRequest, nil }, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &collectorStub{reply: tc.reply}
			srv := httptest.NewServer(stub)
			defer srv.Close()
			o, err := NewOTLP(OTLPOptions{Endpoint: srv.URL + "/", Symbols: testSymbols(t)})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range all {
				o.Call(trace.Header{Goid: 1}, c)
			}
			st := o.Close(10 * time.Second)
			if st.Sent != tc.sent || st.Dropped != tc.dropped {
				t.Errorf("stats %+v, want %d sent and %d dropped", st, tc.sent, tc.dropped)
			}
		})
	}
}

// TestOTLPNeverBlocks checks that a collector that does not answer costs
// the caller nothing: spans beyond the queue are dropped at once, and Close
// gives up after its timeout, counting what it could not send.
func TestOTLPNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	o, err := NewOTLP(OTLPOptions{Endpoint: srv.URL, Symbols: testSymbols(t), BatchSize: 10, QueueSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tree()
	all := numberTree(root)
	start := time.Now()
	const n = 10000
	for i := 0; i < n; i++ {
		o.Call(trace.Header{Goid: 1}, all[i%len(all)])
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("queueing %d spans took %v", n, d)
	}
	if st := o.Stats(); st.Dropped < n-100-10 {
		t.Errorf("%d spans dropped while the collector hangs, want at least %d", st.Dropped, n-110)
	}
	closeStart := time.Now()
	st := o.Close(500 * time.Millisecond)
	if d := time.Since(closeStart); d > 3*time.Second {
		t.Errorf("Close took %v with a 500ms timeout", d)
	}
	if st.Sent != 0 || st.Dropped != n {
		t.Errorf("stats %+v, want all %d dropped", st, n)
	}
}

// TestOTLPWireCompatible checks the premise of OTLP.request: a TracesData
// encodes exactly as the ExportTraceServiceRequest with the same spans,
// and partialSuccess reads the collector's response type.
func TestOTLPWireCompatible(t *testing.T) {
	root, _ := tree()
	all := numberTree(root)
	o, err := NewOTLP(OTLPOptions{Endpoint: "http://127.0.0.1:1", Service: "svc", Symbols: testSymbols(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(0)
	var batch []queuedSpan
	for _, c := range all {
		batch = append(batch, queuedSpan{pid: 9, span: o.span(trace.Header{Goid: 1, PID: 9}, c)})
	}
	td := o.request(batch)
	b, err := proto.Marshal(td)
	if err != nil {
		t.Fatal(err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&req, &coltracepb.ExportTraceServiceRequest{ResourceSpans: td.ResourceSpans}) || len(req.ResourceSpans[0].ScopeSpans[0].Spans) != 4 {
		t.Errorf("the request decodes differently as ExportTraceServiceRequest")
	}
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{ErrorMessage: "x", RejectedSpans: 12345}})
	if n, err := partialSuccess(resp); n != 12345 || err != nil {
		t.Errorf("partialSuccess = %d, %v", n, err)
	}
	if n, err := partialSuccess(nil); n != 0 || err != nil {
		t.Errorf("empty response: %d, %v", n, err)
	}
	if _, err := partialSuccess([]byte{0x0a, 0x05, 0x08}); err == nil {
		t.Error("truncated response accepted")
	}
}
