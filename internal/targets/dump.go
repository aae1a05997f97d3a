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
// Labels, which tracebacks print with GODEBUG=tracebacklabels=1, are
// accepted in both formats: Go 1.26's inside the brackets
// (`[chan receive labels:{"k": "v"}]:`, every string quoted) and Go 1.27's
// after them (`[chan receive] {k: v}:`, quoted only where needed).
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
	g := &Goroutine{ID: id}
	labelText := ""
	if i := strings.Index(rest, " labels:{"); i >= 0 && strings.HasSuffix(rest, "}]") { // Go 1.26
		labelText, rest = rest[i+len(" labels:{"):len(rest)-2], rest[:i]+"]"
	} else if i := strings.Index(rest, "] {"); i >= 0 && strings.HasSuffix(rest, "}") { // Go 1.27
		labelText, rest = rest[i+len("] {"):len(rest)-1], rest[:i+1]
	}
	inner, after, ok := strings.Cut(rest, "]")
	if !ok {
		return nil, fmt.Errorf("unterminated state")
	}
	if strings.TrimSpace(after) != "" {
		return nil, fmt.Errorf("unexpected text after state: %q", after)
	}
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
	if labelText != "" {
		if g.Labels, err = parseLabels(labelText); err != nil {
			return nil, fmt.Errorf("labels %q: %w", labelText, err)
		}
	}
	return g, nil
}

// parseLabels parses `k: v, "k 2": "v\n"`: keys and values bare or quoted
// the way the runtime quotes (which strconv.Unquote reads).
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	token := func(stop string) (string, error) {
		if strings.HasPrefix(s, `"`) {
			for i := 1; i < len(s); i++ {
				switch s[i] {
				case '\\':
					i++
				case '"':
					v, err := strconv.Unquote(s[:i+1])
					s = s[i+1:]
					return v, err
				}
			}
			return "", fmt.Errorf("unterminated string")
		}
		i := strings.Index(s, stop)
		if i < 0 {
			i = len(s)
		}
		v := s[:i]
		s = s[i:]
		return v, nil
	}
	for s != "" {
		k, err := token(": ")
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s, ": ") {
			return nil, fmt.Errorf("no ': ' after key %q", k)
		}
		s = s[2:]
		v, err := token(", ")
		if err != nil {
			return nil, err
		}
		out[k] = v
		if s != "" {
			if !strings.HasPrefix(s, ", ") {
				return nil, fmt.Errorf("no ', ' after value %q", v)
			}
			s = s[2:]
		}
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
