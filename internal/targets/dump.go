package targets

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Frame is one frame of a goroutine in the runtime's text dump.
type Frame struct {
	Function string
	// Args is the text between the parentheses: values, "..." for inlined
	// frames (and in gi's output, which does not decode arguments).
	Args   string
	File   string
	Line   int
	Offset uint64
	// Inlined is true for frames the runtime prints as f(...) without a pc offset.
	Inlined bool
}

// Goroutine is one goroutine of the runtime's text dump.
type Goroutine struct {
	ID          int64
	State       string
	WaitMinutes int
	Locked      bool
	Scan        bool
	Labels      map[string]string
	Frames      []Frame
	// ElidedFrames is the N of "...N frames elided..." (Go 1.21+), -1 for
	// "...additional frames elided..." (Go 1.20), else 0.
	ElidedFrames      int
	CreatedBy         *Frame
	CreatedByGoid     int64
	FramesUnavailable bool
}

// ParseDump parses the text the Go runtime prints for all goroutines
// (runtime.Stack(buf, true), pprof goroutine debug=2, SIGQUIT). It is strict:
// any line it does not understand is an error, so that a format difference
// cannot pass unnoticed.
func ParseDump(r io.Reader) ([]Goroutine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var out []Goroutine
	var cur *Goroutine
	var pending *Frame // a function line waiting for its file line
	lineNo := 0
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		errorf := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", lineNo, line, fmt.Sprintf(format, args...))
		}
		switch {
		case line == "":
			if pending != nil {
				return nil, errorf("function line without a file line")
			}
			flush()
		case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			if pending != nil {
				return nil, errorf("function line without a file line")
			}
			flush()
			g, err := parseHeader(line)
			if err != nil {
				return nil, errorf("%v", err)
			}
			cur = g
		case cur == nil:
			return nil, errorf("outside a goroutine")
		case strings.HasPrefix(line, "\t"):
			if pending == nil {
				return nil, errorf("file line without a function line")
			}
			file, lineN, off, hasOff, err := parseFileLine(line[1:])
			if err != nil {
				return nil, errorf("%v", err)
			}
			pending.File, pending.Line, pending.Offset = file, lineN, off
			pending.Inlined = pending.Args == "..." && !hasOff
			if pending == cur.CreatedBy {
				pending = nil
				continue
			}
			cur.Frames = append(cur.Frames, *pending)
			pending = nil
		case pending != nil:
			return nil, errorf("function line without a file line before it")
		case line == "...additional frames elided...":
			cur.ElidedFrames = -1
		case strings.HasPrefix(line, "...") && strings.HasSuffix(line, " frames elided..."):
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "..."), " frames elided..."))
			if err != nil {
				return nil, errorf("bad elision count")
			}
			cur.ElidedFrames = n
		case line == "goroutine running on other thread; stack unavailable":
			cur.FramesUnavailable = true
		case strings.HasPrefix(line, "created by "):
			rest := strings.TrimPrefix(line, "created by ")
			fn, goid, ok := strings.Cut(rest, " in goroutine ")
			f := &Frame{Function: fn}
			if ok {
				id, err := strconv.ParseInt(goid, 10, 64)
				if err != nil {
					return nil, errorf("bad creator goroutine")
				}
				cur.CreatedByGoid = id
			}
			cur.CreatedBy = f
			pending = f
		default:
			fn, args, err := splitCall(line)
			if err != nil {
				return nil, errorf("%v", err)
			}
			pending = &Frame{Function: fn, Args: args}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if pending != nil {
		return nil, fmt.Errorf("dump ends in the middle of a frame")
	}
	flush()
	return out, nil
}

// parseHeader parses "goroutine 7 [chan receive, 3 minutes, locked to thread]:".
// Labels, printed by Go 1.26 with GODEBUG=tracebacklabels=1 and by 1.27, are
// accepted as `{"k":"v", ...}` after the brackets.
func parseHeader(line string) (*Goroutine, error) {
	body := strings.TrimSuffix(strings.TrimPrefix(line, "goroutine "), ":")
	idText, rest, ok := strings.Cut(body, " [")
	if !ok {
		return nil, fmt.Errorf("no state")
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad goroutine id")
	}
	inner, after, ok := strings.Cut(rest, "]")
	if !ok {
		return nil, fmt.Errorf("unterminated state")
	}
	g := &Goroutine{ID: id}
	parts := strings.Split(inner, ", ")
	state := parts[0]
	// Markers after the state, in whatever order a release prints them.
	for trimmed := true; trimmed; {
		trimmed = false
		for _, suffix := range []string{" (durable)", " (scan)", " (leaked)"} {
			if strings.HasSuffix(state, suffix) {
				state = strings.TrimSuffix(state, suffix)
				g.Scan = g.Scan || suffix == " (scan)"
				trimmed = true
			}
		}
	}
	g.State = state
	for _, p := range parts[1:] {
		switch {
		case p == "locked to thread":
			g.Locked = true
		case strings.HasSuffix(p, " minutes"):
			n, err := strconv.Atoi(strings.TrimSuffix(p, " minutes"))
			if err != nil {
				return nil, fmt.Errorf("bad wait minutes %q", p)
			}
			g.WaitMinutes = n
		default:
			return nil, fmt.Errorf("unknown header part %q", p)
		}
	}
	if after = strings.TrimSpace(after); after != "" {
		labels, err := parseLabels(after)
		if err != nil {
			return nil, err
		}
		g.Labels = labels
	}
	return g, nil
}

func parseLabels(s string) (map[string]string, error) {
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, fmt.Errorf("unexpected text after state: %q", s)
	}
	out := map[string]string{}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return out, nil
	}
	for _, kv := range strings.Split(body, ", ") {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return nil, fmt.Errorf("bad label %q", kv)
		}
		ku, err1 := strconv.Unquote(k)
		vu, err2 := strconv.Unquote(v)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad label %q", kv)
		}
		out[ku] = vu
	}
	return out, nil
}

// splitCall splits "main.(*T).m(0x1, {0x2, 0x3})" into function and args.
func splitCall(line string) (fn, args string, err error) {
	if !strings.HasSuffix(line, ")") {
		return "", "", fmt.Errorf("not a call")
	}
	depth := 0
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				if i == 0 {
					return "", "", fmt.Errorf("no function name")
				}
				return line[:i], line[i+1 : len(line)-1], nil
			}
		}
	}
	return "", "", fmt.Errorf("unbalanced parentheses")
}

// parseFileLine parses "/path/file.go:123 +0x1d" (offset optional).
func parseFileLine(s string) (file string, line int, off uint64, hasOff bool, err error) {
	loc := s
	if i := strings.LastIndex(s, " +0x"); i >= 0 {
		off, err = strconv.ParseUint(s[i+4:], 16, 64)
		if err != nil {
			return "", 0, 0, false, fmt.Errorf("bad pc offset")
		}
		hasOff = true
		loc = s[:i]
	}
	i := strings.LastIndexByte(loc, ':')
	if i < 0 {
		return "", 0, 0, false, fmt.Errorf("no line number")
	}
	line, err = strconv.Atoi(loc[i+1:])
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("bad line number")
	}
	return loc[:i], line, off, hasOff, nil
}
