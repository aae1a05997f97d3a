package funcargs

import (
	"fmt"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
)

// Operation kinds of a Capture, as the probe program runs them.
const (
	// OpReg copies a whole register word (8 bytes).
	OpReg = 1
	// OpStack copies Size bytes at SPOffset from the stack pointer.
	OpStack = 2
	// OpDeref writes an 8-byte count n, then n bytes read at the pointer
	// found at payload offset Ptr, plus Add: n is Size, or the element
	// count at payload offset Len times Elem when that is smaller.
	OpDeref = 3
	// OpFloatReg copies the low 8 bytes of the floating-point register
	// Reg (a DWARF number), which the probe program reads from the frame
	// of a signal it has the thread take right after the probe.
	OpFloatReg = 4
)

// Bounds of one probe's capture, shared with the probe program
// (GI_ARG_OPS, GI_ARG_BYTES, GI_DEREF_MAX in gi.bpf.c).
const (
	MaxOps       = 32
	MaxPayload   = 1024
	MaxDeref     = 512
	ifaceDataMax = 64 // bytes read behind an interface's data word
)

// Op is one step of a capture.
type Op struct {
	Kind uint8
	// Reg is the DWARF number of the register (OpReg, OpFloatReg).
	Reg uint64
	// SPOffset is the stack slot's offset from the stack pointer (OpStack).
	SPOffset int64
	// Size is the bytes copied (OpStack), or read at most (OpDeref).
	Size int
	// Ptr and Len are payload offsets of the pointer and of the element
	// count (Len -1: none); Elem is the element size (OpDeref).
	Ptr, Len, Elem int
	// Add is added to the pointer before reading (OpDeref).
	Add int64
	// Out is the payload offset the operation writes.
	Out int
}

// CaptureOptions bound what a capture reads behind pointers.
type CaptureOptions struct {
	// StringSize is the bytes read per string and per slice's elements.
	StringSize int
	// NoFloatRegs, when set, says why values in floating-point registers
	// are not read at the probe: they are unknown.
	NoFloatRegs string
	// Overwritten maps the DWARF numbers of the floating-point registers
	// the probed instruction writes to that instruction: it runs before
	// they are read, so values in them are unknown.
	Overwritten map[uint64]string
	// RegName names a DWARF register number in the reasons.
	RegName func(uint64) string
}

// Capture is what a probe copies to read a list of values (a function's
// arguments at its entry, or its results at a RET) into the payload of
// its event, and how to read them back from that payload.
type Capture struct {
	Ops []Op
	// Size is the payload's size in bytes.
	Size   int
	Values []*Captured
	// FloatStatus is the payload offset of a word the probe program sets
	// to 1 once it has read the floating-point registers (OpFloatReg),
	// left 0 when it could not; -1 when no value is in one.
	FloatStatus int
}

// Captured is one value of a Capture.
type Captured struct {
	Var *Var
	// Unknown says why the value is not captured ("" when it is).
	Unknown string
	pieces  []capturedPiece
	// derefs maps the value offset of a string, a slice or an
	// interface's data word to the payload offset of what was read
	// behind it; itabTypes maps the value offset of a non-empty
	// interface to the payload offset of the read of its itab's type.
	derefs    map[int64]int
	itabTypes map[int64]int
	// stringSize is the bytes read behind each string.
	stringSize int
}

type capturedPiece struct {
	Piece
	at int // payload offset
}

// NewCapture plans the capture of values located at one probe.
func NewCapture(values []Located, opts CaptureOptions) *Capture {
	if opts.StringSize <= 0 {
		opts.StringSize = 64
	}
	if opts.StringSize > MaxDeref {
		opts.StringSize = MaxDeref
	}
	c := &Capture{FloatStatus: -1}
	// The values themselves first, then what is behind their pointers,
	// while the bounds allow.
	for _, l := range values {
		cv := &Captured{Var: l.Var, Unknown: l.Unknown, derefs: map[int64]int{}, itabTypes: map[int64]int{}, stringSize: opts.StringSize}
		c.Values = append(c.Values, cv)
		if cv.Unknown != "" {
			continue
		}
		cv.Unknown = c.addPieces(cv, l.Pieces, opts)
	}
	for _, cv := range c.Values {
		if cv.Unknown == "" {
			c.addDerefs(cv, cv.Var.Type, 0, opts, 0)
		}
	}
	return c
}

