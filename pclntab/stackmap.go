package pclntab

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Indexes of the tables that say which words of a frame hold live
// pointers (internal/abi: PCDATA_StackMapIndex, FUNCDATA_ArgsPointerMaps,
// FUNCDATA_LocalsPointerMaps, FUNCDATA_StackObjects), the same in every
// release gi reads.
const (
	pcdataStackMapIndex       = 1
	funcdataArgsPointerMaps   = 0
	funcdataLocalsPointerMaps = 1
	funcdataStackObjects      = 2
)

// ArgsSizeUnknown is the Args of a function whose arguments' size is
// not known statically (abi.ArgsSizeUnknown: assembly, reflection stubs).
const ArgsSizeUnknown = -0x80000000

// maxStackMapBits bounds a stack map's bits (words of a frame): a frame
// of 64 MiB, far beyond what the compiler allows.
const maxStackMapBits = 1 << 23

// maxStackObjects bounds a function's stack objects.
const maxStackObjects = 1 << 16

// Bitvector is a frame's pointer map: bit i is set when word i of the
// area it covers holds a live pointer.
type Bitvector struct {
	// N is the number of words the map covers.
	N    int
	bits []byte
}

// Pointer reports whether word i holds a live pointer.
func (b Bitvector) Pointer(i int) bool {
	return i >= 0 && i < b.N && b.bits[i/8]&(1<<(i%8)) != 0
}

// ErrNoStackMap means a function has no pointer map where its frame
// needs one (assembly with a frame, a corrupt table): scan the frame
// conservatively.
var ErrNoStackMap = errors.New("no stack map")

// StackMaps returns the pointer maps of f's frame at pc, as the garbage
// collector reads them (runtime.(*stkframe).getStackMap): pc is the
// frame's continuation, a return address (backed up to its call) or f's
// entry (the entry maps). locals covers the words below the frame's
// varp (N words ending there), args the words of the arguments' area
// from argp; either is empty (N 0) when f keeps no pointers there.
// withLocals says whether the frame has locals at all (its varp is
// above the minimum frame): a frame with none needs no locals map.
func (t *LineTable) StackMaps(f *Func, pc uint64, withLocals bool) (locals, args Bitvector, err error) {
	if err := t.checkPC(f, pc); err != nil {
		return locals, args, err
	}
	if t.gofuncErr != nil {
		return locals, args, t.gofuncErr
	}
	index := int32(-1)
	if pc != f.Entry {
		if index, err = t.pcdata(f, pcdataStackMapIndex, pc-1); err != nil {
			return locals, args, fmt.Errorf("%s: stack map index at %#x: %w", f.Name, pc, err)
		}
	}
	if index == -1 {
		index = 0 // the prologue: the entry maps, as the runtime assumes
	}
	if withLocals {
		if locals, err = t.stackMap(f, funcdataLocalsPointerMaps, index); err != nil {
			return locals, args, fmt.Errorf("%s: locals at %#x: %w", f.Name, pc, err)
		}
	}
	if f.Args > 0 && f.Args != ArgsSizeUnknown {
		if args, err = t.stackMap(f, funcdataArgsPointerMaps, index); err != nil {
			return locals, args, fmt.Errorf("%s: arguments at %#x: %w", f.Name, pc, err)
		}
		args.N = min(args.N, int(f.Args)/8)
	}
	return locals, args, nil
}

// stackMap returns bitmap index of f's stack maps of kind which.
func (t *LineTable) stackMap(f *Func, which uint8, index int32) (Bitvector, error) {
	off, ok := t.funcdata(f, which)
	if !ok {
		return Bitvector{}, ErrNoStackMap
	}
	d := t.gofuncData
	if uint64(off)+8 > uint64(len(d)) {
		return Bitvector{}, fmt.Errorf("stack map at go:func.*+%#x out of range", off)
	}
	n, nbit := int32(t.order.Uint32(d[off:])), int32(t.order.Uint32(d[off+4:]))
	if n <= 0 || nbit < 0 || nbit > maxStackMapBits {
		return Bitvector{}, fmt.Errorf("stack map at go:func.*+%#x: %d maps of %d bits", off, n, nbit)
	}
	if nbit == 0 {
		return Bitvector{}, nil
	}
	if index < 0 || index >= n {
		return Bitvector{}, fmt.Errorf("stack map index %d of %d", index, n)
	}
	per := uint64(nbit+7) / 8
	at := uint64(off) + 8 + uint64(index)*per
	if at+per > uint64(len(d)) {
		return Bitvector{}, fmt.Errorf("stack map %d at go:func.*+%#x out of range", index, off)
	}
	return Bitvector{N: int(nbit), bits: d[at : at+per]}, nil
}

