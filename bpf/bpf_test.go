package bpf

import (
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// TestEventLayout checks struct event of both compiled objects (amd64 and
// arm64) against the generated Event type, and that a disagreement is
// caught: decoding through Event would otherwise read wrong fields silently.
func TestEventLayout(t *testing.T) {
	for _, obj := range []string{"gi_x86_bpfel.o", "gi_arm64_bpfel.o"} {
		spec, err := ebpf.LoadCollectionSpec(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckEventLayout(spec); err != nil {
			t.Errorf("%s: %v", obj, err)
		}
	}
	if EventSize != 80 {
		t.Errorf("bpf.Event is %d bytes, struct event in gi.bpf.c is 80", EventSize)
	}
}

// TestEventLayoutMismatch shifts a member of struct event in a loaded spec
// and expects CheckEventLayout to name it.
func TestEventLayoutMismatch(t *testing.T) {
	spec, err := loadGi()
	if err != nil {
		t.Fatal(err)
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName("event", &st); err != nil {
		t.Fatal(err)
	}
	if err := checkEventStruct(st); err != nil {
		t.Fatalf("the real struct event: %v", err)
	}
	for i, m := range st.Members {
		if m.Name != "cookie" {
			continue
		}
		moved := btf.Copy(st).(*btf.Struct)
		moved.Members[i].Offset += 32
		if err := checkEventStruct(moved); err == nil || !strings.Contains(err.Error(), "cookie") {
			t.Errorf("a moved cookie member: %v", err)
		}
		return
	}
	t.Fatal("struct event has no cookie member")
}

// TestDecodeEvent decodes a record written field by field the way the C
// program lays it out.
func TestDecodeEvent(t *testing.T) {
	raw := make([]byte, EventSize+8)
	put := func(off int, v uint64, n int) {
		for i := 0; i < n; i++ {
			raw[off+i] = byte(v >> (8 * i))
		}
	}
	put(0, 111, 8)  // ts
	put(8, 7, 8)    // goid
	put(64, 42, 4)  // cookie
	put(68, 900, 4) // pid
	put(76, KindReturn, 1)
	var ev Event
	if !DecodeEvent(raw, &ev) || ev.Ts != 111 || ev.Goid != 7 || ev.Cookie != 42 || ev.Pid != 900 || ev.Kind != KindReturn {
		t.Errorf("decoded %+v", ev)
	}
	if DecodeEvent(raw[:EventSize-1], &ev) {
		t.Error("a short record decoded")
	}
}

// BenchmarkDecodeEvent decodes a record through the generated type, beside
// the field-by-field decoding at hand-written offsets it replaced (the
// baseline, measured in the same run).
func BenchmarkDecodeEvent(b *testing.B) {
	raw := make([]byte, EventSize)
	raw[0], raw[64], raw[76] = 1, 2, KindEntry
	var sink uint64
	b.Run("generated", func(b *testing.B) {
		var ev Event
		for range b.N {
			DecodeEvent(raw, &ev)
			sink += ev.Ts + uint64(ev.Cookie)
		}
	})
	b.Run("baseline-offsets", func(b *testing.B) {
		le := binary.LittleEndian
		for range b.N {
			ev := Event{Ts: le.Uint64(raw[0:]), Goid: le.Uint64(raw[8:]), G: le.Uint64(raw[16:]), Sp: le.Uint64(raw[24:]),
				StackHi: le.Uint64(raw[32:]), Caller: le.Uint64(raw[40:]), Gopc: le.Uint64(raw[48:]), Parent: le.Uint64(raw[56:]),
				Cookie: le.Uint32(raw[64:]), Pid: le.Uint32(raw[68:]), Tid: le.Uint32(raw[72:]), Kind: raw[76]}
			sink += ev.Ts + uint64(ev.Cookie)
		}
	})
	_ = sink
}

// TestPlanBounds checks the bounds written by hand in bpf.go against the
// generated types: the payload room of struct args_event is
// GI_ARG_BYTES + GI_DEREF_MAX + 16, and a plan's payload offsets fit the
// 16 bits of arg_op.out.
func TestPlanBounds(t *testing.T) {
	if n := len(ArgsEvent{}.Payload); n != PlanPayloadMax+DerefMax+16 {
		t.Errorf("struct args_event has %d bytes of payload, bpf.go's bounds say %d", n, PlanPayloadMax+DerefMax+16)
	}
	if int(unsafe.Offsetof(ArgsEvent{}.Payload)) != EventSize {
		t.Errorf("the payload starts at %d, after an event of %d bytes", unsafe.Offsetof(ArgsEvent{}.Payload), EventSize)
	}
	if PlanPayloadMax+DerefMax+16 >= 1<<16 || PlanOps != 32 || PlanFilters != 4 || FilterString != 32 {
		t.Errorf("plan bounds: %d ops, %d filters, %d-byte strings", PlanOps, PlanFilters, FilterString)
	}
}