func (c *Capture) addPieces(cv *Captured, pieces []Piece, opts CaptureOptions) string {
	ops, size, status := len(c.Ops), c.Size, c.FloatStatus
	for _, p := range pieces {
		op := Op{Kind: OpReg, Reg: p.Reg, Size: 8, Out: c.Size}
		n := 8
		switch {
		case p.Stack:
			n = int(p.Size+7) / 8 * 8
			op = Op{Kind: OpStack, SPOffset: p.Offset, Size: int(p.Size), Out: c.Size}
		case p.Float:
			if why := floatUnread(p.Reg, opts); why != "" {
				c.Ops, c.Size, c.FloatStatus = c.Ops[:ops], size, status
				return why
			}
			op.Kind = OpFloatReg
			if c.FloatStatus < 0 {
				// The word saying the float registers were read.
				c.FloatStatus = c.Size
				c.Size += 8
				op.Out = c.Size
			}
		}
		if len(c.Ops) == MaxOps || c.Size+n > MaxPayload || n > MaxDeref {
			c.Ops, c.Size, c.FloatStatus = c.Ops[:ops], size, status
			return fmt.Sprintf("not captured: more than %d values or %d bytes at one probe", MaxOps, MaxPayload)
		}
		c.Ops = append(c.Ops, op)
		cv.pieces = append(cv.pieces, capturedPiece{Piece: p, at: c.Size})
		c.Size += n
	}
	return ""
}

// floatUnread says why floating-point register reg is not read at the
// probe opts describe; "" if it is.
func floatUnread(reg uint64, opts CaptureOptions) string {
	if opts.NoFloatRegs != "" {
		return opts.NoFloatRegs
	}
	if ins, ok := opts.Overwritten[reg]; ok {
		name := fmt.Sprint(reg)
		if opts.RegName != nil {
			name = opts.RegName(reg)
		}
		return fmt.Sprintf("passed in %s, which the probed instruction (%s) overwrites before it can be read", name, ins)
	}
	return ""
}

// payloadOf returns the payload offset of the 8-byte word at value offset
// off of cv, -1 if the word is not whole in one captured piece.
func (cv *Captured) payloadOf(off int64) int {
	for _, p := range cv.pieces {
		if off >= p.ValueOffset && off+8 <= p.ValueOffset+max(p.Size, 8) && (p.Stack || off == p.ValueOffset) {
			return p.at + int(off-p.ValueOffset)
		}
	}
	return -1
}

// deref adds a read behind the pointer at payload offset ptr; -1 when the
// bounds are reached.
func (c *Capture) deref(ptr, length, elem, size int, add int64) int {
	n := 8 + (size+7)/8*8
	if ptr < 0 || len(c.Ops) == MaxOps || c.Size+n > MaxPayload {
		return -1
	}
	out := c.Size
	c.Ops = append(c.Ops, Op{Kind: OpDeref, Ptr: ptr, Len: length, Elem: elem, Size: size, Add: add, Out: out})
	c.Size += n
	return out
}

