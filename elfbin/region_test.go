package elfbin

import "testing"

// TestRegionHolds: addresses from corrupt relocations near the top of the
// address space must not wrap around the bounds check.
func TestRegionHolds(t *testing.T) {
	r := region{addr: 0x1000, data: make([]byte, 0x100)}
	for _, c := range []struct {
		addr, size uint64
		want       bool
	}{
		{0x1000, 0x100, true}, {0x10f8, 8, true}, {0x10f9, 8, false}, {0xfff, 8, false},
		{0xffff_ffff_ffff_fff8, 0x90, false}, {0x1000, ^uint64(0), false}, {0x1100, 0, true},
	} {
		if got := r.holds(c.addr, c.size); got != c.want {
			t.Errorf("holds(%#x, %#x) = %v, want %v", c.addr, c.size, got, c.want)
		}
	}
}
