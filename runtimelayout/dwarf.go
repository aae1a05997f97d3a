package runtimelayout

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"strings"

	"github.com/gi-debug/gi/internal/dwarfload"
)

// ErrNoDWARF is returned when a binary carries no DWARF (built with -ldflags=-w or -s).
var ErrNoDWARF = errors.New("binary has no DWARF debug info")

// Debug is a binary's DWARF, indexed once: named types, package-level
// variables and constants. Struct layouts are parsed lazily per type.
type Debug struct {
	data      *dwarf.Data
	types     map[string]dwarf.Offset
	variables map[string]variable
	constants map[string]int64
}

// variable is a package-level variable: its link-time address and the
// offset of its type's entry.
type variable struct {
	addr uint64
	typ  dwarf.Offset
}

// runtimeUnit is the name of the compilation units LoadDebug indexes: the
// Go linker puts every type entry in a unit of package runtime of its own,
// after the runtime's other units (not in the unit of the package that
// declares the type), and the runtime's own variables and constants are
// children of its first unit: all gi reads from DWARF.
const runtimeUnit = "runtime"

// abiUnit is the unit of package internal/abi, before the runtime's:
// the constants of type kinds and flags (Go 1.21+).
const abiUnit = "internal/abi"

// LoadDebug reads and indexes the DWARF of f. Only the runtime's
// compilation units (and internal/abi's) up to the one holding the types
// are read (typesThenABI), and only their top-level entries (function
// bodies are skipped): on a big binary they end in the first quarter of .debug_info,
// and the rest is neither decompressed nor walked. If they do not hold
// runtime.g and runtime.allgs, as a linker that placed them elsewhere would
// leave it, every unit is indexed instead.
func LoadDebug(f *elf.File) (*Debug, error) {
	return LoadDebugFrom(dwarfload.NewLoader(f))
}

// LoadDebugFrom is LoadDebug reading the sections through l, which other
// readers of the same binary may share.
func LoadDebugFrom(l *dwarfload.Loader) (*Debug, error) {
	f := l.File()
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, ErrNoDWARF
	}
	// Types and variables only: not the line and frame tables or the
	// location lists, as large as the rest on a big binary.
	data, err := l.OpenPrefix(typesThenABI())
	if err != nil {
		return nil, err
	}
	d := &Debug{data: data}
	if err := d.index(func(unit string) bool { return unit == runtimeUnit || unit == abiUnit }); err != nil {
		return nil, err
	}
	_, types := d.types["runtime.g"]
	_, variables := d.variables["runtime.allgs"]
	if !types || !variables {
		return loadEveryUnit(l)
	}
	return d, nil
}

// abiUnitsAfterTypes bounds the units read past the runtime's unit of
// types for internal/abi's: the linker puts it right before or after.
const abiUnitsAfterTypes = 8

// typesThenABI returns the predicate of the last unit LoadDebug reads:
// the runtime's unit of types (named runtime, with a named type among
// its first entries), or internal/abi's where that comes after it (a few
// units further at most).
func typesThenABI() func(r *dwarf.Reader) bool {
	types, abi, after := false, false, 0
	return func(r *dwarf.Reader) bool {
		cu, err := r.Next()
		if err != nil || cu == nil || cu.Tag != dwarf.TagCompileUnit {
			return false
		}
		name, _ := cu.Val(dwarf.AttrName).(string)
		abi = abi || name == abiUnit
		if types {
			after++
			return abi || after >= abiUnitsAfterTypes
		}
		types = name == runtimeUnit && cu.Children && namedTypeFollows(r)
		return types && abi
	}
}

