package export

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gi-debug/gi/trace"
)

// OTLPOptions configure an OTLP exporter. Zero values take the defaults.
type OTLPOptions struct {
	// Endpoint is the collector's base URL (http://host:4318): spans are
	// posted to Endpoint/v1/traces, unless it already ends with that path.
	Endpoint string
	// Headers are added to every request (authentication).
	Headers map[string]string
	// Service is the resource's service.name.
	Service string
	// Host is the resource's host.name.
	Host string
	// Symbols resolves call sites (code.file.path, code.line.number).
	Symbols *trace.Symbols
	// Clock converts event times to wall-clock times.
	Clock trace.Clock
	// BatchSize is the most spans per request (default 1024).
	BatchSize int
	// QueueSize bounds the spans waiting to be sent (default 16384):
	// beyond it, new spans are dropped and counted.
	QueueSize int
	// FlushInterval is how long a span waits for its batch to fill
	// (default 1s).
	FlushInterval time.Duration
	// RequestTimeout bounds one request (default 10s).
	RequestTimeout time.Duration
	// MaxRetry bounds the time a batch is retried for (default 30s).
	MaxRetry time.Duration
	// Client sends the requests (default: a client of its own, with the
	// system's TLS roots for https URLs).
	Client *http.Client
}

// OTLPStats count what an OTLP exporter did with its spans.
type OTLPStats struct {
	// Sent spans were accepted by the collector.
	Sent uint64
	// Dropped spans never reached it: the queue was full, the collector
	// refused them, or it was unreachable until gi gave up.
	Dropped uint64
	// LastError says why spans were last dropped or retried.
	LastError string
}

// OTLP sends traced calls as OpenTelemetry spans over OTLP/HTTP (protobuf).
// A root call starts a trace, nested calls are child spans of their caller's
// span, unwound calls end with an error status. Spans are converted in the
// caller's goroutine (the trace's event loop) and queued; a goroutine of its
// own batches and posts them, retrying with backoff. Adding a span never
// blocks: when the queue is full (the collector is slow or down), the span
// is dropped and counted.
type OTLP struct {
	opts    OTLPOptions
	url     string
	runID   [8]byte
	spanKey uint64

	// Caches owned by the event loop: attributes shared by many spans.
	goroutineAttrs map[trace.GoroutineKey][]*commonpb.KeyValue
	siteAttrs      map[uint64][]*commonpb.KeyValue
	funcAttrs      map[*trace.Function]*commonpb.KeyValue
	resources      map[uint32]*resourcepb.Resource

	mu      sync.Mutex
	queue   []queuedSpan
	stats   OTLPStats
	closing bool

	kick chan struct{}
	done chan struct{}
	// stop cancels requests and retries when Close runs out of time.
	stop       context.Context
	cancelStop context.CancelFunc
}

type queuedSpan struct {
	pid  uint32
	span *tracepb.Span
}

// tracesPath is where OTLP/HTTP receives traces.
const tracesPath = "/v1/traces"

// maxAttrCache bounds the attribute caches (goroutines, call sites).
const maxAttrCache = 1 << 14

