package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/trace"
)

// gi top's view is pure: keys decode to actions, actions change a topView,
// and renderTop turns the state and the data into the screen's lines. The
// terminal loop in top.go only reads bytes, refreshes data and writes lines.

// topAction is what a key asks of the view.
type topAction int

const (
	actNone topAction = iota
	actQuit
	actSortCount
	actSortWait
	actSortP99
	actFilter // start typing a filter
	actDown
	actUp
	actPageDown
	actPageUp
	actHome
	actEnd
	actToggle       // expand or fold the selected group
	actGroupObjects // group by the object waited on, or by function again
	actEnter
	actEscape
	actBackspace
	actChar // a printable byte with no command of its own
)

// topKey is one decoded key: its action, and for a plain key its byte (so
// that the filter prompt can type letters that are commands elsewhere).
type topKey struct {
	action topAction
	char   byte
}

// keyDecoder turns terminal input bytes into keys. Escape sequences may be
// split across reads: an incomplete one is kept until the next Feed, or
// until Flush says no more is coming (a lone Escape key).
type keyDecoder struct {
	pending []byte
}

// escapeKeys maps the escape sequences gi top understands (xterm and VT
// forms) to actions.
var escapeKeys = map[string]topAction{
	"\x1b[A": actUp, "\x1b[B": actDown, "\x1bOA": actUp, "\x1bOB": actDown,
	"\x1b[5~": actPageUp, "\x1b[6~": actPageDown,
	"\x1b[H": actHome, "\x1b[F": actEnd, "\x1bOH": actHome, "\x1bOF": actEnd,
	"\x1b[1~": actHome, "\x1b[4~": actEnd, "\x1b[7~": actHome, "\x1b[8~": actEnd,
}

// Feed decodes input, returning the complete keys (unknown ones dropped).
func (d *keyDecoder) Feed(input []byte) []topKey {
	var out []topKey
	buf := append(d.pending, input...)
	d.pending = nil
	for i := 0; i < len(buf); {
		b := buf[i]
		if b != 0x1b {
			if k := plainKey(b); k.action != actNone {
				out = append(out, k)
			}
			i++
			continue
		}
		rest := buf[i:]
		n, action, complete := matchEscape(rest)
		if !complete {
			d.pending = append([]byte(nil), rest...)
			break
		}
		if action != actNone { // unknown sequences are dropped
			out = append(out, topKey{action: action})
		}
		i += n
	}
	return out
}

// Flush ends a pending escape sequence that will not be completed: a lone
// Escape key, or an unknown sequence (ignored).
func (d *keyDecoder) Flush() []topKey {
	if len(d.pending) == 0 {
		return nil
	}
	p := d.pending
	d.pending = nil
	if len(p) == 1 {
		return []topKey{{action: actEscape}}
	}
	return nil
}

// Pending reports whether an escape sequence is incomplete.
func (d *keyDecoder) Pending() bool { return len(d.pending) > 0 }

// matchEscape matches the sequence at the start of b (b[0] is ESC): its
// length and action (actNone for an unknown but complete sequence), or
// complete false when more bytes are needed.
func matchEscape(b []byte) (n int, action topAction, complete bool) {
	if len(b) == 1 {
		return 0, actNone, false
	}
	switch b[1] {
	case '[', 'O':
	default:
		return 1, actEscape, true // ESC then a key: Escape alone
	}
	// CSI/SS3: parameters (digits, ';') then a final byte in @..~.
	for j := 2; j < len(b) && j < 16; j++ {
		c := b[j]
		if c >= '0' && c <= '9' || c == ';' {
			continue
		}
		if c >= '@' && c <= '~' {
			return j + 1, escapeKeys[string(b[:j+1])], true
		}
		return j + 1, actNone, true // malformed: dropped
	}
	if len(b) >= 16 {
		return len(b), actNone, true // runaway: dropped
	}
	return 0, actNone, false
}

// plainKeys are the single-byte commands.
var plainKeys = map[byte]topAction{
	'q': actQuit, 3: actQuit, // q, Ctrl-C
	'c': actSortCount, 'w': actSortWait, 'p': actSortP99, 'o': actGroupObjects,
	'/': actFilter, 'j': actDown, 'k': actUp, 'g': actHome, 'G': actEnd,
	'e': actToggle, '\r': actEnter, '\n': actEnter, 0x7f: actBackspace, 0x08: actBackspace,
}

func plainKey(b byte) topKey {
	k := topKey{action: plainKeys[b]}
	if b >= 0x20 && b < 0x7f {
		k.char = b
		if k.action == actNone {
			k.action = actChar
		}
	}
	return k
}

// topView is the interactive state.
type topView struct {
	sortBy    byte // 'c', 'w', 'p'
	byObject  bool // groups by the object the goroutines wait on
	filter    *regexp.Regexp
	filterSrc string
	editing   bool
	input     string
	selected  int // index into the sorted, filtered rows
	offset    int // first row shown
	expanded  bool
	message   string
}

