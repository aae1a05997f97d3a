package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestListingMatchesTablewriter renders the same rows with the listing and
// with the tablewriter table gi used before: byte for byte the same,
// wide and multi-byte runes included.
func TestListingMatchesTablewriter(t *testing.T) {
	header := []any{"GOID", "STATE", "WAIT", "WAITING ON"}
	rows := [][]string{
		{"1", "sleep", "", "sleep, wakes in 58m4s"},
		{"18", "chan receive", "1.5µs", "chan 0xc000123 (unbuffered, 3 receivers, 0 senders)"},
		{"21", "IO wait", "4m03s", "tcp 127.0.0.1:57862 → 127.0.0.1:39609 fd 7 (read)"},
		{"22", "", "", ""},
		{"100000", "select", "12h", "世界 wide"},
	}
	var a, b bytes.Buffer
	l, tw := newListing(&a), newTable(&b)
	l.Header(header...)
	tw.Header(header...)
	for _, r := range rows {
		l.Append(r)
		if err := tw.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Render(); err != nil {
		t.Fatal(err)
	}
	if err := tw.Render(); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("listing:\n%q\ntablewriter:\n%q", a.String(), b.String())
	}
}

// TestListingFits shortens the shrinkable columns of a listing to a
// width, the first first, with "…", never below their floor; no line
// ends in spaces; without a width nothing is shortened.
func TestListingFits(t *testing.T) {
	rows := [][]string{
		{"1", "select", "main.main", "demo/main.go:120", strings.Repeat("chan 0xc000123000 (unbuffered, 2 receivers, 0 senders); ", 4)},
		{"18", "sync.Mutex.Lock", "main.handle", "demo/main.go:88", "mutex main.slowMu (locked, 3 waiters)"},
		{"7", "IO wait", "main.serve", "demo/main.go:71", ""},
	}
	render := func(width int) []string {
		var b bytes.Buffer
		l := newListing(&b)
		l.width = width
		l.Header("GOID", "STATE", "FUNCTION", "LOCATION", "WAITING ON")
		l.Shrink("WAITING ON", "LOCATION")
		for _, r := range rows {
			l.Append(r)
		}
		if err := l.Render(); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	}
	for _, width := range []int{80, 120, 200} {
		lines := render(width)
		if len(lines) != 4 {
			t.Fatalf("width %d: %d lines, want 4", width, len(lines))
		}
		for _, line := range lines {
			if n := cellWidth(line); n > width {
				t.Errorf("width %d: a line of %d columns: %q", width, n, line)
			}
			if strings.HasSuffix(line, " ") {
				t.Errorf("width %d: a line ends in a space: %q", width, line)
			}
		}
		if !strings.Contains(lines[1], "…") || !strings.Contains(lines[2], "mutex main.slowMu") {
			t.Errorf("width %d: the long cell is not shortened with …, or the short one is: %q", width, lines)
		}
	}
	whole := render(0)
	if !strings.Contains(whole[1], rows[0][4][:len(rows[0][4])-2]) {
		t.Errorf("without a width a cell was shortened: %q", whole[1])
	}
	// Too narrow for the floors: the shrinkable columns stop at theirs.
	if narrow := render(30); !strings.Contains(narrow[2], "mutex mai…") {
		t.Errorf("at 30 columns: %q", narrow)
	}
}

// TestListingRightAndFromLeft: numbers align right, as the tablewriter
// configuration gi used for them printed them, and a function column
// shortened from its start keeps the function's own name.
func TestListingRightAndFromLeft(t *testing.T) {
	rows := [][]string{
		{"github.com/caddyserver/caddy/v2/modules/caddyhttp.(*Server).ServeHTTP", "12", "1.5ms"},
		{"main.handle", "100000", "250µs"},
	}
	render := func(width int) []string {
		var b bytes.Buffer
		l := &listing{w: &b, width: width}
		l.Header("FUNCTION", "CALLS", "P99")
		l.AlignRight("CALLS", "P99")
		l.ShrinkLeft("FUNCTION")
		for _, r := range rows {
			l.Append(r)
		}
		if err := l.Render(); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	}
	whole := render(0)
	want := []string{
		" FUNCTION                                                                CALLS    P99",
		" github.com/caddyserver/caddy/v2/modules/caddyhttp.(*Server).ServeHTTP      12  1.5ms",
		" main.handle                                                            100000  250µs",
	}
	if strings.Join(whole, "\n") != strings.Join(want, "\n") {
		t.Errorf("unshortened:\n%s\nwant:\n%s", strings.Join(whole, "\n"), strings.Join(want, "\n"))
	}
	for _, width := range []int{40, 60} {
		lines := render(width)
		for _, line := range lines {
			if cellWidth(line) > width || strings.HasSuffix(line, " ") {
				t.Errorf("width %d: %q (%d columns)", width, line, cellWidth(line))
			}
		}
		if !strings.HasPrefix(strings.TrimSpace(lines[1]), "…") || !strings.Contains(lines[1], "ServeHTTP") {
			t.Errorf("width %d: the long name not shortened at its start: %q", width, lines[1])
		}
		if !strings.Contains(lines[2], "main.handle") || !strings.HasSuffix(lines[2], "100000  250µs") {
			t.Errorf("width %d: %q", width, lines[2])
		}
	}
}
