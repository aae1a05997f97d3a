package runtimelayout

import "fmt"

// HeapBitsLayout is where the runtime keeps which words of its heap
// objects hold pointers (its pointer maps), for a walk of the heap that
// follows those words only, as the garbage collector does (issue #32).
// Go 1.20 and 1.21 (and 1.22 built with GOEXPERIMENT=noallocheaders)
// keep one bit per heap word in each arena's heapArena; Go 1.22+ keep
// the bits of small objects at the end of their span, a pointer to the
// type (*abi.Type) in the first word of larger ones (the malloc header)
// and, for a large object, in its span (mspan.largeType). A field the
// release lacks is Missing.
type HeapBitsLayout struct {
	// Reason, when set, says why the rest could not be read (every
	// field is then Missing or 0).
	Reason string
	// ArenaBitmap is the offset in runtime.heapArena of its bitmap, a
	// bit per word of the arena; Missing where the runtime has malloc
	// headers instead.
	ArenaBitmap int64
	// SpanLargeType is the offset of mspan.largeType (Go 1.22+).
	SpanLargeType int64
	// MinSizeForMallocHeader is runtime.minSizeForMallocHeader: objects
	// of a size class up to it have their bits in their span, larger
	// ones a malloc header of MallocHeaderSize bytes
	// (runtime.mallocHeaderSize) before their data. Missing where the
	// runtime has no malloc headers.
	MinSizeForMallocHeader, MallocHeaderSize int64
	// InlineMarkBits is the size of runtime.spanInlineMarkBits, which
	// the Green Tea collector puts between a small span's heap bits and
	// its end; 0 where the DWARF (or the table) has no such type.
	InlineMarkBits int64
	// Type is the runtime's type descriptor (internal/abi.Type,
	// runtime._type before Go 1.21) and its array and struct forms.
	Type TypeLayout
	// KindMask, KindArray, KindStruct and KindGCProg are the type
	// kinds' constants (internal/abi or runtime: KindGCProg Missing
	// from Go 1.24, which has no GC programs); TFlagGCMaskOnDemand the
	// type flag saying that GCData points to the address of a mask
	// built on demand (Go 1.24+, Missing before).
	KindMask, KindArray, KindStruct, KindGCProg, TFlagGCMaskOnDemand int64
	// InProgress is the link-time address of runtime.inProgress, what
	// a mask built on demand points to while it is built (Go 1.24+); 0
	// in the generated table and before.
	InProgress uint64

	// ArenaFormat and GreenTea are the binary's, not the release's (0
	// in the generated table): whether its runtime keeps the arena
	// bitmap (runtime.heapBitsSetType in its pclntab) and has the Green
	// Tea collector (runtime.scanSpan), which experiments decide.
	// Load sets them from the pclntab.
	ArenaFormat, GreenTea bool
}

// TypeLayout is where the fields of the runtime's type descriptor are.
type TypeLayout struct {
	// Size is its size; SizeField, PtrBytes and GCData the offsets of
	// the type's size, of the length of its prefix that holds pointers
	// and of its pointer mask (uintptr, uintptr, pointer); TFlag and
	// Kind of its flags and kind (a byte each).
	Size, SizeField, PtrBytes, GCData, TFlag, Kind int64
	// ArrayElem and ArrayLen are the offsets of an array type's element
	// type and length (internal/abi.ArrayType); StructFields of a
	// struct type's fields (a slice of internal/abi.StructField, of
	// FieldSize bytes, whose type and offset are at FieldType and
	// FieldOffset). Missing before Go 1.21.
	ArrayElem, ArrayLen, StructFields, FieldSize, FieldType, FieldOffset int64
}

// heapBitsFromDWARF reads the pointer maps' layout; what is malformed
// leaves it unknown, with the reason, without failing the heap's layout
// (the walk then scans heap objects conservatively).
func heapBitsFromDWARF(d *Debug) HeapBitsLayout {
	b, err := heapBitsLayout(d)
	if err != nil {
		return HeapBitsLayout{Reason: err.Error(), ArenaBitmap: Missing, SpanLargeType: Missing, MinSizeForMallocHeader: Missing, MallocHeaderSize: Missing,
			KindMask: Missing, KindArray: Missing, KindStruct: Missing, KindGCProg: Missing, TFlagGCMaskOnDemand: Missing,
			Type: TypeLayout{ArrayElem: Missing, ArrayLen: Missing, StructFields: Missing, FieldSize: Missing, FieldType: Missing, FieldOffset: Missing}}
	}
	return b
}

