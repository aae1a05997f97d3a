package funcargs

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
)

// Value is one captured argument or result, formatted.
type Value struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Value is in Go syntax, as fmt's %#v prints it, except that pointers,
	// maps, channels and funcs are their address ("(*main.T)(0xc000010000)"),
	// and a string or slice read in part ends in "...".
	Value string `json:"value"`
}

// TypeResolver names the dynamic type of an interface from the runtime
// address of its type descriptor; nil when it cannot.
type TypeResolver func(addr uint64) godwarf.Type

// Decode formats the values of payload, the bytes a probe captured with c.
// A payload shorter than c.Size (a corrupt event) leaves the values it
// does not hold unknown.
func (c *Capture) Decode(payload []byte, types TypeResolver) []Value {
	out := make([]Value, len(c.Values))
	for i, cv := range c.Values {
		out[i] = Value{Name: cv.Var.Name, Type: typeName(cv.Var.Type)}
		if cv.Unknown != "" {
			out[i].Value = "?"
			continue
		}
		if len(payload) < c.Size {
			out[i].Value = "?"
			continue
		}
		if c.FloatStatus >= 0 && cv.inFloatRegs() && le(payload, int64(c.FloatStatus), 8) != 1 {
			out[i].Value = "?" // the probe could not read the float registers
			continue
		}
		f := &formatter{cv: cv, payload: payload, types: types, value: cv.assemble(payload)}
		f.format(cv.Var.Type, 0, 0)
		out[i].Value = f.b.String()
	}
	return out
}

// inFloatRegs tells whether part of cv is in a floating-point register.
func (cv *Captured) inFloatRegs() bool {
	for _, p := range cv.pieces {
		if p.Float {
			return true
		}
	}
	return false
}

// Unknown lists the values c cannot capture, with why.
func (c *Capture) Unknown() []string {
	var out []string
	for _, cv := range c.Values {
		if cv.Unknown != "" {
			out = append(out, cv.Var.Name+": "+cv.Unknown)
		}
	}
	return out
}

// assemble puts the pieces of cv back into the value's bytes.
func (cv *Captured) assemble(payload []byte) []byte {
	v := make([]byte, max(cv.Var.Type.Size(), 0))
	for _, p := range cv.pieces {
		if p.ValueOffset >= int64(len(v)) || p.at+int(p.Size) > len(payload) {
			continue
		}
		copy(v[p.ValueOffset:], payload[p.at:p.at+int(p.Size)])
	}
	return v
}

type formatter struct {
	b       strings.Builder
	cv      *Captured
	payload []byte
	types   TypeResolver
	value   []byte
}

// behind returns a formatter of value, bytes read behind a pointer of the
// value f formats: nothing was read behind value's own pointers.
func (f *formatter) behind(value []byte) *formatter {
	return &formatter{cv: &Captured{Var: f.cv.Var}, payload: f.payload, types: f.types, value: value}
}

func (f *formatter) word(off int64) uint64 { return le(f.value, off, 8) }

// le reads an n-byte little-endian integer at off of b, 0 past its end.
func le(b []byte, off, n int64) uint64 {
	if off < 0 || off+n > int64(len(b)) {
		return 0
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[off+i])
	}
	return v
}

// read returns what a deref at payload offset at copied.
func (f *formatter) read(at int) []byte {
	n := le(f.payload, int64(at), 8)
	if at+8+int(n) > len(f.payload) || n > MaxDeref {
		return nil
	}
	return f.payload[at+8 : at+8+int(n)]
}

// typeName is a type's name as Go source spells it.
func typeName(t godwarf.Type) string {
	name := t.Common().Name
	if name == "" {
		name = t.String()
	}
	return strings.ReplaceAll(name, "[]uint8", "[]byte")
}

