// Package funcargs describes the arguments and results of Go functions
// from a binary's DWARF: their names, their types, and where each value is
// at a probe, in which registers or at which offset from the stack
// pointer.
//
// Types and argument locations are read with Delve's DWARF packages
// (godwarf for types, loclist and op for location lists). Arguments are
// located by their location lists at the probe's pc. Results have no
// location in Go's DWARF; at a RET they are where the register ABI
// assigns them (ABILocations), an assignment checked against the location
// lists of the arguments, for which both exist.
package funcargs

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"slices"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/loclist"
	"github.com/go-delve/delve/pkg/dwarf/op"

	"github.com/gi-debug/gi/internal/dwarfload"
)

// ErrNoDWARF is returned for a binary without debug information.
var ErrNoDWARF = errors.New("arguments need DWARF, and the binary has none (stripped)")

// Reader reads function descriptions from one binary's DWARF.
type Reader struct {
	Arch  *Arch
	dwarf *dwarf.Data
	loc   loclist.Reader
	addr  *godwarf.DebugAddrSection
	types map[dwarf.Offset]godwarf.Type
	// funcs holds the functions of the units indexed so far: the units
	// of the functions asked for, or every unit once indexed is set.
	funcs   map[string]subprogram
	units   map[dwarf.Offset]bool
	seek    *dwarf.Reader // finds units by pc, from the last one found
	indexed bool
	// rtypes maps the offset of a runtime type descriptor from the
	// module's types base to its DWARF type (built with the full index).
	rtypes map[uint64]dwarf.Offset
}

// subprogram is where a function's DWARF entry is, and what its unit's
// location lists are relative to.
type subprogram struct {
	off      dwarf.Offset
	cuBase   uint64 // the unit's low pc: base of its location lists
	addrBase int64  // the unit's DW_AT_addr_base (DWARF 5)
}

// Open prepares to read the DWARF of f, an ELF binary for GOARCH goarch.
func Open(f *elf.File, goarch string) (*Reader, error) {
	return OpenFrom(dwarfload.NewLoader(f), goarch)
}

// OpenFrom is Open reading the sections through l, which other readers of
// the same binary may share.
func OpenFrom(l *dwarfload.Loader, goarch string) (*Reader, error) {
	f := l.File()
	arch := ArchByName(goarch)
	if arch == nil {
		return nil, fmt.Errorf("arguments on %s: gi knows the register ABI of amd64 and arm64 only", goarch)
	}
	if f.Section(".debug_info") == nil && f.Section(".zdebug_info") == nil {
		return nil, ErrNoDWARF
	}
	// The location lists too; not the line and frame tables.
	d, sec, err := l.Open("loclists", "loc")
	if err != nil {
		return nil, err
	}
	r := &Reader{Arch: arch, dwarf: d, types: map[dwarf.Offset]godwarf.Type{},
		funcs: map[string]subprogram{}, units: map[dwarf.Offset]bool{}, seek: d.Reader()}
	if b := sec["loclists"]; len(b) > 0 {
		r.loc = loclist.NewDwarf5Reader(b)
	} else if b := sec["loc"]; len(b) > 0 {
		r.loc = loclist.NewDwarf2Reader(b, 8)
	}
	if b := sec["addr"]; len(b) > 0 {
		r.addr = godwarf.ParseAddr(b)
	}
	return r, nil
}

// Var is one argument or result of a function.
type Var struct {
	// Name is the name in the source; unnamed results are "~r0", "~r1"...
	Name string
	// Type is its type as DWARF describes it.
	Type godwarf.Type
	// Result is set for results.
	Result bool
	// location is the DW_AT_location attribute: an expression or the
	// offset of a location list.
	location any
}

// TypeName is the Go name of v's type ("int", "main.Point", "[]string").
func (v *Var) TypeName() string { return v.Type.String() }

// Func is a function's arguments (its receiver first) and results.
type Func struct {
	Name    string
	Entry   uint64
	Params  []*Var
	Results []*Var
	sub     subprogram
	reader  *Reader
}

