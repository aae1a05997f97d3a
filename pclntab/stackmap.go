package pclntab

import (
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