// format writes the value of type t at value offset off.
func (f *formatter) format(t godwarf.Type, off int64, depth int) {
	if depth > 8 {
		f.b.WriteString("...")
		return
	}
	size := t.Size()
	switch rt := resolve(t).(type) {
	case *godwarf.IntType:
		f.b.WriteString(strconv.FormatInt(signExtend(le(f.value, off, size), size), 10))
	case *godwarf.UintType, *godwarf.UcharType:
		fmt.Fprintf(&f.b, "%#x", le(f.value, off, size))
	case *godwarf.CharType:
		f.b.WriteString(strconv.FormatInt(signExtend(le(f.value, off, size), size), 10))
	case *godwarf.BoolType:
		f.b.WriteString(strconv.FormatBool(le(f.value, off, 1) != 0))
	case *godwarf.FloatType:
		f.b.WriteString(formatFloat(le(f.value, off, size), size))
	case *godwarf.ComplexType:
		f.b.WriteString(formatComplex(le(f.value, off, size/2), le(f.value, off+size/2, size/2), size))
	case *godwarf.StringType:
		f.formatString(off)
	case *godwarf.FuncType:
		// The code address, as fmt prints a func; the closure's address
		// when the code could not be read.
		addr := f.word(off)
		if at, ok := f.cv.derefs[off]; ok && addr != 0 {
			if b := f.read(at); len(b) == 8 {
				addr = binary.LittleEndian.Uint64(b)
			}
		}
		f.address(t, addr)
	case *godwarf.PtrType, *godwarf.MapType, *godwarf.ChanType, *godwarf.UnsupportedType:
		f.address(t, f.word(off))
	case *godwarf.SliceType:
		f.formatSlice(t, rt, off)
	case *godwarf.ArrayType:
		f.b.WriteString(typeName(t))
		f.b.WriteByte('{')
		for i := int64(0); i < rt.Count && rt.Type != nil; i++ {
			if i > 0 {
				f.b.WriteString(", ")
			}
			if i == 32 {
				f.b.WriteString("...")
				break
			}
			f.format(rt.Type, off+i*rt.Type.Size(), depth+1)
		}
		f.b.WriteByte('}')
	case *godwarf.StructType:
		f.b.WriteString(typeName(t))
		f.b.WriteByte('{')
		for i, fl := range rt.Field {
			if i > 0 {
				f.b.WriteString(", ")
			}
			f.b.WriteString(fl.Name + ":")
			f.format(fl.Type, off+fl.ByteOffset, depth+1)
		}
		f.b.WriteByte('}')
	case *godwarf.InterfaceType:
		f.formatInterface(rt, off, depth)
	default:
		fmt.Fprintf(&f.b, "(%s)(?)", typeName(t))
	}
}

// scalarStruct tells whether every field of st is a scalar.
func scalarStruct(st *godwarf.StructType) bool {
	for _, f := range st.Field {
		if !isScalar(f.Type) {
			return false
		}
	}
	return len(st.Field) > 0
}

func signExtend(v uint64, size int64) int64 {
	if size <= 0 || size >= 8 {
		return int64(v)
	}
	shift := 64 - 8*size
	return int64(v<<shift) >> shift
}

func formatFloat(bits uint64, size int64) string {
	if size == 4 {
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(bits))), 'g', -1, 32)
	}
	return strconv.FormatFloat(math.Float64frombits(bits), 'g', -1, 64)
}

// formatComplex formats a complex number of size bytes from the bits of
// its parts, as fmt's %#v does: "(1.5+2i)".
func formatComplex(re, im uint64, size int64) string {
	if size == 8 {
		c := complex(float64(math.Float32frombits(uint32(re))), float64(math.Float32frombits(uint32(im))))
		return strconv.FormatComplex(c, 'g', -1, 64)
	}
	return strconv.FormatComplex(complex(math.Float64frombits(re), math.Float64frombits(im)), 'g', -1, 128)
}

// address writes a pointer-shaped value as fmt's %#v writes a pointer.
func (f *formatter) address(t godwarf.Type, addr uint64) {
	if addr == 0 {
		fmt.Fprintf(&f.b, "(%s)(nil)", typeName(t))
		return
	}
	fmt.Fprintf(&f.b, "(%s)(%#x)", typeName(t), addr)
}

