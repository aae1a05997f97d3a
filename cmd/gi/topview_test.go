package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/trace"
)

func actions(keys []topKey) []topAction {
	out := make([]topAction, len(keys))
	for i, k := range keys {
		out[i] = k.action
	}
	return out
}

func TestKeyDecoder(t *testing.T) {
	for _, c := range []struct {
		name  string
		reads []string
		want  []topAction
	}{
		{"commands", []string{"qcwp/jkeg"}, []topAction{actQuit, actSortCount, actSortWait, actSortP99, actFilter, actDown, actUp, actToggle, actHome}},
		{"arrows", []string{"\x1b[A\x1b[B\x1bOA\x1bOB"}, []topAction{actUp, actDown, actUp, actDown}},
		{"pages, home, end", []string{"\x1b[5~\x1b[6~\x1b[H\x1b[F\x1b[1~\x1b[4~"}, []topAction{actPageUp, actPageDown, actHome, actEnd, actHome, actEnd}},
		{"split after ESC", []string{"j\x1b", "[B"}, []topAction{actDown, actDown}},
		{"split inside", []string{"\x1b[", "6", "~k"}, []topAction{actPageDown, actUp}},
		{"unknown sequence dropped", []string{"\x1b[Zj"}, []topAction{actDown}},
		{"ESC then a key", []string{"\x1bx"}, []topAction{actEscape, actChar}},
		{"enter, backspace, ctrl-c", []string{"\r\x7f\x03"}, []topAction{actEnter, actBackspace, actQuit}},
	} {
		var d keyDecoder
		var got []topAction
		for _, r := range c.reads {
			got = append(got, actions(d.Feed([]byte(r)))...)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || d.Pending() {
			t.Errorf("%s: %v (pending %v), want %v", c.name, got, d.Pending(), c.want)
		}
	}
	var d keyDecoder
	if keys := d.Feed([]byte{0x1b}); len(keys) != 0 || !d.Pending() {
		t.Fatalf("a lone ESC decoded at once: %v", keys)
	}
	if keys := d.Flush(); len(keys) != 1 || keys[0].action != actEscape || d.Pending() {
		t.Errorf("Flush after a lone ESC: %v", keys)
	}
}

func TestFilterPromptTypesCommandLetters(t *testing.T) {
	v := &topView{sortBy: 'c'}
	var d keyDecoder
	for _, k := range d.Feed([]byte("/handle|worker\x7fr\r")) {
		if v.apply(k, 10) {
			t.Fatal("quit while typing")
		}
	}
	if v.filterSrc != "handle|worker" || v.filter == nil || v.editing {
		t.Errorf("filter %q (%v), editing %v", v.filterSrc, v.filter, v.editing)
	}
	v.apply(topKey{action: actFilter}, 10)
	v.apply(topKey{action: actChar, char: 'x'}, 10)
	v.apply(topKey{action: actEscape}, 10)
	if v.editing || v.filterSrc != "handle|worker" {
		t.Errorf("Escape should leave the prompt and keep the filter: %q, editing %v", v.filterSrc, v.editing)
	}
}

// topFixture is n groups whose counts, waits and p99s are known: group i
// has n-i goroutines, waits i seconds, and its function's p99 is i ms.
func topFixture(n int) (*inspect.Snapshot, []*measure.Group, func(string) *trace.Histogram) {
	snap := &inspect.Snapshot{PID: 7, NSPid: 7, GoVersion: "go1.27.4"}
	var groups []*measure.Group
	hists := map[string]*trace.Histogram{}
	id := uint64(1)
	for i := 0; i < n; i++ {
		fn := fmt.Sprintf("main.f%d", i)
		g := &measure.Group{State: "chan receive", Function: fn, At: inspect.Frame{Function: fn, File: "/src/main.go", Line: i + 1}, MaxWait: time.Duration(i) * time.Second}
		for j := 0; j < n-i; j++ {
			gr := &inspect.Goroutine{ID: id, State: "chan receive", Status: "waiting",
				Frames: []inspect.Frame{{Function: fn, File: "/src/main.go", Line: i + 1, PC: 0x10}}}
			id++
			g.Goroutines = append(g.Goroutines, gr)
			snap.Goroutines = append(snap.Goroutines, gr)
		}
		h := &trace.Histogram{}
		h.Record(time.Duration(i+1) * time.Millisecond)
		hists[fn] = h
		groups = append(groups, g)
	}
	return snap, groups, func(f string) *trace.Histogram { return hists[f] }
}

var rowFunction = regexp.MustCompile(`main\.f(\d+) \S*main\.go`)

// screenRows returns the function number of each row on the screen, and
// the selected one (-1 if not shown).
func screenRows(t *testing.T, lines []string) (rows []int, selected int) {
	t.Helper()
	selected = -1
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "goroutine ") || strings.HasPrefix(l, "          ") {
			continue // an expansion
		}
		m := rowFunction.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var n int
		fmt.Sscan(m[1], &n)
		if strings.HasPrefix(l, reverseOn+selectedMark) {
			selected = n
		}
		rows = append(rows, n)
	}
	return rows, selected
}