// apply changes the view for one key; page is the number of rows a page
// scrolls. It reports whether the key quits.
func (v *topView) apply(k topKey, page int) (quit bool) {
	if v.editing {
		switch k.action {
		case actEnter:
			v.editing = false
			re, err := regexp.Compile(v.input)
			if err != nil {
				v.message = "bad filter: " + err.Error()
				break
			}
			v.filter, v.filterSrc, v.selected, v.offset = re, v.input, 0, 0
			if v.input == "" {
				v.filter = nil
			}
		case actEscape:
			v.editing = false
		case actBackspace:
			if len(v.input) > 0 {
				v.input = v.input[:len(v.input)-1]
			}
		default:
			if k.char != 0 {
				v.input += string(k.char)
			}
		}
		return false
	}
	page = max(page, 1)
	switch k.action {
	case actQuit:
		return true
	case actSortCount, actSortWait, actSortP99:
		v.sortBy = map[topAction]byte{actSortCount: 'c', actSortWait: 'w', actSortP99: 'p'}[k.action]
		v.selected, v.offset = 0, 0
	case actFilter:
		v.editing, v.input = true, ""
	case actDown:
		v.selected++
	case actUp:
		v.selected--
	case actPageDown:
		v.selected += page
	case actPageUp:
		v.selected -= page
	case actHome:
		v.selected = 0
	case actEnd:
		v.selected = 1 << 30 // clamped by renderTop
	case actToggle, actEnter:
		v.expanded = !v.expanded
	case actGroupObjects:
		v.byObject = !v.byObject
		v.selected, v.offset, v.expanded = 0, 0, false
	}
	v.selected = max(v.selected, 0)
	return false
}

// topRow is one group on the screen, with its function's latencies.
type topRow struct {
	g *measure.Group
	h *trace.Histogram
}

// groupLocation renders a group's FUNCTION column: function file:line.
func groupLocation(g *measure.Group) string {
	if g.At.Function == "" {
		return "?"
	}
	return fmt.Sprintf("%s %s:%d", g.At.Function, inspect.ShortPath(g.At.File), g.At.Line)
}

// topRows filters and sorts the groups as the view asks.
func topRows(groups []*measure.Group, hist func(string) *trace.Histogram, v *topView) []topRow {
	var rows []topRow
	for _, g := range groups {
		if v.filter != nil && !v.filter.MatchString(g.State+" "+groupLocation(g)+" "+g.WaitingOn) {
			continue
		}
		rows = append(rows, topRow{g: g, h: hist(g.Function)})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch v.sortBy {
		case 'w':
			return a.g.MaxWait > b.g.MaxWait
		case 'p':
			return p99(a.h) > p99(b.h)
		}
		return len(a.g.Goroutines) > len(b.g.Goroutines)
	})
	return rows
}

// topScreen is what renderTop needs besides the view.
type topScreen struct {
	snap   *inspect.Snapshot
	groups []*measure.Group
	hist   func(function string) *trace.Histogram
	mostly func(function string) *measure.Part // nil without --why
	// sampled returns, for a function traced in sampling windows, the
	// share of the time they covered, else 0 (nil: none is).
	sampled       func(function string) float64
	traceErr      string
	traceWarnings []string // the kernel features the trace works without
	width, height int
	now           time.Time
}

// mostlyWidth is the MOSTLY column's width: "sync.RWMutex.RLock 100%".
const mostlyWidth = 24

// selectedMark starts the selected row (besides reverse video), so that it
// is visible in a plain capture of the screen too.
const selectedMark = ">"