// NewOTLP starts an exporter; Close flushes and stops it.
func NewOTLP(opts OTLPOptions) (*OTLP, error) {
	if !strings.HasPrefix(opts.Endpoint, "http://") && !strings.HasPrefix(opts.Endpoint, "https://") {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL", opts.Endpoint)
	}
	if opts.Symbols == nil {
		return nil, errors.New("OTLP exporter needs the symbols of the traced binary")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1024
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 16384
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.MaxRetry <= 0 {
		opts.MaxRetry = 30 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	url := strings.TrimRight(opts.Endpoint, "/")
	if !strings.HasSuffix(url, tracesPath) {
		url += tracesPath
	}
	o := &OTLP{
		opts: opts, url: url,
		goroutineAttrs: map[trace.GoroutineKey][]*commonpb.KeyValue{},
		siteAttrs:      map[uint64][]*commonpb.KeyValue{},
		funcAttrs:      map[*trace.Function]*commonpb.KeyValue{},
		resources:      map[uint32]*resourcepb.Resource{},
		kick:           make(chan struct{}, 1),
		done:           make(chan struct{}),
	}
	// Trace ids are the run's random id and the root call's number; span
	// ids are the call's number offset by a random key: unique in a run,
	// and unlikely to meet another run's.
	if _, err := crand.Read(o.runID[:]); err != nil {
		return nil, fmt.Errorf("OTLP trace ids: %w", err)
	}
	var key [8]byte
	if _, err := crand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("OTLP span ids: %w", err)
	}
	o.spanKey = binary.BigEndian.Uint64(key[:])
	o.stop, o.cancelStop = context.WithCancel(context.Background())
	go o.sendLoop()
	return o, nil
}

// Call queues the span of one call of goroutine h. It never blocks.
func (o *OTLP) Call(h trace.Header, c *trace.Call) {
	o.enqueue(h.PID, o.span(h, c))
}

// Running queues the spans of a goroutine's calls still open at the end of
// the trace (outermost first), ending at the end of the trace.
func (o *OTLP) Running(h trace.Header, open []*trace.Call) {
	for i := len(open) - 1; i >= 0; i-- {
		o.Call(h, open[i])
	}
}

func (o *OTLP) enqueue(pid uint32, s *tracepb.Span) {
	o.mu.Lock()
	if o.closing || len(o.queue) >= o.opts.QueueSize {
		o.stats.Dropped++
		o.mu.Unlock()
		return
	}
	o.queue = append(o.queue, queuedSpan{pid: pid, span: s})
	full := len(o.queue) >= o.opts.BatchSize
	o.mu.Unlock()
	if full {
		select {
		case o.kick <- struct{}{}:
		default:
		}
	}
}

func (o *OTLP) traceID(c *trace.Call) []byte {
	id := make([]byte, 16)
	copy(id, o.runID[:])
	binary.BigEndian.PutUint64(id[8:], c.Root().Seq)
	return id
}

func (o *OTLP) spanID(c *trace.Call) []byte {
	v := c.Seq + o.spanKey
	if v == 0 {
		v = o.spanKey ^ 1<<63 // an all-zero span id is invalid
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v)
}

// span converts one call.
func (o *OTLP) span(h trace.Header, c *trace.Call) *tracepb.Span {
	start := o.opts.Clock.Wall(c.Start).UnixNano()
	s := &tracepb.Span{
		TraceId:           o.traceID(c),
		SpanId:            o.spanID(c),
		Name:              c.Func.Name,
		Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: uint64(start),
		EndTimeUnixNano:   uint64(start) + c.Duration(),
	}
	if c.Parent != nil {
		s.ParentSpanId = o.spanID(c.Parent)
	}
	attrs := make([]*commonpb.KeyValue, 0, 12)
	attrs = append(attrs, o.functionAttr(c.Func))
	attrs = append(attrs, o.callSiteAttrs(h.PID, c.CallerPC)...)
	attrs = append(attrs, o.goroutine(h)...)
	switch {
	case c.Unwound:
		s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "unwound (panic, recover or Goexit)"}
	case c.Running:
		attrs = append(attrs, boolAttr("gi.call.running", true))
	}
	if c.Func.Sampled {
		// Traced in sampling windows (--max-overhead): one of the calls
		// seen, not every call.
		attrs = append(attrs, boolAttr("gi.sampled", true))
	}
	if t := c.Time; t != nil {
		attrs, s.Events = o.timeSplit(attrs, t)
	}
	s.Attributes = attrs
	return s
}

// timeSplit adds a call's time split (gi trace --why) to its span: the
// parts as attributes (gi.time.on_cpu_ns, gi.time.runnable_ns,
// gi.time.blocked_ns, and per wait reason gi.time.blocked.<reason>_ns),
// and each wait of the call's own as a span event at its start, named by
// its reason, with its duration, object and waker.
func (o *OTLP) timeSplit(attrs []*commonpb.KeyValue, t *trace.TimeSplit) ([]*commonpb.KeyValue, []*tracepb.Span_Event) {
	var blocked uint64
	byReason := map[string]uint64{}
	var reasons []string
	for _, b := range t.Blocked {
		blocked += b.NS
		if _, ok := byReason[b.Reason]; !ok {
			reasons = append(reasons, b.Reason)
		}
		byReason[b.Reason] += b.NS
	}
	attrs = append(attrs, intAttr("gi.time.on_cpu_ns", int64(t.OnCPU)), intAttr("gi.time.runnable_ns", int64(t.Runnable)),
		intAttr("gi.time.blocked_ns", int64(blocked)))
	for _, r := range reasons {
		attrs = append(attrs, intAttr("gi.time.blocked."+r+"_ns", int64(byReason[r])))
	}
	if t.Partial {
		attrs = append(attrs, boolAttr("gi.time.partial", true), intAttr("gi.time.unknown_ns", int64(t.Unknown)))
	}
	var events []*tracepb.Span_Event
	for _, iv := range t.Intervals {
		if iv.Reason == "" {
			continue
		}
		ev := &tracepb.Span_Event{Name: iv.Reason, TimeUnixNano: uint64(o.opts.Clock.Wall(iv.Start).UnixNano()),
			Attributes: []*commonpb.KeyValue{intAttr("gi.wait.duration_ns", int64(iv.End-iv.Start))}}
		if obj := iv.Object.String(); obj != "" {
			ev.Attributes = append(ev.Attributes, stringAttr("gi.wait.object", obj))
		}
		if iv.WokenBy != 0 {
			ev.Attributes = append(ev.Attributes, intAttr("gi.wait.woken_by", int64(iv.WokenBy)), stringAttr("gi.wait.woken_by_function", iv.WokenByFunction))
		}
		events = append(events, ev)
	}
	return attrs, events
}