// Func describes the function called name ("main.query",
// "main.(*Server).Handle") whose code holds pc (0 if not known). Only the
// unit holding pc is read, unless the function is not found there: asked
// in increasing pc order, the units are found in one pass.
func (r *Reader) Func(name string, pc uint64) (*Func, error) {
	sub, ok := r.funcs[name]
	found := false // the unit holding pc, where the function is if anywhere
	if !ok && pc != 0 {
		switch err := r.indexUnitAt(pc); {
		case err == nil:
			found = true
		case !errors.Is(err, dwarf.ErrUnknownPC):
			return nil, fmt.Errorf("read DWARF: %w", err)
		}
		sub, ok = r.funcs[name]
	}
	if !ok && !found && !r.indexed {
		if err := r.index(); err != nil {
			return nil, err
		}
		sub, ok = r.funcs[name]
	}
	if !ok {
		return nil, fmt.Errorf("%s: not in the binary's DWARF", name)
	}
	rd := r.dwarf.Reader()
	rd.Seek(sub.off)
	e, err := rd.Next()
	if err != nil || e == nil {
		return nil, fmt.Errorf("%s: read DWARF entry: %v", name, err)
	}
	fn := &Func{Name: name, sub: sub, reader: r}
	fn.Entry, _ = e.Val(dwarf.AttrLowpc).(uint64)
	if !e.Children {
		return fn, nil
	}
	for {
		c, err := rd.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: read DWARF: %w", name, err)
		}
		if c == nil || c.Tag == 0 {
			break
		}
		if c.Children {
			rd.SkipChildren()
		}
		if c.Tag != dwarf.TagFormalParameter {
			continue
		}
		v := &Var{location: c.Val(dwarf.AttrLocation)}
		v.Name, _ = c.Val(dwarf.AttrName).(string)
		v.Result, _ = c.Val(dwarf.AttrVarParam).(bool)
		toff, ok := c.Val(dwarf.AttrType).(dwarf.Offset)
		if !ok {
			return nil, fmt.Errorf("%s: %s has no type", name, v.Name)
		}
		if v.Type, err = godwarf.ReadType(r.dwarf, 0, toff, r.types); err != nil {
			return nil, fmt.Errorf("%s: type of %s: %w", name, v.Name, err)
		}
		if v.Result {
			// The compiler describes the result of a function with a
			// defer twice, under the same name: keep the first.
			if v.Name != "_" && slices.ContainsFunc(fn.Results, func(r *Var) bool { return r.Name == v.Name }) {
				continue
			}
			fn.Results = append(fn.Results, v)
		} else {
			fn.Params = append(fn.Params, v)
		}
	}
	return fn, nil
}

// RuntimeType returns the type whose runtime type descriptor is at offset
// off from the module's types base (runtime.types), nil if DWARF has no
// such type.
func (r *Reader) RuntimeType(off uint64) godwarf.Type {
	if !r.indexed {
		if err := r.index(); err != nil {
			return nil
		}
	}
	doff, ok := r.rtypes[off]
	if !ok {
		return nil
	}
	t, err := godwarf.ReadType(r.dwarf, 0, doff, r.types)
	if err != nil {
		return nil
	}
	return t
}

// indexUnitAt adds the functions of the unit whose code holds pc to
// funcs, unless that unit was indexed already.
func (r *Reader) indexUnitAt(pc uint64) error {
	cu, err := r.seek.SeekPC(pc)
	if err != nil {
		return err
	}
	if r.units[cu.Offset] {
		return nil
	}
	r.units[cu.Offset] = true
	cuBase, _ := cu.Val(dwarf.AttrLowpc).(uint64)
	addrBase, _ := cu.Val(dwarf.AttrAddrBase).(int64)
	for {
		e, err := r.seek.Next()
		if err != nil {
			return err
		}
		if e == nil || e.Tag == 0 {
			return nil
		}
		r.addSubprogram(e, cuBase, addrBase)
		if e.Children {
			r.seek.SkipChildren()
		}
	}
}

// addSubprogram adds e to funcs if it is a function with code.
func (r *Reader) addSubprogram(e *dwarf.Entry, cuBase uint64, addrBase int64) bool {
	if e.Tag != dwarf.TagSubprogram {
		return false
	}
	if name, ok := e.Val(dwarf.AttrName).(string); ok {
		if _, inlineOnly := e.Val(dwarf.AttrInline).(int64); !inlineOnly || e.Val(dwarf.AttrLowpc) != nil {
			r.funcs[name] = subprogram{off: e.Offset, cuBase: cuBase, addrBase: addrBase}
		}
	}
	return true
}