// StackObject is a variable of a frame whose address is taken: the
// garbage collector scans it when a live pointer points into it.
type StackObject struct {
	// Off is its offset in the frame: from varp when negative, from
	// argp otherwise; Size its size in bytes.
	Off, Size int32
}

// StackObjects returns f's stack objects (FUNCDATA_StackObjects).
func (t *LineTable) StackObjects(f *Func) ([]StackObject, error) {
	off, ok := t.funcdata(f, funcdataStackObjects)
	if !ok {
		return nil, nil
	}
	if t.gofuncErr != nil {
		return nil, t.gofuncErr
	}
	d := t.gofuncData
	if uint64(off)+8 > uint64(len(d)) {
		return nil, fmt.Errorf("%s: stack objects at go:func.*+%#x out of range", f.Name, off)
	}
	n := t.order.Uint64(d[off:])
	if n > maxStackObjects || uint64(off)+8+16*n > uint64(len(d)) {
		return nil, fmt.Errorf("%s: %d stack objects at go:func.*+%#x", f.Name, n, off)
	}
	objs := make([]StackObject, n)
	for i := range objs {
		r := d[uint64(off)+8+16*uint64(i):]
		objs[i] = StackObject{Off: int32(t.order.Uint32(r)), Size: int32(t.order.Uint32(r[4:]))}
	}
	return objs, nil
}

// funcdataOpenCodedDeferInfo is FUNCDATA_OpenCodedDeferInfo (internal/abi),
// 4 in every release gi reads.
const funcdataOpenCodedDeferInfo = 4

// maxOpenDefers is the most open-coded defers a function has (the
// compiler's bound, cmd/compile/internal/walk: 8).
const maxOpenDefers = 8

// OpenDefers says where a function with open-coded defers keeps them in
// its frame, as offsets below the frame's varp: the byte of defer bits
// (bit i set: defer statement i, in source order, is pending), and the
// slot of each defer's closure (a func value).
type OpenDefers struct {
	BitsOff uint64
	// SlotOff[i] is defer i's closure slot; for a release that does not
	// record how many defers a function has (Go 1.22 on), every slot a
	// bit can name (the caller reads only those whose bit is set).
	SlotOff []uint64
}

// HasOpenDefers says whether f has open-coded defers: a test of its
// funcdata table, no decoding.
func (t *LineTable) HasOpenDefers(f *Func) bool {
	_, ok := t.funcdata(f, funcdataOpenCodedDeferInfo)
	return ok
}

// OpenDefers returns f's open-coded defers (FUNCDATA_OpenCodedDeferInfo),
// false if it has none. enumerated says the binary's release lists each
// slot (Go 1.20 and 1.21: defer bits offset, count, then the slots' offsets
// from the last defer to the first); later releases record the bits' offset
// and the first slot's, the slots contiguous and ascending.
func (t *LineTable) OpenDefers(f *Func, enumerated bool) (OpenDefers, bool, error) {
	off, ok := t.funcdata(f, funcdataOpenCodedDeferInfo)
	if !ok {
		return OpenDefers{}, false, nil
	}
	if t.gofuncErr != nil {
		return OpenDefers{}, false, t.gofuncErr
	}
	if uint64(off) >= uint64(len(t.gofuncData)) {
		return OpenDefers{}, false, fmt.Errorf("%s: open-coded defer info at go:func.*+%#x out of range", f.Name, off)
	}
	r := t.gofuncData[off:]
	next := func() (uint64, error) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, fmt.Errorf("%s: open-coded defer info at go:func.*+%#x: bad varint", f.Name, off)
		}
		r = r[n:]
		return v, nil
	}
	bits, err := next()
	if err != nil {
		return OpenDefers{}, false, err
	}
	d := OpenDefers{BitsOff: bits}
	if !enumerated {
		first, err := next()
		if err != nil {
			return OpenDefers{}, false, err
		}
		for i := range uint64(maxOpenDefers) {
			if first < 8*i+8 {
				break // a slot at or above varp: none of the frame's
			}
			d.SlotOff = append(d.SlotOff, first-8*i)
		}
		return d, true, nil
	}
	n, err := next()
	if err != nil {
		return OpenDefers{}, false, err
	}
	if n > maxOpenDefers {
		return OpenDefers{}, false, fmt.Errorf("%s: %d open-coded defers, more than %d", f.Name, n, maxOpenDefers)
	}
	d.SlotOff = make([]uint64, n)
	for j := range n {
		if d.SlotOff[n-1-j], err = next(); err != nil {
			return OpenDefers{}, false, err
		}
	}
	return d, true, nil
}
