package ptrace

import (
	"bytes"
	"fmt"
)

// Gadget locates the instructions Freeze has a stopped thread run, in the
// Go runtime's runtime.exit (the same on every release gi supports):
//
//	amd64: MOVL $231, AX; SYSCALL; RET
//	arm64: MOVD $94, R8; SVC $0; RET
//
// The thread makes its system call at Syscall; the process the call
// creates, which gi stops before it runs, would return from there to Exit
// (the RET pops the word gi put under the stack pointer, or jumps to the
// link register gi set), which ends it with exit_group: should gi die
// before it ends the copy, the copy ends itself the moment it runs.
type Gadget struct {
	// Syscall is the address of the system call instruction.
	Syscall uint64
	// Exit is the address of the instruction sequence that calls
	// exit_group.
	Exit uint64
}

// exitSequences are runtime.exit's last instructions: the exit_group
// number loaded, the system call, the return.
var exitSequences = map[string]struct {
	code    []byte
	syscall int // the system call instruction's offset in code
}{
	"amd64": {[]byte{0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05, 0xc3}, 5},
	"arm64": {[]byte{0xc8, 0x0b, 0x80, 0xd2, 0x01, 0, 0, 0xd4, 0xc0, 0x03, 0x5f, 0xd6}, 4},
}

// ExitGadget finds the Gadget in the code of runtime.exit, which starts
// at entry, for arch ("amd64", "arm64").
func ExitGadget(arch string, entry uint64, code []byte) (Gadget, error) {
	seq, ok := exitSequences[arch]
	if !ok {
		return Gadget{}, fmt.Errorf("no exit gadget known for %s", arch)
	}
	i := bytes.Index(code, seq.code)
	if i < 0 {
		return Gadget{}, fmt.Errorf("runtime.exit at %#x: no exit_group sequence in its %d bytes", entry, len(code))
	}
	return Gadget{Syscall: entry + uint64(i+seq.syscall), Exit: entry + uint64(i)}, nil
}

// check reads the gadget's instructions back from the stopped thread tid.
func (g Gadget) check(tid int, arch string) error {
	seq, ok := exitSequences[arch]
	if !ok {
		return fmt.Errorf("no exit gadget known for %s", arch)
	}
	got := make([]byte, len(seq.code))
	if n, err := peek(tid, g.Exit, got); err != nil || n != len(got) {
		return fmt.Errorf("read the exit gadget at %#x: %v", g.Exit, err)
	}
	if !bytes.Equal(got, seq.code) || g.Syscall != g.Exit+uint64(seq.syscall) {
		return fmt.Errorf("the code at %#x is not runtime.exit's exit_group sequence", g.Exit)
	}
	return nil
}