// addDerefs plans the reads behind the strings, slices and interfaces of
// a value of type t at value offset off.
func (c *Capture) addDerefs(cv *Captured, t godwarf.Type, off int64, opts CaptureOptions, depth int) {
	if depth > 4 {
		return
	}
	switch t := resolve(t).(type) {
	case *godwarf.StringType:
		if ptr, n := cv.payloadOf(off), cv.payloadOf(off+8); ptr >= 0 && n >= 0 {
			if out := c.deref(ptr, n, 1, opts.StringSize, 0); out >= 0 {
				cv.derefs[off] = out
			}
		}
	case *godwarf.SliceType:
		elem := resolve(t.ElemType)
		if !isScalar(elem) || elem.Size() == 0 {
			return
		}
		size := opts.StringSize / int(elem.Size()) * int(elem.Size())
		if ptr, n := cv.payloadOf(off), cv.payloadOf(off+8); ptr >= 0 && n >= 0 && size > 0 {
			if out := c.deref(ptr, n, int(elem.Size()), size, 0); out >= 0 {
				cv.derefs[off] = out
			}
		}
	case *godwarf.InterfaceType:
		tab, data := cv.payloadOf(off), cv.payloadOf(off+8)
		if tab < 0 || data < 0 {
			return
		}
		if !isEmptyInterface(t) {
			// The dynamic type is the itab's second word.
			out := c.deref(tab, -1, 1, 8, 8)
			if out < 0 {
				return
			}
			cv.itabTypes[off] = out
		}
		if out := c.deref(data, -1, 1, ifaceDataMax, 0); out >= 0 {
			cv.derefs[off+8] = out
		}
	case *godwarf.FuncType:
		// A func value points at a closure whose first word is the code.
		if out := c.deref(cv.payloadOf(off), -1, 1, 8, 0); out >= 0 {
			cv.derefs[off] = out
		}
	case *godwarf.StructType:
		for _, f := range t.Field {
			c.addDerefs(cv, f.Type, off+f.ByteOffset, opts, depth+1)
		}
	case *godwarf.ArrayType:
		if t.Count > 16 || t.Type == nil {
			return
		}
		for i := int64(0); i < t.Count; i++ {
			c.addDerefs(cv, t.Type, off+i*t.Type.Size(), opts, depth+1)
		}
	}
}

// isEmptyInterface tells an `any` (type word first) from an interface
// with methods (itab first), by the runtime struct DWARF describes it as.
func isEmptyInterface(t *godwarf.InterfaceType) bool {
	if st, ok := resolve(t.Type).(*godwarf.StructType); ok && len(st.Field) > 0 {
		return st.Field[0].Name == "_type" || st.Field[0].Name == "type"
	}
	return strings.HasPrefix(t.String(), "interface {}")
}

// isScalar tells whether values of t print without reading memory
// elsewhere: integers, floats, complex numbers and bools.
func isScalar(t godwarf.Type) bool {
	switch resolve(t).(type) {
	case *godwarf.IntType, *godwarf.UintType, *godwarf.FloatType, *godwarf.ComplexType, *godwarf.BoolType,
		*godwarf.CharType, *godwarf.UcharType:
		return true
	}
	return false
}

// Lookup returns the captured value named name, nil if there is none.
func (c *Capture) Lookup(name string) *Captured {
	for _, cv := range c.Values {
		if cv.Var.Name == name {
			return cv
		}
	}
	return nil
}

// Integer returns the payload offset of an integer or bool value captured
// whole in one piece, and whether it is signed; ok is false for any other
// value.
func (cv *Captured) Integer() (at int, signed, ok bool) {
	if cv.Unknown != "" || len(cv.pieces) != 1 || cv.pieces[0].ValueOffset != 0 {
		return 0, false, false
	}
	switch resolve(cv.Var.Type).(type) {
	case *godwarf.IntType, *godwarf.CharType:
		return cv.pieces[0].at, true, true
	case *godwarf.UintType, *godwarf.UcharType, *godwarf.BoolType:
		return cv.pieces[0].at, false, true
	}
	return 0, false, false
}

// StringRead returns the payload offset of the bytes read behind a string
// value (an 8-byte count, then the bytes) and how many bytes are read at
// most; ok is false for any other value, or a string not read.
func (cv *Captured) StringRead() (at, size int, ok bool) {
	if _, isString := resolve(cv.Var.Type).(*godwarf.StringType); !isString {
		return 0, 0, false
	}
	at, ok = cv.derefs[0]
	return at, cv.stringSize, ok
}
