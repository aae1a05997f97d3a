package report

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gi-debug/gi/measure"
)

// indented writes JSON the way encoding/json's MarshalIndent does (the
// same bytes: tested against it), without reflection or the second pass
// that re-indents compact output: at 100k goroutines those cost more than
// the snapshot itself.
type indented struct {
	b      []byte
	prefix string
	depth  int
	// first says, per open container, that no element was written yet.
	first []bool
}

func (w *indented) newline() {
	w.b = append(w.b, '\n')
	w.b = append(w.b, w.prefix...)
	for range w.depth {
		w.b = append(w.b, "  "...)
	}
}

// element starts an element of the innermost container.
func (w *indented) element() {
	n := len(w.first) - 1
	if n < 0 {
		return
	}
	if !w.first[n] {
		w.b = append(w.b, ',')
	}
	w.first[n] = false
	w.newline()
}

func (w *indented) open(c byte) {
	w.b = append(w.b, c)
	w.first = append(w.first, true)
	w.depth++
}

func (w *indented) close(c byte) {
	n := len(w.first) - 1
	empty := w.first[n]
	w.first = w.first[:n]
	w.depth--
	if !empty {
		w.newline()
	}
	w.b = append(w.b, c)
}

// key starts the member name of an object.
func (w *indented) key(name string) {
	w.element()
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `": `...)
}

func (w *indented) str(name, v string) {
	w.key(name)
	w.b = appendString(w.b, v)
}

func (w *indented) int(name string, v int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *indented) uint(name string, v uint64) {
	w.key(name)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *indented) bool(name string, v bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *indented) null(name string) {
	w.key(name)
	w.b = append(w.b, "null"...)
}

// appendString appends s as encoding/json quotes it: HTML characters and
// U+2028/U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendGoroutine writes g as MarshalIndent(g, w.prefix, "  ") would.
func (w *indented) goroutine(g *Goroutine) {
	w.open('{')
	w.uint("goid", g.Goid)
	w.str("addr", g.Addr)
	w.uint("sp", g.SP)
	w.int("wait_since", g.WaitSince)
	w.uint("transitions", uint64(g.Transitions))
	w.str("state", g.State)
	w.str("wait_reason", g.WaitReason)
	w.int("wait_ns", g.WaitNS)
	w.str("function", g.Function)
	w.str("file", g.File)
	w.int("line", int64(g.Line))
	w.str("start_function", g.StartFunction)
	if c := g.CreatedBy; c == nil {
		w.null("created_by")
	} else {
		w.key("created_by")
		w.open('{')
		w.str("function", c.Function)
		w.str("file", c.File)
		w.int("line", int64(c.Line))
		w.uint("goid", c.Goid)
		w.close('}')
	}
	if g.Labels == nil {
		w.null("labels")
	} else {
		w.key("labels")
		w.open('{')
		keys := make([]string, 0, len(g.Labels))
		for k := range g.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w.element()
			w.b = appendString(w.b, k)
			w.b = append(w.b, ": "...)
			w.b = appendString(w.b, g.Labels[k])
		}
		w.close('}')
	}
	w.int("thread_id", int64(g.ThreadID))
	if g.HostThreadID != 0 {
		w.int("host_thread_id", int64(g.HostThreadID))
	}
	w.bool("locked_to_thread", g.LockedToThread)
	w.bool("system", g.System)
	if g.Frames == nil {
		w.null("frames")
	} else {
		w.key("frames")
		w.open('[')
		for _, f := range g.Frames {
			w.element()
			w.open('{')
			w.str("function", f.Function)
			w.str("file", f.File)
			w.int("line", int64(f.Line))
			w.uint("pc", f.PC)
			w.bool("inlined", f.Inlined)
			w.close('}')
		}
		w.close(']')
	}
	if g.Truncated {
		w.bool("truncated", true)
	}
	if g.Problem != "" {
		w.str("problem", g.Problem)
	}
	if len(g.WaitingOn) > 0 {
		w.key("waiting_on")
		w.open('[')
		for i := range g.WaitingOn {
			w.element()
			w.waitObject(&g.WaitingOn[i])
		}
		w.close(']')
	}
	if g.Leaked {
		w.bool("leaked", true)
	}
	if g.LeakedWhy != "" {
		w.str("leaked_why", g.LeakedWhy)
	}
	if g.Deadlocked {
		w.bool("deadlocked", true)
	}
	if g.Trace != nil {
		w.key("trace")
		w.latency(g.Trace)
	}
	w.close('}')
}

