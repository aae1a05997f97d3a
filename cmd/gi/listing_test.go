package main

import (
	"bytes"
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
