package funcargs

import (
	"fmt"
	"testing"
)

// TestMatchABI checks the rules by which DWARF's places for an argument on
// the entry path are checked against the register ABI's, each with the
// shapes Go's DWARF was seen to take (caddy v2.8.4, Go 1.26), and that a
// real disagreement is refused rather than guessed.
func TestMatchABI(t *testing.T) {
	const cfa = 8
	reg := func(r uint64, size, at int64) Piece { return Piece{Reg: r, Size: size, ValueOffset: at} }
	stack := func(off, size, at int64) Piece { return Piece{Stack: true, Offset: off, Size: size, ValueOffset: at} }
	slice := []Piece{reg(0, 8, 0), reg(3, 8, 8), reg(2, 8, 16)}
	onStack := []Piece{stack(0, 24, 0)} // CFA-relative, as ABILocations gives it
	for _, tc := range []struct {
		name  string
		dwarf []Piece
		abi   []Piece
		size  int64
		want  []Piece // nil: refused
	}{
		{"same registers", slice, slice, 24, slice},
		{"a piece DWARF marks missing (an unused capacity)",
			[]Piece{reg(0, 8, 0), reg(3, 8, 8), {Missing: true, Size: 8, ValueOffset: 16}}, slice, 24, slice},
		{"a value on the stack, one piece per word",
			[]Piece{stack(8, 8, 0), stack(16, 8, 8), stack(24, 8, 16)}, onStack, 24, []Piece{stack(8, 24, 0)}},
		{"a value on the stack described in part (pointer and length)",
			[]Piece{stack(8, 8, 0), stack(16, 8, 8)}, onStack, 24, []Piece{stack(8, 24, 0)}},
		{"the spill slot named for a value passed in registers",
			[]Piece{stack(112, 24, 0)}, slice, 24, slice},
		{"other registers", []Piece{reg(0, 8, 0), reg(2, 8, 8), reg(3, 8, 16)}, slice, 24, nil},
		{"registers where the ABI has the stack", slice, onStack, 24, nil},
		{"another stack slot", []Piece{stack(16, 8, 0), stack(24, 8, 8)}, onStack, 24, nil},
		{"part of the value in one stack slot", []Piece{stack(112, 8, 0)}, slice, 24, nil},
		{"fewer pieces than the ABI", []Piece{reg(0, 8, 0)}, slice, 24, nil},
	} {
		got, err := matchABI(tc.dwarf, tc.abi, tc.size, cfa)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: accepted as %+v, want refused", tc.name, got)
			}
			continue
		}
		if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
			t.Errorf("%s: got %+v (%v), want %+v", tc.name, got, err, tc.want)
		}
	}
}