func TestTopScrolling(t *testing.T) {
	snap, groups, hist := topFixture(100)
	const height = 20
	sc := topScreen{snap: snap, groups: groups, hist: hist, width: 120, height: height, now: time.Unix(0, 0)}
	v := &topView{sortBy: 'c'}
	render := func() []string {
		lines := renderTop(sc, v)
		if len(lines) > height {
			t.Fatalf("%d lines on a %d-line screen", len(lines), height)
		}
		return lines
	}
	check := func(what string, want int) []string {
		t.Helper()
		lines := render()
		rows, sel := screenRows(t, lines)
		if sel != want {
			t.Fatalf("%s: selected row %d on screen (rows %v), want %d:\n%s", what, sel, rows, want, strings.Join(lines, "\n"))
		}
		return lines
	}
	lines := check("start", 0)
	if !strings.Contains(strings.Join(lines, "\n"), "↓ ") || strings.Contains(strings.Join(lines, "\n"), "↑ ") {
		t.Errorf("at the top: want only a 'more below' line:\n%s", strings.Join(lines, "\n"))
	}
	for i := 0; i < 30; i++ {
		v.apply(topKey{action: actDown}, height/2)
	}
	lines = check("30 down", 30)
	if !strings.Contains(strings.Join(lines, "\n"), "↑ ") {
		t.Errorf("scrolled: no 'more above' line")
	}
	v.apply(topKey{action: actPageDown}, height/2)
	check("page down", 40)
	v.apply(topKey{action: actEnd}, height/2)
	lines = check("end", 99)
	if strings.Contains(strings.Join(lines, "\n"), "↓ ") {
		t.Errorf("at the end: a 'more below' line")
	}
	v.apply(topKey{action: actDown}, height/2)
	check("down at the end", 99)
	v.apply(topKey{action: actPageUp}, height/2)
	check("page up", 89)
	v.apply(topKey{action: actToggle}, height/2)
	lines = check("expanded", 89)
	joined := strings.Join(lines, "\n")
	if !strings.Contains(joined, "goroutines ") || !strings.Contains(joined, "main.f89(...)") {
		t.Errorf("expanded group 89 shows no goroutines or stack:\n%s", joined)
	}
	v.apply(topKey{action: actHome}, height/2)
	check("home", 0)
	v.apply(topKey{action: actUp}, height/2)
	check("up at the top", 0)
}

func TestTopSortAndFilter(t *testing.T) {
	snap, groups, hist := topFixture(12)
	sc := topScreen{snap: snap, groups: groups, hist: hist, width: 120, height: 40, now: time.Unix(0, 0)}
	for _, c := range []struct {
		key   topAction
		first int
	}{{actSortCount, 0}, {actSortWait, 11}, {actSortP99, 11}} {
		v := &topView{sortBy: 'c'}
		v.apply(topKey{action: c.key}, 10)
		rows, _ := screenRows(t, renderTop(sc, v))
		if len(rows) != 12 || rows[0] != c.first {
			t.Errorf("sort %v: rows %v, want 12 starting with %d", c.key, rows, c.first)
		}
		for i := 1; i < len(rows); i++ {
			if (c.key == actSortCount) != (rows[i] > rows[i-1]) {
				t.Errorf("sort %v: rows %v out of order", c.key, rows)
				break
			}
		}
	}
	v := &topView{sortBy: 'c', filter: regexp.MustCompile(`main\.f1\d? `)}
	rows, _ := screenRows(t, renderTop(sc, v))
	if fmt.Sprint(rows) != "[1 10 11]" {
		t.Errorf("filter main.f1x: rows %v, want [1 10 11]", rows)
	}
}

