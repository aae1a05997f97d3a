package inspect

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Traceback limits of the runtime's text dump.
const (
	tracebackInnerFrames = 50  // Go 1.21+
	tracebackOuterFrames = 50  // Go 1.21+
	tracebackMaxFrames   = 100 // Go ≤1.20
)

// WriteDump writes goroutines in exactly the text format of the Go runtime's
// own dump (runtime.Stack(buf, true), pprof debug=2, SIGQUIT), so that tools
// that parse it (panicparse and the like) read gi's output. Arguments are
// printed as "(...)": their values are not decoded. Frame elision follows the
// target's Go release.
func WriteDump(w io.Writer, snap *Snapshot, gs []*Goroutine, allFrames bool) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	minor := goMinor(snap.GoVersion)
	var visible []Frame // reused: no allocation per goroutine
	for i, g := range gs {
		if i > 0 {
			bw.WriteByte('\n')
		}
		bw.WriteString(header(g, snap.TracebackLabels, minor))
		bw.WriteByte('\n')
		if minor != 0 && minor < 21 {
			writeFrames120(bw, g.Frames, allFrames)
		} else {
			frames := g.Frames
			if !allFrames {
				visible = visible[:0]
				for _, f := range g.Frames {
					if !f.Elided {
						visible = append(visible, f)
					}
				}
				frames = visible
			}
			writeFrames121(bw, frames)
		}
		if g.Truncated && g.Problem != "" && allFrames {
			fmt.Fprintf(bw, "...unwinding stopped: %s...\n", g.Problem)
		}
		if c := g.CreatedBy; c != nil {
			bw.WriteString("created by ")
			bw.WriteString(printName(c.Function))
			if g.ParentID != 0 && snap.Runtime21 {
				fmt.Fprintf(bw, " in goroutine %d", g.ParentID)
			}
			fmt.Fprintf(bw, "\n\t%s:%d", c.File, c.Line)
			if c.Offset > 0 {
				fmt.Fprintf(bw, " +%#x", c.Offset)
			}
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// Header returns the runtime's header line for g, without the trailing newline:
// "goroutine 7 [chan receive, 3 minutes, locked to thread]:".
func Header(g *Goroutine) string {
	return header(g, false, 0)
}

// header is Header with the pprof labels where the target's runtime prints
// them (labels set, minor the target's Go minor release): Go 1.26 inside the
// brackets, ` labels:{"k": "v"}`, every string quoted; Go 1.27 after them,
// ` {k: v}`, quoted only where needed.
func header(g *Goroutine, labels bool, minor int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "goroutine %d [%s", g.ID, g.State)
	if g.Status == "leaked" {
		b.WriteString(" (leaked)")
	}
	if g.Scan {
		b.WriteString(" (scan)")
	}
	if g.WaitKnown && g.Wait.Minutes() >= 1 {
		fmt.Fprintf(&b, ", %d minutes", int64(g.Wait.Minutes()))
	}
	if g.LockedToThread {
		b.WriteString(", locked to thread")
	}
	labels = labels && len(g.Labels) > 0 && minor >= 26
	if labels && minor == 26 {
		b.WriteString(" labels:{")
		writeLabels(&b, g.Labels, func(s string) string { return runtimeQuote(s) })
	}
	b.WriteString("]")
	if labels && minor >= 27 {
		b.WriteString(" {")
		writeLabels(&b, g.Labels, func(s string) string {
			if needsQuoting(s) {
				return runtimeQuote(s)
			}
			return s
		})
	}
	b.WriteString(":")
	return b.String()
}

// writeLabels writes "k: v, k2: v2}" in key order (the order of the
// runtime's label set).
func writeLabels(b *strings.Builder, labels map[string]string, quote func(string) string) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(k))
		b.WriteString(": ")
		b.WriteString(quote(labels[k]))
	}
	b.WriteByte('}')
}

// needsQuoting mirrors runtime.tracebackStringNeedsQuoting (Go 1.27).
func needsQuoting(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '/' || r == '_') {
			return true
		}
	}
	return false
}

// runtimeQuote mirrors runtime.printquoted: printable ASCII as is, \n \r
// \t \\ \" escaped, other bytes below 127 as \xNN, other runes as \uNNNN
// or \UNNNNNNNN, an invalid byte as \xNN.
func runtimeQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
			continue
		case '\r':
			b.WriteString(`\r`)
			continue
		case '\t':
			b.WriteString(`\t`)
			continue
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteRune(r)
			continue
		case utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
		}
		switch {
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r < 127:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func writeFrame(w *bufio.Writer, f Frame) {
	w.WriteString(printName(f.Function))
	w.WriteString("(...)\n\t")
	fmt.Fprintf(w, "%s:%d", f.File, f.Line)
	if !f.Inlined && f.Offset > 0 {
		fmt.Fprintf(w, " +%#x", f.Offset)
	}
	w.WriteByte('\n')
}

// writeFrames121 prints the innermost 50 and outermost 50 frames with the
// count of those in between, as Go 1.21+ does.
func writeFrames121(w *bufio.Writer, frames []Frame) {
	if len(frames) <= tracebackInnerFrames+tracebackOuterFrames {
		for _, f := range frames {
			writeFrame(w, f)
		}
		return
	}
	for _, f := range frames[:tracebackInnerFrames] {
		writeFrame(w, f)
	}
	elided := len(frames) - tracebackInnerFrames - tracebackOuterFrames
	fmt.Fprintf(w, "...%d frames elided...\n", elided)
	for _, f := range frames[len(frames)-tracebackOuterFrames:] {
		writeFrame(w, f)
	}
}

// writeFrames120 prints frames as Go ≤1.20 does: the walk stops after 100
// physical frames (the hidden runtime frames count), prints the visible
// ones among them (inlined frames included), and adds the marker only if
// exactly 100 were printed.
func writeFrames120(w *bufio.Writer, frames []Frame, allFrames bool) {
	physical, printed := 0, 0
	for _, f := range frames {
		if physical >= tracebackMaxFrames {
			break
		}
		if allFrames || !f.Elided {
			writeFrame(w, f)
			printed++
		}
		if !f.Inlined {
			physical++
		}
	}
	if printed == tracebackMaxFrames {
		w.WriteString("...additional frames elided...\n")
	}
}

// printName mirrors runtime.printFuncName: gopanic prints as panic and type
// parameters as [...].
func printName(name string) string {
	if name == "runtime.gopanic" {
		return "panic"
	}
	i := strings.IndexByte(name, '[')
	j := strings.LastIndexByte(name, ']')
	if i < 0 || j < i {
		return name
	}
	return name[:i] + "[...]" + name[j+1:]
}
