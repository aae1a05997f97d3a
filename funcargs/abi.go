package funcargs

import (
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/regnum"
)

// Arch is what the register ABI of one architecture needs: the registers
// it assigns integers and floats to, in order (DWARF numbers), and where
// the stack-assigned arguments start, counted from the canonical frame
// address.
type Arch struct {
	Name      string
	IntRegs   []uint64
	FloatRegs []uint64
	// ArgsFromCFA is the offset of the first stack-assigned argument from
	// the CFA: on amd64 the CFA is just past the return address, where the
	// arguments start; on arm64 it is the caller's SP, whose first word is
	// the caller's saved link register.
	ArgsFromCFA int64
	// CFAFromSP is how far the CFA is above the stack pointer at a
	// function's entry and at its RET, where the frame is not set up (the
	// return address on amd64).
	CFAFromSP int64
	// RegName names a DWARF register number.
	RegName func(uint64) string
}

// AMD64 is Go's internal register ABI on x86-64: RAX, RBX, RCX, RDI, RSI,
// R8-R11 for integers, X0-X14 for floats.
var AMD64 = &Arch{
	Name:        "amd64",
	IntRegs:     []uint64{regnum.AMD64_Rax, regnum.AMD64_Rbx, regnum.AMD64_Rcx, regnum.AMD64_Rdi, regnum.AMD64_Rsi, regnum.AMD64_R8, regnum.AMD64_R9, regnum.AMD64_R10, regnum.AMD64_R11},
	FloatRegs:   seq(regnum.AMD64_XMM0, 15),
	ArgsFromCFA: 0,
	CFAFromSP:   8,
	RegName:     regnum.AMD64ToName,
}

// ARM64 is Go's internal register ABI on arm64: R0-R15 for integers,
// F0-F15 for floats.
var ARM64 = &Arch{
	Name:        "arm64",
	IntRegs:     seq(regnum.ARM64_X0, 16),
	FloatRegs:   seq(regnum.ARM64_V0, 16),
	ArgsFromCFA: 8,
	CFAFromSP:   0,
	RegName:     regnum.ARM64ToName,
}

func seq(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

// ArchByName returns the ABI of GOARCH name, nil if gi does not know it.
func ArchByName(name string) *Arch {
	switch name {
	case "amd64":
		return AMD64
	case "arm64":
		return ARM64
	}
	return nil
}

// IsFloatReg tells whether DWARF register r is one of the ABI's float
// registers (which uprobe programs read through a signal's frame).
func (a *Arch) IsFloatReg(r uint64) bool {
	for _, f := range a.FloatRegs {
		if f == r {
			return true
		}
	}
	return false
}

// assigner assigns values to registers and stack slots the way the Go
// compiler does (the "Go internal ABI specification", cmd/compile/abi-internal.md):
// each value whole to registers, or, when they run out, whole to the stack.
type assigner struct {
	arch       *Arch
	ints, flts int
	stack      int64 // offset in the stack-assigned area
	pieces     []Piece
}

// assign places a value of type t and returns its pieces.
func (a *assigner) assign(t godwarf.Type) ([]Piece, error) {
	ints, flts, n := a.ints, a.flts, len(a.pieces)
	ok, err := a.regs(t, 0)
	if err != nil {
		return nil, err
	}
	if ok {
		out := append([]Piece(nil), a.pieces[n:]...)
		a.pieces = a.pieces[:n]
		return out, nil
	}
	// Not enough registers: the whole value goes on the stack.
	a.ints, a.flts, a.pieces = ints, flts, a.pieces[:n]
	size, align := t.Size(), t.Align()
	if align < 1 {
		align = 1
	}
	a.stack = (a.stack + align - 1) / align * align
	p := Piece{Stack: true, Offset: a.stack, Size: size}
	a.stack += size
	if size == 0 {
		return nil, nil
	}
	return []Piece{p}, nil
}

// regs tries to assign t (at byte offset off of the value) to registers.
func (a *assigner) regs(t godwarf.Type, off int64) (bool, error) {
	switch t := resolve(t).(type) {
	case *godwarf.IntType, *godwarf.UintType, *godwarf.BoolType, *godwarf.CharType, *godwarf.UcharType,
		*godwarf.PtrType, *godwarf.FuncType, *godwarf.MapType, *godwarf.ChanType, *godwarf.AddrType:
		return a.intReg(t.Size(), off), nil
	case *godwarf.FloatType:
		return a.floatReg(t.Size(), off), nil
	case *godwarf.ComplexType:
		half := t.Size() / 2
		return a.floatReg(half, off) && a.floatReg(half, off+half), nil
	case *godwarf.StringType:
		return a.intReg(8, off) && a.intReg(8, off+8), nil
	case *godwarf.InterfaceType:
		return a.intReg(8, off) && a.intReg(8, off+8), nil
	case *godwarf.SliceType:
		return a.intReg(8, off) && a.intReg(8, off+8) && a.intReg(8, off+16), nil
	case *godwarf.StructType:
		for _, f := range t.Field {
			ok, err := a.regs(f.Type, off+f.ByteOffset)
			if !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	case *godwarf.ArrayType:
		switch t.Count {
		case 0:
			return true, nil
		case 1:
			return a.regs(t.Type, off)
		}
		return false, nil
	default:
		return false, fmt.Errorf("no register assignment for %s (%T)", t, t)
	}
}

func (a *assigner) intReg(size, off int64) bool {
	if a.ints == len(a.arch.IntRegs) {
		return false
	}
	a.pieces = append(a.pieces, Piece{Reg: a.arch.IntRegs[a.ints], Size: size, ValueOffset: off})
	a.ints++
	return true
}

func (a *assigner) floatReg(size, off int64) bool {
	if a.flts == len(a.arch.FloatRegs) {
		return false
	}
	a.pieces = append(a.pieces, Piece{Reg: a.arch.FloatRegs[a.flts], Size: size, ValueOffset: off, Float: true})
	a.flts++
	return true
}

// resolve strips named types down to what they are built from.
func resolve(t godwarf.Type) godwarf.Type {
	for i := 0; i < 100; i++ {
		switch td := t.(type) {
		case *godwarf.TypedefType:
			t = td.Type
		case *godwarf.QualType:
			t = td.Type
		default:
			return t
		}
	}
	return t
}

// ABILocations assigns a function's parameters, then its results, the way
// the compiler does; stack pieces are offsets from the CFA (the start of
// the argument area plus arch.ArgsFromCFA).
func ABILocations(arch *Arch, params, results []godwarf.Type) (paramLocs, resultLocs [][]Piece, err error) {
	a := &assigner{arch: arch}
	for _, t := range params {
		p, err := a.assign(t)
		if err != nil {
			return nil, nil, err
		}
		paramLocs = append(paramLocs, p)
	}
	// Results start over with the registers, after the stack-assigned
	// arguments aligned to a pointer.
	a.ints, a.flts = 0, 0
	a.stack = (a.stack + 7) / 8 * 8
	for _, t := range results {
		p, err := a.assign(t)
		if err != nil {
			return nil, nil, err
		}
		resultLocs = append(resultLocs, p)
	}
	for _, locs := range [][][]Piece{paramLocs, resultLocs} {
		for _, l := range locs {
			for i := range l {
				if l[i].Stack {
					l[i].Offset += arch.ArgsFromCFA
				}
			}
		}
	}
	return paramLocs, resultLocs, nil
}