func TestClipWidth(t *testing.T) {
	s := "     4  chan receive      12.3µs  main.handle 日本 lockserver/main.go:48"
	for n := 0; n <= len(s)+2; n++ {
		c := clipWidth(s, n)
		if !utf8.ValidString(c) || !strings.HasPrefix(s, c) {
			t.Fatalf("clipWidth(%d) = %q: not a valid prefix", n, c)
		}
		if w := displayWidth(c); w > n {
			t.Fatalf("clipWidth(%d) = %q is %d columns wide", n, c, w)
		}
	}
	if got := clipWidth("1.2µs", 5); got != "1.2µs" {
		t.Errorf("clipWidth(1.2µs, 5) = %q: µ is one column", got)
	}
}

// displayWidth counts columns independently of runewidth: wide CJK runes
// count two.
func displayWidth(s string) int {
	w := 0
	for _, r := range s {
		if r >= 0x3000 && r <= 0x9fff {
			w += 2
		} else {
			w++
		}
	}
	return w
}

// TestTopGroupByObjectKey checks that 'o' switches the grouping, resets
// the selection, says so in the header and shows the WAITING ON column.
func TestTopGroupByObjectKey(t *testing.T) {
	snap, groups, hist := topFixture(3)
	groups[0].WaitingOn = "mutex main.slowMu (locked, 4 waiters)"
	sc := topScreen{snap: snap, groups: groups, hist: hist, width: 200, height: 40, now: time.Unix(0, 0)}
	v := &topView{sortBy: 'c', selected: 2}
	var d keyDecoder
	for _, k := range d.Feed([]byte("o")) {
		v.apply(k, 10)
	}
	if !v.byObject || v.selected != 0 {
		t.Fatalf("after 'o': byObject %v, selected %d", v.byObject, v.selected)
	}
	screen := strings.Join(renderTop(sc, v), "\n")
	if !strings.Contains(screen, "by object") || !strings.Contains(screen, "WAITING ON") || !strings.Contains(screen, "mutex main.slowMu (locked, 4 waiters)") {
		t.Errorf("screen after 'o':\n%s", screen)
	}
	for _, k := range d.Feed([]byte("o")) {
		v.apply(k, 10)
	}
	if v.byObject || !strings.Contains(strings.Join(renderTop(sc, v), "\n"), "by function") {
		t.Error("a second 'o' does not group by function again")
	}
}

// TestTopMostlyColumn checks gi top --why's MOSTLY column: the dominant
// part of each row's function, blank where none of its calls was split,
// and the other columns where they were (the sorts read them there).
func TestTopMostlyColumn(t *testing.T) {
	snap, groups, hist := topFixture(3)
	mostly := map[string]*measure.Part{
		"main.f0": {Part: "sync.Mutex.Lock", Share: 0.8333},
		"main.f2": {Part: "on CPU", Share: 1},
	}
	sc := topScreen{snap: snap, groups: groups, hist: hist, width: 200, height: 40, now: time.Unix(0, 0),
		mostly: func(f string) *measure.Part { return mostly[f] }}
	plain := sc
	plain.mostly = nil
	v := &topView{sortBy: 'c'}
	withWhy, without := renderTop(sc, v), renderTop(plain, v)
	header := func(lines []string) string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "COUNT") {
				return l
			}
		}
		t.Fatalf("no header:\n%s", strings.Join(lines, "\n"))
		return ""
	}
	h, hp := header(withWhy), header(without)
	if !strings.Contains(h, "MOSTLY") || strings.Contains(hp, "MOSTLY") {
		t.Errorf("MOSTLY in the header with --why %q, without %q", h, hp)
	}
	if strings.Index(h, "P99") != strings.Index(hp, "P99") || strings.Index(h, "MOSTLY") < strings.Index(h, "P99") {
		t.Errorf("MOSTLY moved the columns before it, or is not after P99:\n%s\n%s", h, hp)
	}
	want := map[string]string{"main.f0": "sync.Mutex.Lock 83%", "main.f1": "", "main.f2": "on CPU 100%"}
	col := strings.Index(h, "MOSTLY")
	rows := 0
	for _, l := range withWhy {
		m := rowFunction.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		rows++
		l = strings.TrimPrefix(l, reverseOn) // the selected row
		fn := "main.f" + m[1]
		if got := strings.TrimSpace(l[col : col+mostlyWidth]); got != want[fn] {
			t.Errorf("%s: MOSTLY %q, want %q:\n%s", fn, got, want[fn], l)
		}
	}
	if rows != 3 {
		t.Errorf("%d rows, want 3:\n%s", rows, strings.Join(withWhy, "\n"))
	}
}