// heapBitsLayout reads the pointer maps' layout; what the release lacks
// is Missing, and a malformed field fails.
func heapBitsLayout(d *Debug) (HeapBitsLayout, error) {
	b := HeapBitsLayout{ArenaBitmap: Missing, SpanLargeType: Missing, MinSizeForMallocHeader: Missing, MallocHeaderSize: Missing,
		KindMask: Missing, KindArray: Missing, KindStruct: Missing, KindGCProg: Missing, TFlagGCMaskOnDemand: Missing}
	arena, err := d.Struct("runtime.heapArena")
	if err != nil {
		return b, err
	}
	// The bitmap, where it has words: heapArena.bitmap (Go 1.20, 1.21),
	// heapArenaPtrScalar.bitmap (1.22 with noallocheaders; empty
	// otherwise).
	for _, path := range [][]string{{"bitmap"}, {"heapArenaPtrScalar", "bitmap"}} {
		if off, ft, err := FieldOffset(arena, path...); err == nil && ft.Size() > 0 {
			b.ArenaBitmap = off
			break
		}
	}
	span, err := d.Struct("runtime.mspan")
	if err != nil {
		return b, err
	}
	if err := readFields(span, "runtime.mspan", []fieldSpec{{&b.SpanLargeType, []string{"largeType"}, 8, true}}); err != nil {
		return b, err
	}
	if v, ok := d.Constant("runtime.minSizeForMallocHeader"); ok && v > 0 {
		if h, ok := d.Constant("runtime.mallocHeaderSize"); ok && h > 0 {
			b.MinSizeForMallocHeader, b.MallocHeaderSize = v, h
		}
	}
	if st, err := d.Struct("runtime.spanInlineMarkBits"); err == nil {
		b.InlineMarkBits = st.Size()
	}
	if b.Type, err = typeLayout(d); err != nil {
		return b, err
	}
	for _, c := range []struct {
		dst   *int64
		names []string
	}{{&b.KindMask, []string{"internal/abi.KindMask", "runtime.kindMask"}},
		{&b.KindArray, []string{"internal/abi.Array", "runtime.kindArray"}},
		{&b.KindStruct, []string{"internal/abi.Struct", "runtime.kindStruct"}},
		{&b.KindGCProg, []string{"internal/abi.KindGCProg", "runtime.kindGCProg"}},
		{&b.TFlagGCMaskOnDemand, []string{"internal/abi.TFlagGCMaskOnDemand"}}} {
		for _, n := range c.names {
			if v, ok := d.Constant(n); ok {
				*c.dst = v
				break
			}
		}
	}
	b.InProgress, _ = d.Variable("runtime.inProgress")
	return b, nil
}

// typeLayout reads the type descriptor's fields: internal/abi.Type's
// (Go 1.21+), or runtime._type's (Go 1.20, in lower case).
func typeLayout(d *Debug) (TypeLayout, error) {
	t := TypeLayout{ArrayElem: Missing, ArrayLen: Missing, StructFields: Missing, FieldSize: Missing, FieldType: Missing, FieldOffset: Missing}
	typ, err := d.Struct("internal/abi.Type")
	names := []string{"Size_", "PtrBytes", "GCData", "TFlag", "Kind_"}
	if err != nil {
		if typ, err = d.Struct("runtime._type"); err != nil {
			return t, fmt.Errorf("runtime type descriptor: %w", err)
		}
		names = []string{"size", "ptrdata", "gcdata", "tflag", "kind"}
	}
	t.Size = typ.Size()
	if err := readFields(typ, typ.StructName, []fieldSpec{{&t.SizeField, names[:1], 8, false}, {&t.PtrBytes, names[1:2], 8, false},
		{&t.GCData, names[2:3], 8, false}, {&t.TFlag, names[3:4], 1, false}, {&t.Kind, names[4:5], 1, false}}); err != nil {
		return t, err
	}
	arr, aerr := d.Struct("internal/abi.ArrayType")
	st, serr := d.Struct("internal/abi.StructType")
	sf, ferr := d.Struct("internal/abi.StructField")
	if aerr != nil || serr != nil || ferr != nil {
		return t, nil // not linked in: masks built on demand are not read
	}
	if err := readFields(arr, arr.StructName, []fieldSpec{{&t.ArrayElem, []string{"Elem"}, 8, false}, {&t.ArrayLen, []string{"Len"}, 8, false}}); err != nil {
		return t, err
	}
	if err := readFields(st, st.StructName, []fieldSpec{{&t.StructFields, []string{"Fields"}, 24, false}}); err != nil {
		return t, err
	}
	if err := readFields(sf, sf.StructName, []fieldSpec{{&t.FieldType, []string{"Typ"}, 8, false}, {&t.FieldOffset, []string{"Offset"}, 8, false}}); err != nil {
		return t, err
	}
	t.FieldSize = sf.Size()
	return t, nil
}
