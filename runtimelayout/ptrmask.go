package runtimelayout

import (
	"debug/dwarf"
	"fmt"
)

// PointerMask says which words of a runtime structure hold pointers the
// garbage collector follows, from the structure's DWARF type: a walk of
// the heap that knows an object is one (a P, an M, a g) follows those
// words only, not the integers that merely look like pointers (a P's
// write barrier buffer and run queue hold stale addresses as uintptrs).
type PointerMask struct {
	// Size is the structure's size in bytes; Bits has bit i set when
	// word i holds a pointer.
	Size int64
	Bits []byte
}

// Pointer reports whether word i holds a pointer.
func (m PointerMask) Pointer(i int) bool {
	return i >= 0 && i/8 < len(m.Bits) && m.Bits[i/8]&(1<<(i%8)) != 0
}

// Known reports whether the mask was read (a binary whose DWARF or table
// has it).
func (m PointerMask) Known() bool { return m.Size > 0 }

// maxMaskedStruct bounds the structures masked: a P is about 10 KiB.
const maxMaskedStruct = 1 << 20

// pointerMask computes the mask of the struct named name.
func pointerMask(d *Debug, name string) (PointerMask, error) {
	st, err := d.Struct(name)
	if err != nil {
		return PointerMask{}, err
	}
	size := st.Size()
	if size <= 0 || size > maxMaskedStruct {
		return PointerMask{}, fmt.Errorf("%s: %d bytes", name, size)
	}
	m := PointerMask{Size: size, Bits: make([]byte, (size/8+7)/8)}
	memo := map[dwarf.Type]bool{}
	markPointers(st, 0, &m, memo, 0)
	return m, nil
}

// maxTypeDepth bounds the nesting markPointers follows.
const maxTypeDepth = 64

// markPointers sets the mask's bits of the pointer words of a value of
// type t at byte offset off. A type it cannot read (no size, too deep) is
// taken for pointers throughout: the walk then follows its words, which
// can only keep an object alive.
func markPointers(t dwarf.Type, off int64, m *PointerMask, memo map[dwarf.Type]bool, depth int) {
	set := func(o int64) {
		if o%8 == 0 && o >= 0 && o/8/8 < int64(len(m.Bits)) {
			m.Bits[o/64] |= 1 << (o / 8 % 8)
		}
	}
	if depth > maxTypeDepth {
		for o := off &^ 7; o < off+max(t.Size(), 8); o += 8 {
			set(o)
		}
		return
	}
	switch t := t.(type) {
	case *dwarf.TypedefType:
		markPointers(t.Type, off, m, memo, depth+1)
	case *dwarf.QualType:
		markPointers(t.Type, off, m, memo, depth+1)
	case *dwarf.PtrType, *dwarf.FuncType:
		set(off)
	case *dwarf.StructType:
		for _, f := range t.Field {
			markPointers(f.Type, off+f.ByteOffset, m, memo, depth+1)
		}
	case *dwarf.ArrayType:
		es := t.Type.Size()
		if t.Count <= 0 || es <= 0 || !hasPointers(t.Type, memo, depth+1) {
			return
		}
		for i := int64(0); i < t.Count; i++ {
			markPointers(t.Type, off+i*es, m, memo, depth+1)
		}
	case *dwarf.IntType, *dwarf.UintType, *dwarf.FloatType, *dwarf.ComplexType, *dwarf.BoolType, *dwarf.CharType, *dwarf.UcharType, *dwarf.EnumType:
	default:
		for o := off &^ 7; o < off+max(t.Size(), 8); o += 8 {
			set(o)
		}
	}
}

// hasPointers reports whether a value of type t holds a pointer (or a
// part markPointers cannot read).
func hasPointers(t dwarf.Type, memo map[dwarf.Type]bool, depth int) bool {
	if v, ok := memo[t]; ok {
		return v
	}
	var v bool
	switch tt := t.(type) {
	case *dwarf.TypedefType:
		v = depth > maxTypeDepth || hasPointers(tt.Type, memo, depth+1)
	case *dwarf.QualType:
		v = depth > maxTypeDepth || hasPointers(tt.Type, memo, depth+1)
	case *dwarf.StructType:
		for _, f := range tt.Field {
			if depth > maxTypeDepth || hasPointers(f.Type, memo, depth+1) {
				v = true
				break
			}
		}
	case *dwarf.ArrayType:
		v = tt.Count > 0 && (depth > maxTypeDepth || hasPointers(tt.Type, memo, depth+1))
	case *dwarf.IntType, *dwarf.UintType, *dwarf.FloatType, *dwarf.ComplexType, *dwarf.BoolType, *dwarf.CharType, *dwarf.UcharType, *dwarf.EnumType:
	default:
		v = true
	}
	memo[t] = v
	return v
}
