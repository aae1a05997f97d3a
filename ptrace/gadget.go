package ptrace

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Gadget locates the instructions of the Go runtime that Freeze has a
// stopped thread run, and the one place a thread may be made to run them
// from. A thread is only ever made to call from runtime.futex, parked in
// a FUTEX_WAIT (Parked): its caller, runtime.futexsleep, ignores what the
// wait returns and waits again if it must. Each call is arranged so that
// the thread, let go in the middle of it by a tracer that dies, returns
// from runtime.futex as from a wait that woke early, and the copy a clone
// made ends itself at once (exit_group):
//
//   - clone is made at runtime.clone's system call instruction. Its
//     parent side stores the result where runtime.futex stores its own
//     (both frameless, with the same arguments' frame) and returns to
//     runtime.futex's caller (amd64: the word at the stack pointer, which
//     the thread keeps; arm64: the link register, which it keeps). Its
//     child side, with no M, calls fn, the gadget's Exit, which ends the
//     copy: on amd64 fn, m and g are registers (R12, R13, R9) and the
//     copy's stack is the thread's own, in its own memory; on arm64 they
//     are read under the copy's stack, with the runtime's mark, words gi
//     writes on the thread's stack under its stack pointer and puts back.
//   - Calls that create nothing (wait4) are made at runtime.exit's system
//     call instruction, followed by RET: the thread's own stack pointer
//     and link register return it to runtime.futex's caller.
type Gadget struct {
	// Syscall is the address of runtime.exit's system call instruction,
	// followed by a return.
	Syscall uint64
	// Exit is the address of the instruction sequence that calls
	// exit_group (runtime.exit's number load).
	Exit uint64
	// Clone is the address of runtime.clone's system call instruction,
	// where clone is made.
	Clone uint64
	// Futex is the address of runtime.futex's system call instruction,
	// where a parked thread stands (or just past it).
	Futex uint64
}

// Code is a function's machine code as the process maps it: its entry
// address and bytes.
type Code struct {
	Entry uint64
	Bytes []byte
}

// sequence is machine code to find: what it is, its bytes, and the
// offset of the system call instruction in them.
type sequence struct {
	code    []byte
	syscall int
}

// arm64 instruction words, little-endian.
func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// gadgetCode is, per architecture, what Gadget's functions must hold (the
// same on every Go release gi supports, 1.20 to 1.27):
//
//   - exit: runtime.exit's exit_group number load, system call, return;
//   - futexEntry: runtime.futex's first instruction, which reads its
//     first argument one word above the stack pointer (no frame);
//   - futex: its futex number load, system call, result store and
//     return;
//   - clone: runtime.clone from its clone number load to the child's
//     branch to calling fn when m is nil (amd64: the check of R13; arm64:
//     the check of the mark 1234 under its stack and the loads of fn, g
//     and m from under it); cloneCall, where that branch lands: fn called
//     (amd64: CALL R12; arm64: MOVD R12, R0; CALL (R0)).
var gadgetCode = map[string]struct {
	exit, futexEntry, futex, clone, cloneCall sequence
}{
	"amd64": {
		exit:       sequence{[]byte{0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05, 0xc3}, 5},
		futexEntry: sequence{[]byte{0x48, 0x8b, 0x7c, 0x24, 0x08}, 0},
		futex:      sequence{[]byte{0xb8, 0xca, 0, 0, 0, 0x0f, 0x05, 0x89, 0x44, 0x24, 0x30, 0xc3}, 5},
		clone: sequence{[]byte{
			0xb8, 0x38, 0, 0, 0, 0x0f, 0x05, // MOVL $56, AX; SYSCALL
			0x48, 0x83, 0xf8, 0x00, 0x74, 0x05, 0x89, 0x44, 0x24, 0x30, 0xc3, // parent: CMPQ AX, $0; JEQ child; MOVL AX, 0x30(SP); RET
			0x48, 0x89, 0xf4, // child: MOVQ SI, SP
			0x49, 0x83, 0xfd, 0x00, 0x74, // CMPQ R13, $0; JEQ nog2 (its 8-bit displacement follows)
		}, 5},
		cloneCall: sequence{[]byte{0x41, 0xff, 0xd4}, 0}, // nog2: CALL R12
	},
	"arm64": {
		exit:       sequence{words(0xd2800bc8, 0xd4000001, 0xd65f03c0), 4},
		futexEntry: sequence{words(0xf94007e0), 0},
		futex:      sequence{words(0xd2800c48, 0xd4000001, 0xb90033e0, 0xd65f03c0), 4},
		clone: sequence{words(
			0xd2801b88, 0xd4000001, // MOVD $220, R8; SVC
			0xeb1f001f, 0x54000060, 0xb90033e0, 0xd65f03c0, // parent: CMP ZR, R0; BEQ child; MOVW R0, 48(RSP); RET
			0xf85e03ea, 0xd2809a40, 0xeb00015f, 0x54000060, // child: MOVD -32(RSP), R10; MOVD $1234, R0; CMP; BEQ good
			0xaa1f03e0, 0xf9000000, // crash
			0xd2801648, 0xd4000001, // good: gettid
			0xf85e83ec, 0xf85f03eb, 0xf85f83ea, // MOVD -24(RSP), R12; -16(RSP), R11; -8(RSP), R10
			0xf100015f, 0x540000c0, // CMP $0, R10; BEQ nog
		), 4},
		cloneCall: sequence{words(0xaa0c03e0, 0xd63f0000), 0},
	},
}

