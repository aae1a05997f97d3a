package trace

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/gi-debug/gi/elfbin"
)

var (
	// ErrNoReturn means a function has no RET instruction (an endless loop,
	// a function that only tail-jumps, or one that never returns): its
	// returns cannot be probed.
	ErrNoReturn = errors.New("function has no RET instruction")
	// ErrDecode means strict decoding failed somewhere in the function: a
	// probe placed by a desynchronized sweep could land mid-instruction and
	// corrupt the code, so the function is refused.
	ErrDecode = errors.New("instruction decoding failed")
)

// ProbeSites are where a tracer puts uprobes on one function.
type ProbeSites struct {
	// Entry is the first instruction after the stack-check prologue (the
	// fall-through of its conditional branch to morestack), or the
	// function's entry if it has no prologue. A probe there fires once per
	// call even when the stack grows: morestack re-runs the prologue only.
	Entry uint64
	// Returns are the addresses of every RET instruction.
	Returns []uint64
}

// prologueWindow is how many instructions the stack-check prologue spans at most.
const prologueWindow = 8

// stackguard0Offset is the offset of g.stackguard0, which the prologue
// compares the stack pointer with (g.stack is two words before it).
const stackguard0Offset = 16

// FindProbeSites decodes code, the bytes of one function starting at address
// entry, strictly from its first instruction to its end, for machine
// (elf.EM_X86_64 or elf.EM_AARCH64). A function without a RET gives
// ErrNoReturn together with its sites (Entry set, no Returns).
func FindProbeSites(machine elf.Machine, code []byte, entry uint64) (ProbeSites, error) {
	switch machine {
	case elf.EM_X86_64:
		return probeSitesX86(code, entry)
	case elf.EM_AARCH64:
		return probeSitesARM64(code, entry)
	}
	return ProbeSites{}, fmt.Errorf("probe sites for %v: %w", machine, elfbin.ErrUnsupportedArch)
}

func probeSitesX86(code []byte, entry uint64) (ProbeSites, error) {
	sites := ProbeSites{Entry: entry}
	guardCmp := -1 // index of the CMP against stackguard0, if seen
	prologueDone := false
	n := 0
	for off := 0; off < len(code); n++ {
		if allBytes(code[off:], 0xcc) {
			break // INT3 padding up to the next function
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			return ProbeSites{}, fmt.Errorf("decode at %#x: %w", entry+uint64(off), ErrDecode)
		}
		pc := entry + uint64(off)
		off += inst.Len
		if !prologueDone {
			switch {
			case n >= prologueWindow:
				prologueDone = true
			case inst.Op == x86asm.CMP && comparesStackGuard(inst.Args):
				guardCmp = n
			case guardCmp >= 0 && isCondJumpX86(inst.Op):
				sites.Entry = entry + uint64(off)
				prologueDone = true
			}
		}
		if inst.Op == x86asm.RET {
			sites.Returns = append(sites.Returns, pc)
		}
	}
	if len(sites.Returns) == 0 {
		return sites, ErrNoReturn // the entry site is still valid
	}
	return sites, nil
}

// comparesStackGuard reports whether a CMP reads stackguard0 of a g held in
// a register (R14 in ABIInternal code, a TLS-loaded register in assembly).
func comparesStackGuard(args x86asm.Args) bool {
	for _, a := range args {
		if m, ok := a.(x86asm.Mem); ok && m.Disp == stackguard0Offset && m.Base != 0 && m.Base != x86asm.RSP && m.Base != x86asm.RIP && m.Index == 0 {
			return true
		}
	}
	return false
}

func isCondJumpX86(op x86asm.Op) bool {
	switch op {
	case x86asm.JBE, x86asm.JB, x86asm.JA, x86asm.JAE, x86asm.JLE, x86asm.JL, x86asm.JG, x86asm.JGE:
		return true
	}
	return false
}

// probeSitesARM64 walks fixed-width instructions: no sweep can desync, so a
// word the decoder does not know (LSE atomics, MSR of newer system
// registers, literal data) is stepped over; it cannot be a RET, whose
// encoding the decoder knows. A function made mostly of unknown words is not
// code and is refused.
func probeSitesARM64(code []byte, entry uint64) (ProbeSites, error) {
	sites := ProbeSites{Entry: entry}
	guardLoad, guardCmp := -1, -1
	prologueDone := false
	unknown, words := 0, 0
	for off, n := 0, 0; off+4 <= len(code); off, n = off+4, n+1 {
		word := binary.LittleEndian.Uint32(code[off:])
		if word == 0 && allBytes(code[off:], 0) {
			break // zero padding up to the next function
		}
		words++
		pc := entry + uint64(off)
		inst, err := arm64asm.Decode(code[off : off+4])
		if err != nil {
			unknown++
			if n < prologueWindow {
				prologueDone = true // an unknown word in a prologue: keep the entry
			}
			continue
		}
		if !prologueDone {
			// MOVD 16(g), R16; [SUB $n, RSP, R17; BLO morestack;]
			// CMP R16, RSP|R17; BLS morestack
			switch {
			case n >= prologueWindow:
				prologueDone = true
			case inst.Op == arm64asm.LDR && strings.Contains(inst.String(), fmt.Sprintf("[X28,#%d]", stackguard0Offset)):
				guardLoad = n
			case guardLoad >= 0 && inst.Op == arm64asm.CMP:
				guardCmp = n
			case guardCmp >= 0 && inst.Op == arm64asm.B && isCond(inst.Args[0]):
				sites.Entry = pc + 4
				prologueDone = true
			}
		}
		if inst.Op == arm64asm.RET {
			sites.Returns = append(sites.Returns, pc)
		}
	}
	if len(code)%4 != 0 && !allBytes(code[len(code)&^3:], 0) {
		return ProbeSites{}, fmt.Errorf("function size %d is not a multiple of 4: %w", len(code), ErrDecode)
	}
	if unknown*4 > words {
		return ProbeSites{}, fmt.Errorf("%d of %d words at %#x are not instructions: %w", unknown, words, entry, ErrDecode)
	}
	if len(sites.Returns) == 0 {
		return sites, ErrNoReturn // the entry site is still valid
	}
	return sites, nil
}

func isCond(a arm64asm.Arg) bool {
	_, ok := a.(arm64asm.Cond)
	return ok
}

func allBytes(b []byte, v byte) bool {
	for _, c := range b {
		if c != v {
			return false
		}
	}
	return true
}