func (o *OTLP) functionAttr(f *trace.Function) *commonpb.KeyValue {
	kv := o.funcAttrs[f]
	if kv == nil {
		kv = stringAttr("code.function.name", f.Name)
		o.funcAttrs[f] = kv
	}
	return kv
}

// callSiteAttrs are the file and line of the call site, and the calling
// function.
func (o *OTLP) callSiteAttrs(pid uint32, pc uint64) []*commonpb.KeyValue {
	key := uint64(pid)<<48 ^ pc
	if kv, ok := o.siteAttrs[key]; ok {
		return kv
	}
	site := o.opts.Symbols.Resolve(pid, pc, true)
	var kv []*commonpb.KeyValue
	if site.File != "" {
		kv = append(kv, stringAttr("code.file.path", site.File), intAttr("code.line.number", int64(site.Line)))
	}
	if site.Function != "" {
		kv = append(kv, stringAttr("gi.caller.function", site.Function))
	}
	if len(o.siteAttrs) >= maxAttrCache {
		clear(o.siteAttrs)
	}
	o.siteAttrs[key] = kv
	return kv
}

// goroutine returns the attributes naming goroutine h: its id, creator,
// parent and pprof labels.
func (o *OTLP) goroutine(h trace.Header) []*commonpb.KeyValue {
	k := trace.GoroutineKey{PID: h.PID, Goid: h.Goid}
	if kv, ok := o.goroutineAttrs[k]; ok {
		return kv
	}
	kv := []*commonpb.KeyValue{intAttr("go.goroutine.id", int64(h.Goid))}
	if h.Known && h.CreatedBy.Function != "" {
		kv = append(kv, stringAttr("go.goroutine.created_by", fmt.Sprintf("%s at %s:%d", h.CreatedBy.Function, h.CreatedBy.File, h.CreatedBy.Line)))
		if h.ParentID != 0 {
			kv = append(kv, intAttr("go.goroutine.parent.id", int64(h.ParentID)))
		}
	}
	keys := make([]string, 0, len(h.Labels))
	for l := range h.Labels {
		keys = append(keys, l)
	}
	sort.Strings(keys)
	for _, l := range keys {
		kv = append(kv, stringAttr("go.goroutine.label."+l, h.Labels[l]))
	}
	if len(o.goroutineAttrs) >= maxAttrCache {
		clear(o.goroutineAttrs)
	}
	o.goroutineAttrs[k] = kv
	return kv
}

func stringAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func boolAttr(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

// Stats returns what was sent and dropped so far.
func (o *OTLP) Stats() OTLPStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// Close sends what is queued, waiting at most timeout for the collector,
// and stops the exporter. Spans still unsent then are counted as dropped.
func (o *OTLP) Close(timeout time.Duration) OTLPStats {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
		o.cancelStop()
		<-o.done
	}
	o.cancelStop()
	return o.Stats()
}

// sendLoop posts batches until Close, then drains the queue.
func (o *OTLP) sendLoop() {
	defer close(o.done)
	tick := time.NewTicker(o.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-o.kick:
		case <-tick.C:
		case <-o.stop.Done():
		}
		for {
			batch, last := o.take()
			if len(batch) > 0 {
				o.send(batch)
			}
			if last {
				return
			}
			if len(batch) < o.opts.BatchSize {
				break
			}
		}
	}
}

// take removes the next batch from the queue; last is true when the
// exporter is closing and nothing will follow.
func (o *OTLP) take() (batch []queuedSpan, last bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stop.Err() != nil {
		o.stats.Dropped += uint64(len(o.queue))
		o.queue = nil
		return nil, true
	}
	n := min(len(o.queue), o.opts.BatchSize)
	batch = append([]queuedSpan(nil), o.queue[:n]...)
	rest := copy(o.queue, o.queue[n:])
	clear(o.queue[rest:])
	o.queue = o.queue[:rest]
	return batch, o.closing && len(o.queue) == 0
}