// index finds every function's entry and every type with a runtime type
// descriptor, unit by unit.
func (r *Reader) index() error {
	r.indexed = true
	r.rtypes = map[uint64]dwarf.Offset{}
	rd := r.dwarf.Reader()
	var cuBase uint64
	var addrBase int64
	for {
		e, err := rd.Next()
		if err != nil {
			return fmt.Errorf("read DWARF: %w", err)
		}
		if e == nil {
			return nil
		}
		switch {
		case e.Tag == dwarf.TagCompileUnit:
			cuBase, _ = e.Val(dwarf.AttrLowpc).(uint64)
			addrBase, _ = e.Val(dwarf.AttrAddrBase).(int64)
			r.units[e.Offset] = true
			continue
		case r.addSubprogram(e, cuBase, addrBase):
		default:
			if off, ok := e.Val(godwarf.AttrGoRuntimeType).(uint64); ok {
				if _, dup := r.rtypes[off]; !dup {
					r.rtypes[off] = e.Offset
				}
			}
		}
		if e.Children {
			rd.SkipChildren()
		}
	}
}

// Piece is one part of a value: in a register or on the stack.
type Piece struct {
	// Reg is the DWARF number of the register holding the piece (when
	// Stack is false).
	Reg uint64
	// Stack is set for a piece in memory at Offset from the stack pointer
	// (Location) or from the CFA (ABILocations).
	Stack  bool
	Offset int64
	// Size is the piece's size in bytes.
	Size int64
	// ValueOffset is where the piece goes in the value.
	ValueOffset int64
	// Float is set for a piece in a floating-point register.
	Float bool
	// Missing is set for a piece DWARF says is not available (optimized
	// away, or padding).
	Missing bool
}

// cfaBias keeps the CFA handed to the DWARF evaluator non-zero (it takes
// zero for unknown) when it is the stack pointer itself.
const cfaBias = 1 << 40

// Location returns where argument v is at pc, where the CFA is cfa bytes
// above the stack pointer: its pieces, stack offsets counted from the
// stack pointer.
func (f *Func) Location(v *Var, pc uint64, cfa int64) ([]Piece, error) {
	r := f.reader
	var instr []byte
	switch l := v.location.(type) {
	case []byte:
		instr = l
	case int64:
		if r.loc == nil {
			return nil, fmt.Errorf("%s: location list without a location list section", v.Name)
		}
		var debugAddr *godwarf.DebugAddr
		if r.addr != nil {
			debugAddr = r.addr.GetSubsection(uint64(f.sub.addrBase))
		}
		e, err := r.loc.Find(int(l), 0, f.sub.cuBase, pc, debugAddr)
		if err != nil {
			return nil, fmt.Errorf("%s: location list: %w", v.Name, err)
		}
		if e == nil {
			return nil, fmt.Errorf("%s: %w at %#x", v.Name, ErrNoLocation, pc)
		}
		instr = e.Instr
	default:
		return nil, fmt.Errorf("%s: %w", v.Name, ErrNoLocation)
	}
	if len(instr) == 0 {
		return nil, fmt.Errorf("%s: %w at %#x", v.Name, ErrNoLocation, pc)
	}
	regs := op.DwarfRegisters{CFA: cfaBias + cfa, FrameBase: cfaBias + cfa}
	addr, pieces, err := op.ExecuteStackProgram(regs, instr, 8, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: location at %#x: %w", v.Name, pc, err)
	}
	if pieces == nil {
		return []Piece{{Stack: true, Offset: addr - cfaBias, Size: v.Type.Size()}}, nil
	}
	out := make([]Piece, 0, len(pieces))
	var at int64
	for _, p := range pieces {
		q := Piece{Size: int64(p.Size), ValueOffset: at}
		switch p.Kind {
		case op.RegPiece:
			q.Reg, q.Float = p.Val, r.Arch.IsFloatReg(p.Val)
			if q.Size == 0 {
				q.Size = v.Type.Size()
			}
		case op.AddrPiece:
			q.Stack, q.Offset = true, int64(p.Val)-cfaBias
		default:
			q.Missing = true
		}
		at += q.Size
		out = append(out, q)
	}
	return out, nil
}

// ErrNoLocation means DWARF says nothing of where a variable is at a pc:
// the compiler emits no location list for the parameters of some
// functions (autogenerated wrappers), nor for parameters it never reads.
var ErrNoLocation = errors.New("no location")

// Located is where one argument or result is at a probe.
type Located struct {
	Var *Var
	// Pieces are its parts, stack offsets counted from the stack pointer
	// at the probe, each with where it goes in the value.
	Pieces []Piece
	// Unknown says why it cannot be located ("" when it can).
	Unknown string
}