// syscallLen is the length of the system call instruction.
var syscallLen = map[string]uint64{"amd64": 2, "arm64": 4}

// find returns the address of seq's system call instruction in c.
func (c Code) find(seq sequence, what string) (uint64, error) {
	i := bytes.Index(c.Bytes, seq.code)
	if i < 0 {
		return 0, fmt.Errorf("%s at %#x: not the runtime's code gi knows (%d bytes)", what, c.Entry, len(c.Bytes))
	}
	return c.Entry + uint64(i+seq.syscall), nil
}

// FindGadget finds the Gadget for arch ("amd64", "arm64") in the code of
// runtime.exit, runtime.futex and runtime.clone.
func FindGadget(arch string, exit, futex, clone Code) (Gadget, error) {
	seqs, ok := gadgetCode[arch]
	if !ok {
		return Gadget{}, fmt.Errorf("no exit gadget known for %s", arch)
	}
	var g Gadget
	var err error
	if g.Syscall, err = exit.find(seqs.exit, "runtime.exit"); err != nil {
		return Gadget{}, err
	}
	g.Exit = g.Syscall - uint64(seqs.exit.syscall)
	if !bytes.HasPrefix(futex.Bytes, seqs.futexEntry.code) {
		return Gadget{}, fmt.Errorf("runtime.futex at %#x: a frame gi does not know", futex.Entry)
	}
	if g.Futex, err = futex.find(seqs.futex, "runtime.futex"); err != nil {
		return Gadget{}, err
	}
	if g.Clone, err = clone.find(seqs.clone, "runtime.clone"); err != nil {
		return Gadget{}, err
	}
	// Where the child's branch to calling fn with no M lands.
	end := g.Clone - clone.Entry - uint64(seqs.clone.syscall) + uint64(len(seqs.clone.code))
	var call uint64
	switch arch {
	case "amd64": // JEQ's displacement, from the instruction's end
		if end >= uint64(len(clone.Bytes)) {
			return Gadget{}, fmt.Errorf("runtime.clone at %#x: cut short", clone.Entry)
		}
		call = end + 1 + uint64(clone.Bytes[end])
	default: // arm64: BEQ 6(PC), the branch the sequence ends with
		call = end + 5*4
	}
	if call+uint64(len(seqs.cloneCall.code)) > uint64(len(clone.Bytes)) ||
		!bytes.Equal(clone.Bytes[call:call+uint64(len(seqs.cloneCall.code))], seqs.cloneCall.code) {
		return Gadget{}, fmt.Errorf("runtime.clone at %#x: its child does not call fn where gi expects", clone.Entry)
	}
	return g, nil
}

// futexWait is FUTEX_WAIT, and futexCmdMask the bits of a futex
// operation that are not flags (FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME).
const (
	futexWait    = 0
	futexCmdMask = ^uint64(128 | 256)
)

// parked tells whether a thread stopped at pc, with futex operation op
// in its second argument register, is parked in runtime.futex's
// FUTEX_WAIT: on its system call instruction (arm64 rewinds a blocked
// call there before the stop) or just past it.
func (g Gadget) parked(arch string, pc, op uint64) bool {
	if g.Futex == 0 || op&futexCmdMask != futexWait {
		return false
	}
	return pc == g.Futex || pc == g.Futex+syscallLen[arch]
}

// check reads the gadget's instructions back from the stopped thread tid.
func (g Gadget) check(tid int, arch string) error {
	seqs, ok := gadgetCode[arch]
	if !ok {
		return fmt.Errorf("no exit gadget known for %s", arch)
	}
	expect := []struct {
		at  uint64
		seq sequence
	}{{g.Exit, seqs.exit}, {g.Futex - uint64(seqs.futex.syscall), seqs.futex}, {g.Clone - uint64(seqs.clone.syscall), seqs.clone}}
	for _, e := range expect {
		got := make([]byte, len(e.seq.code))
		if n, err := peek(tid, e.at, got); err != nil || n != len(got) {
			return fmt.Errorf("read the runtime's code at %#x: %v", e.at, err)
		}
		if !bytes.Equal(got, e.seq.code) {
			return fmt.Errorf("the code at %#x is not the runtime's code gi knows", e.at)
		}
	}
	if g.Syscall != g.Exit+uint64(seqs.exit.syscall) {
		return fmt.Errorf("the gadget's system call %#x is not runtime.exit's", g.Syscall)
	}
	return nil
}