func (f *formatter) formatString(off int64) {
	n := f.word(off + 8)
	at, ok := f.cv.derefs[off]
	if !ok {
		fmt.Fprintf(&f.b, "string(len %d)", n)
		return
	}
	b := f.read(at)
	if n == 0 {
		f.b.WriteString(`""`)
		return
	}
	f.b.WriteString(strconv.Quote(string(b)))
	if uint64(len(b)) < n {
		fmt.Fprintf(&f.b, "...(len %d)", n)
	}
}

func (f *formatter) formatSlice(t godwarf.Type, st *godwarf.SliceType, off int64) {
	ptr, n, c := f.word(off), f.word(off+8), f.word(off+16)
	name := typeName(t)
	if ptr == 0 {
		f.b.WriteString(name + "(nil)")
		return
	}
	at, ok := f.cv.derefs[off]
	if !ok {
		fmt.Fprintf(&f.b, "%s{...} (len %d, cap %d)", name, n, c)
		return
	}
	elem := st.ElemType
	es := elem.Size()
	data := f.read(at)
	sub := f.behind(data)
	f.b.WriteString(name + "{")
	var shown uint64
	for ; shown < n && int64(shown+1)*es <= int64(len(data)); shown++ {
		if shown > 0 {
			f.b.WriteString(", ")
		}
		sub.b.Reset()
		sub.format(elem, int64(shown)*es, 1)
		f.b.WriteString(sub.b.String())
	}
	if shown < n {
		if shown > 0 {
			f.b.WriteString(", ")
		}
		f.b.WriteString("...")
	}
	f.b.WriteByte('}')
	if shown < n || c != n {
		fmt.Fprintf(&f.b, " (len %d, cap %d)", n, c)
	}
}

func (f *formatter) formatInterface(t *godwarf.InterfaceType, off int64, depth int) {
	tab, data := f.word(off), f.word(off+8)
	if tab == 0 {
		f.b.WriteString("nil")
		return
	}
	typ := tab
	if at, ok := f.cv.itabTypes[off]; ok {
		b := f.read(at)
		if len(b) < 8 {
			fmt.Fprintf(&f.b, "%s(itab %#x, data %#x)", typeName(t), tab, data)
			return
		}
		typ = binary.LittleEndian.Uint64(b)
	} else if !isEmptyInterface(t) {
		fmt.Fprintf(&f.b, "%s(itab %#x, data %#x)", typeName(t), tab, data)
		return
	}
	var dyn godwarf.Type
	if f.types != nil {
		dyn = f.types(typ)
	}
	if dyn == nil {
		fmt.Fprintf(&f.b, "%s(type %#x, data %#x)", typeName(t), typ, data)
		return
	}
	at, ok := f.cv.derefs[off+8]
	b := []byte(nil)
	if ok {
		b = f.read(at)
	}
	switch d := resolve(dyn).(type) {
	case *godwarf.PtrType:
		// Pointer-shaped: the data word is the value. A pointer to a
		// struct of scalars shows the struct too (what was read behind
		// the data word).
		if st, ok := resolve(d.Type).(*godwarf.StructType); ok && data != 0 && scalarStruct(st) && int64(len(b)) >= st.Size() {
			sub := f.behind(b)
			sub.format(d.Type, 0, depth+1)
			f.b.WriteString("&" + sub.b.String())
			return
		}
		f.address(dyn, data)
		return
	case *godwarf.MapType, *godwarf.ChanType, *godwarf.FuncType, *godwarf.UnsupportedType:
		f.address(dyn, data)
		return
	}
	if int64(len(b)) < dyn.Size() {
		fmt.Fprintf(&f.b, "%s(...)", typeName(dyn))
		return
	}
	// The value behind the data word: strings and slices in it are shown
	// by their lengths.
	sub := f.behind(b)
	sub.format(dyn, 0, depth+1)
	f.b.WriteString(sub.b.String())
}
