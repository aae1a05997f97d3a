package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-runewidth"
	"golang.org/x/sys/unix"
)

// listing renders gi ps's tables: left-aligned columns, each cell padded
// with one space on either side, as the tablewriter configuration of
// newTable prints them (TestListingMatchesTablewriter holds them equal),
// no line ending in spaces. gi ps lists one row per goroutine, and
// tablewriter takes about 70 µs a row (7 s for 100k goroutines, against
// a goal of 1 s for the whole run); this takes about a microsecond:
// measure the columns, then write. Given a width (a terminal's), it
// shortens the cells of the columns it may (Shrink) with "…" until each
// line fits.
type listing struct {
	w      io.Writer
	header []string
	rows   [][]string
	width  int   // columns a line may take, 0 for any
	shrink []int // the columns that may be shortened, first shortened first
	// fromLeft are the shrinkable columns shortened at their start, so
	// that a function's package path goes before its name; right the
	// columns aligned right (numbers), their header too.
	fromLeft map[int]bool
	right    map[int]bool
}

// newListing returns a listing on w, as wide as the terminal w is (none
// if w is not one, or with --wide).
func newListing(w io.Writer) *listing { return &listing{w: w, width: terminalWidth(w)} }

// wideOutput is --wide: the cells are never shortened to fit a terminal.
var wideOutput bool

// terminalWidth returns the columns of the terminal w writes to, 0 if it
// writes to none (a pipe, a file) or --wide was given.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || wideOutput {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0
	}
	return int(ws.Col)
}

// Header sets the column names.
func (l *listing) Header(cols ...any) {
	l.header = make([]string, len(cols))
	for i, c := range cols {
		l.header[i] = fmt.Sprint(c)
	}
}

// Shrink names the columns whose cells may be shortened to fit the width,
// the first shortened first.
func (l *listing) Shrink(cols ...string) {
	for _, name := range cols {
		for i, h := range l.header {
			if h == name {
				l.shrink = append(l.shrink, i)
			}
		}
	}
}

// ShrinkLeft names columns whose cells may be shortened at their start
// ("…caddyhttp.(*Server).ServeHTTP"), after those Shrink names.
func (l *listing) ShrinkLeft(cols ...string) {
	n := len(l.shrink)
	l.Shrink(cols...)
	if l.fromLeft == nil {
		l.fromLeft = map[int]bool{}
	}
	for _, i := range l.shrink[n:] {
		l.fromLeft[i] = true
	}
}

// AlignRight names the columns aligned right.
func (l *listing) AlignRight(cols ...string) {
	if l.right == nil {
		l.right = map[int]bool{}
	}
	for _, name := range cols {
		for i, h := range l.header {
			if h == name {
				l.right[i] = true
			}
		}
	}
}

// Append adds a row.
func (l *listing) Append(row []string) error {
	l.rows = append(l.rows, row)
	return nil
}

// minShrunk is the fewest columns a shortened column keeps, unless its
// header is wider.
const minShrunk = 6

// Render writes the header and the rows.
func (l *listing) Render() error {
	widths := make([]int, len(l.header))
	measure := func(row []string) {
		for i, c := range row {
			if i < len(widths) {
				widths[i] = max(widths[i], cellWidth(c))
			}
		}
	}
	measure(l.header)
	for _, r := range l.rows {
		measure(r)
	}
	l.fit(widths)
	bw := bufio.NewWriterSize(l.w, 1<<16)
	var line []byte
	write := func(row []string) {
		line = line[:0]
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			if n := cellWidth(c); n > widths[i] {
				if l.fromLeft[i] {
					c = runewidth.TruncateLeft(c, n-widths[i]+1, "…")
				} else {
					c = runewidth.Truncate(c, widths[i], "…")
				}
			}
			pad := widths[i] - cellWidth(c)
			line = append(line, ' ')
			if l.right[i] {
				line = appendSpaces(line, pad)
				pad = 0
			}
			line = append(line, c...)
			line = appendSpaces(line, pad+1)
		}
		bw.Write(trimRight(line))
		bw.WriteByte('\n')
	}
	write(l.header)
	for _, r := range l.rows {
		write(r)
	}
	return bw.Flush()
}

// fit narrows the shrinkable columns of widths until a line takes no
// more than the listing's width (each cell takes its width and two
// spaces, the last cell's trailing space left out): a column at a time,
// the widest first (the first named by Shrink among equals), never below
// its header's width (minShrunk at least).
func (l *listing) fit(widths []int) {
	if l.width <= 0 || len(l.shrink) == 0 {
		return
	}
	total := -1
	for _, w := range widths {
		total += w + 2
	}
	floor := make(map[int]int, len(l.shrink))
	for _, i := range l.shrink {
		floor[i] = max(minShrunk, cellWidth(l.header[i]))
	}
	for total > l.width {
		widest := -1
		for _, i := range l.shrink {
			if widths[i] > floor[i] && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return // every shrinkable column at its floor
		}
		// Down to the next widest, or what is left to cut.
		next := floor[widest]
		for _, i := range l.shrink {
			if i != widest && widths[i] < widths[widest] {
				next = max(next, widths[i])
			}
		}
		cut := max(1, min(total-l.width, widths[widest]-next))
		widths[widest] -= cut
		total -= cut
	}
}

// appendSpaces appends n spaces to b.
func appendSpaces(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

// trimRight returns b without its trailing spaces.
func trimRight(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// cellWidth is the terminal columns s takes: its length when it is
// ASCII (nearly every cell: function names, states), else what runewidth
// says.
func cellWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return runewidth.StringWidth(s)
		}
	}
	return len(s)
}

// trimWriter writes what it is given with the spaces that end each line
// left out: tablewriter pads every cell, the last too.
type trimWriter struct {
	w       io.Writer
	pending int // spaces held back, written if more than spaces follows
}

func (t *trimWriter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+t.pending)
	for _, c := range p {
		switch c {
		case ' ':
			t.pending++
			continue
		case '\n':
			t.pending = 0
		default:
			for ; t.pending > 0; t.pending-- {
				out = append(out, ' ')
			}
		}
		out = append(out, c)
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
