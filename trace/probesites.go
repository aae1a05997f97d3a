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
	"github.com/gi-debug/gi/runtimelayout"
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
// compares the stack pointer with.
const stackguard0Offset = runtimelayout.GStackguard0

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

// SiteStep is what the instruction at a probe site does before the probed
// thread can take a signal the probe sends it (the kernel delivers it once
// the instruction has run): where the thread then is, and which
// floating-point registers the instruction wrote.
type SiteStep struct {
	// Return is set for a RET: the thread is at the return address.
	Return bool
	// Next is where the thread is, relative to the site (Return unset).
	Next int64
	// Writes maps the DWARF numbers of the floating-point registers the
	// instruction writes to the instruction's text.
	Writes map[uint64]string
	// Unknown says why where the thread is cannot be told ("" when it
	// can): a conditional or indirect branch.
	Unknown string
}

// StepAt decodes the instruction at the start of code, a probe site, for
// machine (elf.EM_X86_64 or elf.EM_AARCH64).
func StepAt(machine elf.Machine, code []byte) (SiteStep, error) {
	switch machine {
	case elf.EM_X86_64:
		return stepX86(code)
	case elf.EM_AARCH64:
		return stepARM64(code)
	}
	return SiteStep{}, fmt.Errorf("instruction step for %v: %w", machine, elfbin.ErrUnsupportedArch)
}

func stepX86(code []byte) (SiteStep, error) {
	inst, err := x86asm.Decode(code, 64)
	if err != nil || inst.Len == 0 || inst.Op == 0 { // Op 0: a lone prefix, the rest cut off
		return SiteStep{}, fmt.Errorf("decode probe site: %w", ErrDecode)
	}
	step := SiteStep{Next: int64(inst.Len)}
	switch {
	case inst.Op == x86asm.RET:
		return SiteStep{Return: true}, nil
	case inst.Op == x86asm.JMP || inst.Op == x86asm.CALL:
		rel, ok := inst.Args[0].(x86asm.Rel)
		if !ok {
			step.Unknown = "an indirect branch"
		}
		step.Next += int64(rel)
	case isCondJumpX86(inst.Op) || strings.HasPrefix(inst.Op.String(), "J") || strings.HasPrefix(inst.Op.String(), "LOOP"):
		step.Unknown = "a conditional branch"
	}
	// Intel operand order: the destination first. Two SSE4.2 string
	// compares also write X0 implicitly.
	written := []x86asm.Arg{inst.Args[0]}
	if inst.Op == x86asm.PCMPESTRM || inst.Op == x86asm.PCMPISTRM {
		written = append(written, x86asm.X0)
	}
	for _, a := range written {
		r, ok := a.(x86asm.Reg)
		if !ok {
			continue
		}
		var n int
		switch {
		case r >= x86asm.X0 && r <= x86asm.X15:
			n = int(r - x86asm.X0)
		case r >= x86asm.Y0 && r <= x86asm.Y15:
			n = int(r - x86asm.Y0)
		default:
			continue
		}
		if step.Writes == nil {
			step.Writes = map[uint64]string{}
		}
		step.Writes[17+uint64(n)] = x86asm.GoSyntax(inst, 0, nil)
	}
	return step, nil
}

func stepARM64(code []byte) (SiteStep, error) {
	if len(code) < 4 {
		return SiteStep{}, fmt.Errorf("decode probe site: %w", ErrDecode)
	}
	inst, err := arm64asm.Decode(code[:4])
	if err != nil {
		return SiteStep{}, fmt.Errorf("decode probe site: %w", ErrDecode)
	}
	step := SiteStep{Next: 4}
	switch inst.Op {
	case arm64asm.RET:
		return SiteStep{Return: true}, nil
	case arm64asm.B, arm64asm.BL:
		if isCond(inst.Args[0]) {
			step.Unknown = "a conditional branch"
			break
		}
		if pc, ok := inst.Args[0].(arm64asm.PCRel); ok {
			step.Next = int64(pc)
		}
	case arm64asm.BR, arm64asm.BLR, arm64asm.CBZ, arm64asm.CBNZ, arm64asm.TBZ, arm64asm.TBNZ:
		step.Unknown = "a branch"
	}
	// The destination is the first operand (the first two for a load of a
	// pair), except for stores, which read theirs.
	var written []arm64asm.Arg
	if !strings.HasPrefix(inst.Op.String(), "ST") {
		written = append(written, inst.Args[0])
		if strings.HasPrefix(inst.Op.String(), "LD") {
			written = append(written, inst.Args[1])
		}
	}
	for _, a := range written {
		if a == nil {
			continue
		}
		if n, ok := arm64FloatReg(a.String()); ok {
			if step.Writes == nil {
				step.Writes = map[uint64]string{}
			}
			step.Writes[64+uint64(n)] = arm64asm.GoSyntax(inst, 0, nil, nil)
		}
	}
	return step, nil
}

// arm64FloatReg parses the number of a SIMD&FP register operand as the
// decoder prints it: B0, H0, S0, D0, Q0, V0, V0.4S, V0.D[1].
func arm64FloatReg(s string) (int, bool) {
	if len(s) < 2 || !strings.ContainsRune("BHSDQV", rune(s[0])) {
		return 0, false
	}
	n, i := 0, 1
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
	}
	if i == 1 || n > 31 || (i < len(s) && s[i] != '.') {
		return 0, false
	}
	return n, true
}
