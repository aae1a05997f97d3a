package heap

import "testing"

// TestSpanSlots checks the runtime's allocation rule on a span of 10
// slots of 48 bytes: below the free index every slot is allocated, above
// it those whose bit is set; an address maps to its slot's start.
func TestSpanSlots(t *testing.T) {
	s := Span{Start: 0x10000, Pages: 1, ElemSize: 48, NElems: 10, freeIndex: 3, allocBits: []byte{0b0010_0001, 0b10}}
	want := []bool{true, true, true, false, false, true, false, false, false, true}
	for i, w := range want {
		if s.Allocated(i) != w {
			t.Errorf("slot %d allocated %v, want %v", i, s.Allocated(i), w)
		}
	}
	if s.Allocated(-1) || s.Allocated(10) {
		t.Error("a slot outside the span is allocated")
	}
	if n := s.AllocatedCount(); n != 5 {
		t.Errorf("%d allocated, want 5", n)
	}
	if slot, start, ok := s.Object(0x10000 + 48*5 + 7); !ok || slot != 5 || start != 0x10000+48*5 {
		t.Errorf("Object: slot %d at %#x, %v", slot, start, ok)
	}
	if _, _, ok := s.Object(0x10000 + 48*10); ok {
		t.Error("an address past the last slot is in one")
	}
	h := &Heap{Spans: []Span{s, {Start: 0x20000, Pages: 2}}, PageSize: 8192}
	for addr, want := range map[uint64]uint64{0x10000: 0x10000, 0x11fff: 0x10000, 0x20000 + 16383: 0x20000} {
		if got, ok := h.SpanOf(addr); !ok || got.Start != want {
			t.Errorf("SpanOf(%#x) = %+v, %v; want the span at %#x", addr, got, ok, want)
		}
	}
	for _, addr := range []uint64{0xffff, 0x12000, 0x24000} {
		if got, ok := h.SpanOf(addr); ok {
			t.Errorf("SpanOf(%#x) = %+v: in no span", addr, got)
		}
	}
}