// Locate says where f's arguments are at pc, a probe on f's entry path
// where the CFA is cfa bytes above the stack pointer (the argument
// registers untouched yet), and where its results are at each of its
// RETs, where the frame is gone and the stack pointer is the one of the
// entry. The arguments' registers and stack slots come from the DWARF
// location lists; where each piece goes in the value comes from the
// register ABI's assignment, which must agree with them piece by piece (an
// argument where they disagree is unknown, not guessed). An argument DWARF
// has no location for at pc is where the register ABI puts it: on the
// entry path the caller's assignment still stands.
func (f *Func) Locate(pc uint64, cfa int64) (params, results []Located, err error) {
	arch := f.reader.Arch
	var pt, rt []godwarf.Type
	for _, v := range f.Params {
		pt = append(pt, v.Type)
	}
	for _, v := range f.Results {
		rt = append(rt, v.Type)
	}
	abiParams, abiResults, err := ABILocations(arch, pt, rt)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	for i, v := range f.Params {
		l := Located{Var: v}
		pieces, err := f.Location(v, pc, cfa)
		switch {
		case errors.Is(err, ErrNoLocation):
			l.Pieces = spRelative(abiParams[i], cfa)
		case err != nil:
			l.Unknown = err.Error()
		default:
			if l.Pieces, err = matchABI(pieces, abiParams[i], v.Type.Size(), cfa); err != nil {
				l.Unknown = fmt.Sprintf("%s: %v", v.Name, err)
			}
		}
		params = append(params, l)
	}
	for i, v := range f.Results {
		results = append(results, Located{Var: v, Pieces: spRelative(abiResults[i], arch.CFAFromSP)})
	}
	return params, results, nil
}

// stackWithin reports whether every piece DWARF knows is a stack piece at
// its own place inside the ABI's stack slot w.
func stackWithin(got []Piece, w Piece) bool {
	for _, g := range got {
		if g.Missing {
			continue
		}
		if !g.Stack || g.Offset-w.Offset != g.ValueOffset || g.Offset+g.Size > w.Offset+w.Size {
			return false
		}
	}
	return true
}

// spRelative returns the register ABI's pieces of a value with their
// CFA-relative stack offsets made SP-relative (the CFA cfa bytes above
// the stack pointer).
func spRelative(abi []Piece, cfa int64) []Piece {
	out := append([]Piece(nil), abi...)
	for i := range out {
		if out[i].Stack {
			out[i].Offset += cfa
		}
	}
	return out
}

// matchABI checks where DWARF says an argument is on the entry path
// against the register ABI's assignment, and returns the ABI's pieces
// (SP-relative, the CFA cfa bytes above the stack pointer), which also say
// where each piece goes in the value. They must agree where DWARF knows:
//   - DWARF describes a value the ABI puts on the stack whole as one piece
//     per word at consecutive slots: one piece, as the ABI has it;
//   - a piece DWARF marks missing (a part the function never reads) is
//     where the ABI puts it;
//   - a value the ABI puts on the stack may be described in part (a
//     slice's pointer and length, not its unused capacity): each part at
//     its place in the ABI's slot;
//   - a value DWARF places whole in one stack slot while the ABI passes it
//     in registers is DWARF naming the slot the function spills it to
//     later (seen for unnamed parameters): on the entry path the
//     registers hold it.
//
// Any other difference is an error: the value is not guessed.
func matchABI(dwarfPieces, abi []Piece, size, cfa int64) ([]Piece, error) {
	want := spRelative(abi, cfa)
	var got []Piece
	for _, p := range dwarfPieces {
		if n := len(got); n > 0 && p.Stack && !p.Missing && got[n-1].Stack && !got[n-1].Missing && got[n-1].Offset+got[n-1].Size == p.Offset {
			got[n-1].Size += p.Size
			continue
		}
		got = append(got, p)
	}
	if len(got) == 1 && got[0].Stack && !got[0].Missing && got[0].Size == size && !slices.ContainsFunc(want, func(p Piece) bool { return p.Stack }) {
		return want, nil
	}
	if len(want) == 1 && want[0].Stack && stackWithin(got, want[0]) {
		return want, nil
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("DWARF has %d pieces, the register ABI %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.Missing {
			continue
		}
		if g.Stack != w.Stack || g.Size != w.Size || (w.Stack && g.Offset != w.Offset) || (!w.Stack && g.Reg != w.Reg) {
			return nil, fmt.Errorf("DWARF and the register ABI disagree on piece %d", i)
		}
	}
	return want, nil
}