// renderTop returns the screen's lines, at most height of them, each at
// most width display columns, the selected row in reverse video. It clamps
// the selection to the rows and scrolls so that the selected row (and its
// expansion, as far as it fits) is on screen, saying how many rows are
// hidden above and below.
func renderTop(sc topScreen, v *topView) []string {
	width, height := max(sc.width, 20), max(sc.height, 6)
	rows := topRows(sc.groups, sc.hist, v)
	v.selected = min(v.selected, max(len(rows)-1, 0))

	total := 0
	for _, g := range sc.snap.Goroutines {
		if !g.System {
			total++
		}
	}
	sortName := map[byte]string{'c': "count", 'w': "wait", 'p': "p99"}[v.sortBy]
	groupBy := "function"
	if v.byObject {
		groupBy = "object"
	}
	head := []string{fmt.Sprintf("gi top - pid %s (%s) - %d goroutines - paused %v - %s - sort: %s - by %s",
		pidText(sc.snap.PID, sc.snap.NSPid), sc.snap.GoVersion, total, sc.snap.Pause.Round(10*time.Microsecond), sc.now.Format("15:04:05"), sortName, groupBy)}
	filter := "filter: " + v.filterSrc
	if v.editing {
		filter = "filter: /" + v.input + "_"
	}
	head = append(head, "keys: c w p sort  o group by object  / filter  j k PgUp PgDn move  Enter expand  q quit   "+filter)
	if sc.traceErr != "" {
		head = append(head, "trace: "+sc.traceErr)
	}
	for _, w := range sc.traceWarnings {
		head = append(head, "trace: warning: "+w)
	}
	if v.message != "" {
		head = append(head, v.message)
	}
	// MOSTLY (--why) after P99: the other columns keep their places.
	mostlyHead := ""
	if sc.mostly != nil {
		mostlyHead = fmt.Sprintf("  %-*s", mostlyWidth, "MOSTLY")
	}
	head = append(head, fmt.Sprintf("  %6s  %-22s %8s %8s %9s %9s%s  %-40s  %s", "COUNT", "STATE", "MAXWAIT", "CALLS", "P50", "P99", mostlyHead, "FUNCTION", "WAITING ON"))

	// Room for rows: the height less the header and the two indicator lines.
	room := max(height-len(head)-2, 1)
	var expansion []string
	if v.expanded && len(rows) > 0 {
		expansion = expandGroup(sc.snap, rows[v.selected].g, max(room-1, 1))
	}
	// The window [offset, offset+fit) must hold the selected row and, if
	// it fits, its expansion.
	fit := max(room-len(expansion), 1)
	if v.selected < v.offset {
		v.offset = v.selected
	}
	if v.selected >= v.offset+fit {
		v.offset = v.selected - fit + 1
	}
	v.offset = max(min(v.offset, len(rows)-fit), 0)

	lines := head
	if v.offset > 0 {
		lines = append(lines, fmt.Sprintf("  ↑ %d more", v.offset))
	} else {
		lines = append(lines, "")
	}
	shown := 0
	for i := v.offset; i < len(rows) && shown < fit; i++ {
		r := rows[i]
		calls, p50s, p99s := "", "", ""
		if r.h != nil {
			calls = strconv.FormatUint(r.h.Count(), 10)
			if sc.sampled != nil {
				if share := sc.sampled(r.g.Function); share > 0 {
					calls = fmt.Sprintf("~%.0f", float64(r.h.Count())/share)
				}
			}
			p50s, p99s = formatLatency(r.h.Quantile(0.5)), formatLatency(r.h.Quantile(0.99))
		}
		mark := " "
		if i == v.selected {
			mark = selectedMark
		}
		mostly := ""
		if sc.mostly != nil {
			text := ""
			if p := sc.mostly(r.g.Function); p != nil && r.g.Function != "" {
				text = p.String()
			}
			mostly = fmt.Sprintf("  %-*s", mostlyWidth, clipWidth(text, mostlyWidth))
		}
		line := fmt.Sprintf("%s %6d  %-22s %8s %8s %9s %9s%s  %-40s  %s", mark, len(r.g.Goroutines), clipWidth(r.g.State, 22),
			formatWait(r.g.MaxWait, r.g.MaxWait > 0), calls, p50s, p99s, mostly, clipWidth(groupLocation(r.g), 40), r.g.WaitingOn)
		line = clipWidth(line, width)
		if i == v.selected {
			line = reverseOn + line + styleOff
		}
		lines = append(lines, line)
		shown++
		if i == v.selected {
			for _, e := range expansion {
				lines = append(lines, clipWidth(e, width))
			}
		}
	}
	if below := len(rows) - v.offset - shown; below > 0 {
		lines = append(lines, fmt.Sprintf("  ↓ %d more", below))
	}
	for i, l := range lines[:len(head)] {
		lines[i] = clipWidth(l, width)
	}
	if len(lines) > height {
		lines = lines[:height]
	}
	return lines
}

// clipWidth cuts s to at most n display columns, never inside a UTF-8
// sequence (`µs` survives) and counting wide runes as two.
func clipWidth(s string, n int) string {
	if runewidth.StringWidth(s) <= n {
		return s
	}
	return runewidth.Truncate(s, n, "")
}

// expandGroup lists a group's goroutines and the stack of the first, in at
// most limit lines.
func expandGroup(snap *inspect.Snapshot, g *measure.Group, limit int) []string {
	var ids []string
	for i, gr := range g.Goroutines {
		if i == 20 {
			ids = append(ids, fmt.Sprintf("+%d more", len(g.Goroutines)-20))
			break
		}
		ids = append(ids, strconv.FormatUint(gr.ID, 10))
	}
	out := []string{"          goroutines " + strings.Join(ids, ", ")}
	if limit <= 1 {
		return out
	}
	var sb strings.Builder
	inspect.WriteDump(&sb, snap, g.Goroutines[:1], false)
	for _, l := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		if len(out) >= limit-1 {
			out = append(out, "          ...")
			break
		}
		out = append(out, "          "+strings.ReplaceAll(l, "\t", "    "))
	}
	return out
}

func p99(h *trace.Histogram) time.Duration {
	if h == nil {
		return -1
	}
	return h.Quantile(0.99)
}