// namedTypeFollows reports whether a named type is among the first
// entries r reads.
func namedTypeFollows(r *dwarf.Reader) bool {
	for range 16 {
		e, err := r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return false
		}
		switch e.Tag {
		case dwarf.TagStructType, dwarf.TagTypedef, dwarf.TagBaseType, dwarf.TagPointerType:
			if _, ok := e.Val(dwarf.AttrName).(string); ok {
				return true
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
	return false
}

// loadEveryUnit reads the whole of .debug_info and indexes every unit.
func loadEveryUnit(l *dwarfload.Loader) (*Debug, error) {
	data, _, err := l.Open()
	if err != nil {
		return nil, err
	}
	d := &Debug{data: data}
	if err := d.index(func(string) bool { return true }); err != nil {
		return nil, err
	}
	return d, nil
}

// index (re)builds the index from the top-level entries of the units whose
// name want accepts; the others are skipped whole.
func (d *Debug) index(want func(unit string) bool) error {
	d.types = make(map[string]dwarf.Offset, 1<<14)
	d.variables = make(map[string]variable, 1<<9)
	d.constants = make(map[string]int64, 1<<10)
	r := d.data.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return fmt.Errorf("index DWARF: %w", err)
		}
		if e == nil {
			return nil
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			if name, _ := e.Val(dwarf.AttrName).(string); !want(name) {
				r.SkipChildren() // jumps to the next unit without decoding this one
			}
			continue // descend into the unit's children
		case dwarf.TagStructType, dwarf.TagTypedef, dwarf.TagBaseType, dwarf.TagPointerType,
			dwarf.TagArrayType, dwarf.TagSubroutineType, dwarf.TagClassType:
			if name, ok := e.Val(dwarf.AttrName).(string); ok {
				if _, dup := d.types[name]; !dup {
					d.types[name] = e.Offset
				}
			}
		case dwarf.TagVariable:
			name, _ := e.Val(dwarf.AttrName).(string)
			if loc, ok := e.Val(dwarf.AttrLocation).([]byte); ok && name != "" {
				if addr, ok := staticAddress(loc); ok {
					typ, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
					d.variables[name] = variable{addr: addr, typ: typ}
				}
			}
		case dwarf.TagConstant:
			name, _ := e.Val(dwarf.AttrName).(string)
			switch v := e.Val(dwarf.AttrConstValue).(type) {
			case int64:
				d.constants[name] = v
			case uint64:
				d.constants[name] = int64(v)
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}

// staticAddress decodes a location expression that is a single DW_OP_addr
// (little-endian: amd64 and arm64).
func staticAddress(loc []byte) (uint64, bool) {
	const opAddr = 0x03
	if len(loc) != 9 || loc[0] != opAddr {
		return 0, false
	}
	var v uint64
	for i := 8; i >= 1; i-- {
		v = v<<8 | uint64(loc[i])
	}
	return v, true
}

// Constant returns the value of a package-level constant such as "runtime._Grunning".
func (d *Debug) Constant(name string) (int64, bool) {
	v, ok := d.constants[name]
	return v, ok
}

// ConstantsWithPrefix returns every constant whose name starts with prefix.
func (d *Debug) ConstantsWithPrefix(prefix string) map[string]int64 {
	out := make(map[string]int64)
	for name, v := range d.constants {
		if strings.HasPrefix(name, prefix) {
			out[name] = v
		}
	}
	return out
}

// Variable returns the link-time address of a package-level variable such as "runtime.allgs".
func (d *Debug) Variable(name string) (uint64, bool) {
	v, ok := d.variables[name]
	return v.addr, ok
}

// variableType returns the type of a package-level variable.
func (d *Debug) variableType(name string) (dwarf.Type, error) {
	v, ok := d.variables[name]
	if !ok {
		return nil, fmt.Errorf("variable %s not in DWARF", name)
	}
	if v.typ == 0 {
		return nil, fmt.Errorf("variable %s has no type", name)
	}
	return d.data.Type(v.typ)
}

// Type returns the named type (for example "runtime.g"), parsed on first use.
func (d *Debug) Type(name string) (dwarf.Type, error) {
	off, ok := d.types[name]
	if !ok {
		return nil, fmt.Errorf("type %s not in DWARF", name)
	}
	t, err := d.data.Type(off)
	if err != nil {
		return nil, fmt.Errorf("parse type %s: %w", name, err)
	}
	return t, nil
}

// Struct returns the named struct type with typedefs resolved.
func (d *Debug) Struct(name string) (*dwarf.StructType, error) {
	t, err := d.Type(name)
	if err != nil {
		return nil, err
	}
	st, ok := resolve(t).(*dwarf.StructType)
	if !ok {
		return nil, fmt.Errorf("type %s is %T, not a struct", name, t)
	}
	return st, nil
}

// resolve strips typedefs and qualifiers.
func resolve(t dwarf.Type) dwarf.Type {
	for i := 0; i < 32; i++ {
		switch tt := t.(type) {
		case *dwarf.TypedefType:
			t = tt.Type
		case *dwarf.QualType:
			t = tt.Type
		default:
			return t
		}
	}
	return t
}

// FieldOffset returns the byte offset of a field path such as
// ("sched", "sp") within st, and the field's resolved type. Fields whose type
// is a single-field wrapper struct (atomic.Uint32 and friends) are accepted
// as they are: the value is at offset 0 of the wrapper.
func FieldOffset(st *dwarf.StructType, path ...string) (int64, dwarf.Type, error) {
	var off int64
	cur := dwarf.Type(st)
	for _, name := range path {
		s, ok := resolve(cur).(*dwarf.StructType)
		if !ok {
			return 0, nil, fmt.Errorf("field %s: %s is not a struct", name, cur)
		}
		var found *dwarf.StructField
		for _, f := range s.Field {
			if f.Name == name {
				found = f
				break
			}
		}
		if found == nil {
			return 0, nil, fmt.Errorf("no field %s in %s", strings.Join(path, "."), st.StructName)
		}
		off += found.ByteOffset
		cur = found.Type
	}
	return off, resolve(cur), nil
}