// request builds the OTLP request for a batch: one ResourceSpans per
// traced process.
//
// The body is an opentelemetry.proto.trace.v1.TracesData: the OTLP/HTTP
// request message (collector.trace.v1.ExportTraceServiceRequest) has the
// same single field (1: repeated ResourceSpans), and importing the collector
// package would link gRPC and grpc-gateway into gi (12 MB for one type).
// TestOTLPWireCompatible checks the two encodings agree.
func (o *OTLP) request(batch []queuedSpan) *tracepb.TracesData {
	byPID := map[uint32]*tracepb.ScopeSpans{}
	var order []uint32
	for _, q := range batch {
		ss := byPID[q.pid]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "gi"}}
			byPID[q.pid] = ss
			order = append(order, q.pid)
		}
		ss.Spans = append(ss.Spans, q.span)
	}
	td := &tracepb.TracesData{}
	for _, pid := range order {
		td.ResourceSpans = append(td.ResourceSpans, &tracepb.ResourceSpans{
			Resource:   o.resource(pid),
			ScopeSpans: []*tracepb.ScopeSpans{byPID[pid]},
		})
	}
	return td
}

func (o *OTLP) resource(pid uint32) *resourcepb.Resource {
	r := o.resources[pid]
	if r == nil {
		attrs := []*commonpb.KeyValue{stringAttr("service.name", o.opts.Service), intAttr("process.pid", int64(pid))}
		if o.opts.Host != "" {
			attrs = append(attrs, stringAttr("host.name", o.opts.Host))
		}
		r = &resourcepb.Resource{Attributes: attrs}
		o.resources[pid] = r
	}
	return r
}

// send posts one batch, retrying with exponential backoff (and the
// collector's Retry-After) while the failure is temporary, for at most
// MaxRetry or until Close runs out of time.
func (o *OTLP) send(batch []queuedSpan) {
	body, err := proto.Marshal(o.request(batch))
	if err != nil {
		o.failed(len(batch), fmt.Errorf("encode spans: %w", err))
		return
	}
	deadline := time.Now().Add(o.opts.MaxRetry)
	backoff := 250 * time.Millisecond
	for {
		rejected, retryAfter, err := o.post(body)
		if err == nil {
			o.mu.Lock()
			o.stats.Sent += uint64(len(batch)) - min(rejected, uint64(len(batch)))
			o.stats.Dropped += min(rejected, uint64(len(batch)))
			if rejected > 0 {
				o.stats.LastError = fmt.Sprintf("collector rejected %d spans", rejected)
			}
			o.mu.Unlock()
			return
		}
		var perm permanentError
		if errors.As(err, &perm) {
			o.failed(len(batch), err)
			return
		}
		o.mu.Lock()
		o.stats.LastError = err.Error()
		o.mu.Unlock()
		wait := backoff/2 + rand.N(backoff/2+1) // jitter
		if retryAfter > wait {
			wait = retryAfter
		}
		if time.Now().Add(wait).After(deadline) {
			o.failed(len(batch), err)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-o.stop.Done():
			t.Stop()
			o.failed(len(batch), err)
			return
		}
		backoff = min(2*backoff, 8*time.Second)
	}
}

func (o *OTLP) failed(n int, err error) {
	o.mu.Lock()
	o.stats.Dropped += uint64(n)
	o.stats.LastError = err.Error()
	o.mu.Unlock()
}

// permanentError is a refusal that retrying cannot change.
type permanentError struct{ error }

// post sends one request. It returns the spans the collector rejected in a
// partial success, how long the collector asked to wait before a retry, and
// an error: permanentError when retrying cannot help.
func (o *OTLP) post(body []byte) (rejected uint64, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(o.stop, o.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, permanentError{fmt.Errorf("OTLP request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "gi")
	for k, v := range o.opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := o.opts.Client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("post to %s: %w", o.url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		rejected, _ = partialSuccess(b)
		return rejected, 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(min(s, 60)) * time.Second
		}
		return 0, retryAfter, fmt.Errorf("post to %s: %s", o.url, resp.Status)
	default:
		return 0, 0, permanentError{fmt.Errorf("post to %s: %s", o.url, resp.Status)}
	}
}

// partialSuccess reads rejected_spans from an ExportTraceServiceResponse
// (field 1 partial_success, its field 1 rejected_spans), with protowire for
// the same reason request uses TracesData.
func partialSuccess(b []byte) (uint64, error) {
	ps, found, err := protoField(b, 1, protowire.BytesType)
	if err != nil || !found {
		return 0, err
	}
	v, found, err := protoField(ps, 1, protowire.VarintType)
	if err != nil || !found {
		return 0, err
	}
	n, _ := protowire.ConsumeVarint(v)
	return n, nil
}

// protoField returns the encoded value of the first field num of wire type
// typ in message b: the payload of a bytes field, the varint of a varint.
func protoField(b []byte, num protowire.Number, typ protowire.Type) ([]byte, bool, error) {
	for len(b) > 0 {
		f, t, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(f, t, b)
		if m < 0 {
			return nil, false, protowire.ParseError(m)
		}
		if f == num && t == typ {
			if typ == protowire.BytesType {
				v, _ := protowire.ConsumeBytes(b)
				return v, true, nil
			}
			return b[:m], true, nil
		}
		b = b[m:]
	}
	return nil, false, nil
}