func (w *indented) waitObject(o *WaitObject) {
	w.open('{')
	w.str("kind", o.Kind)
	w.str("addr", o.Addr)
	optStr := func(name, v string) {
		if v != "" {
			w.str(name, v)
		}
	}
	optStr("name", o.Name)
	optStr("type", o.Type)
	optStr("dir", o.Dir)
	if o.Len != nil {
		w.uint("len", *o.Len)
	}
	if o.Cap != nil {
		w.uint("cap", *o.Cap)
	}
	if o.Closed != nil {
		w.bool("closed", *o.Closed)
	}
	if o.Receivers != nil {
		w.int("receivers", int64(*o.Receivers))
	}
	if o.Senders != nil {
		w.int("senders", int64(*o.Senders))
	}
	if o.Locked != nil {
		w.bool("locked", *o.Locked)
	}
	if o.Starving != nil {
		w.bool("starving", *o.Starving)
	}
	if o.Readers != nil {
		w.int("readers", int64(*o.Readers))
	}
	if o.Counter != nil {
		w.int("counter", int64(*o.Counter))
	}
	if o.Waiters != nil {
		w.int("waiters", int64(*o.Waiters))
	}
	for _, hs := range []struct {
		key     string
		holders []LockHolder
	}{{"holders", o.Holders}, {"suspects", o.Suspects}} {
		if len(hs.holders) == 0 {
			continue
		}
		w.key(hs.key)
		w.open('[')
		for _, h := range hs.holders {
			w.element()
			w.open('{')
			w.uint("goid", h.Goid)
			w.str("function", h.Function)
			w.str("file", h.File)
			w.int("line", int64(h.Line))
			if h.Read {
				w.bool("read", true)
			}
			w.close('}')
		}
		w.close(']')
	}
	if o.FD != nil {
		w.int("fd", int64(*o.FD))
	}
	optStr("syscall", o.Syscall)
	optStr("local", o.Local)
	optStr("remote", o.Remote)
	optStr("path", o.Path)
	if o.WakeInNS != nil {
		w.int("wake_in_ns", *o.WakeInNS)
	}
	optStr("unknown", o.Unknown)
	if o.Unreachable {
		w.bool("unreachable", true)
	}
	w.close('}')
}

func (w *indented) latency(l *measure.Latency) {
	w.open('{')
	w.str("function", l.Function)
	w.str("file", l.File)
	w.int("line", int64(l.Line))
	w.uint("calls", l.Calls)
	if l.Sampled {
		w.bool("sampled", true)
	}
	if l.CallsEstimated != 0 {
		w.uint("calls_estimated", l.CallsEstimated)
	}
	w.int("p50_ns", l.P50NS)
	w.int("p99_ns", l.P99NS)
	w.int("max_ns", l.MaxNS)
	w.int("in_call_ns", l.InCallNS)
	w.bool("stuck", l.Stuck)
	w.int("traced_ns", l.TracedNS)
	if l.Why != "" {
		w.str("why", l.Why)
	}
	if d := l.Dominant; d != nil {
		w.key("dominant")
		w.open('{')
		w.str("part", d.Part)
		// As encoding/json writes a share: 'f' down to 1e-6 (and no
		// part is smaller than that share worth writing).
		share := d.Share
		if share < 1e-6 {
			share = 0
		}
		w.key("share")
		w.b = strconv.AppendFloat(w.b, share, 'f', -1, 64)
		w.int("mean_ns", d.MeanNS)
		w.int("p99_ns", d.P99NS)
		w.close('}')
	}
	w.close('}')
}
