package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"
)

// listing renders gi ps's tables: left-aligned columns, each cell padded
// with one space on either side, as the tablewriter configuration of
// newTable prints them (TestListingMatchesTablewriter holds them equal).
// gi ps lists one row per goroutine, and tablewriter takes about 70 µs a
// row (7 s for 100k goroutines, against a goal of 1 s for the whole run);
// this takes about a microsecond: measure the columns, then write.
type listing struct {
	w      io.Writer
	header []string
	rows   [][]string
}

func newListing(w io.Writer) *listing { return &listing{w: w} }

// Header sets the column names.
func (l *listing) Header(cols ...any) {
	l.header = make([]string, len(cols))
	for i, c := range cols {
		l.header[i] = fmt.Sprint(c)
	}
}

// Append adds a row.
func (l *listing) Append(row []string) error {
	l.rows = append(l.rows, row)
	return nil
}

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
	bw := bufio.NewWriterSize(l.w, 1<<16)
	write := func(row []string) {
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			bw.WriteByte(' ')
			bw.WriteString(c)
			bw.WriteString(strings.Repeat(" ", widths[i]-cellWidth(c)+1))
		}
		bw.WriteByte('\n')
	}
	write(l.header)
	for _, r := range l.rows {
		write(r)
	}
	return bw.Flush()
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
