package bpf

import (
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/regnum"
)

// TestRegisterWords checks where the probe programs find each register a
// plan reads: RegisterWord's word of the kernel's struct pt_regs for each
// DWARF register number (Delve's regnum, from the psABIs) on arm64
// (regs[31] then sp; amd64's against x/sys in registers_amd64_test.go,
// which x/sys declares on amd64 hosts only), and FloatRegisterIndex against the DWARF numbers of X0-X15 and
// V0-V15.
func TestRegisterWords(t *testing.T) {
	// arm64's struct user_pt_regs: regs[31], sp, pc, pstate (x/sys
	// declares PtraceRegsArm64 on arm and arm64 hosts only).
	for reg := uint64(regnum.ARM64_X0); reg <= regnum.ARM64_X0+30; reg++ {
		if w, ok := RegisterWord("arm64", reg); !ok || w != int(reg-regnum.ARM64_X0) {
			t.Errorf("arm64 DWARF %d (x%d): word %d (%v)", reg, reg-regnum.ARM64_X0, w, ok)
		}
	}
	if w, ok := RegisterWord("arm64", regnum.ARM64_SP); !ok || w != 31 {
		t.Errorf("arm64 sp: word %d (%v), want 31", w, ok)
	}
	for _, c := range []struct {
		arch  string
		first uint64
	}{{"amd64", regnum.AMD64_XMM0}, {"arm64", regnum.ARM64_V0}} {
		for i := range uint64(FloatRegisters) {
			if got, ok := FloatRegisterIndex(c.arch, c.first+i); !ok || got != int(i) {
				t.Errorf("%s float register %d (DWARF %d): index %d (%v)", c.arch, i, c.first+i, got, ok)
			}
			if _, ok := RegisterWord(c.arch, c.first+i); ok {
				t.Errorf("%s float register %d (DWARF %d) said to be a word of pt_regs", c.arch, i, c.first+i)
			}
		}
		if _, ok := FloatRegisterIndex(c.arch, c.first+FloatRegisters); ok {
			t.Errorf("%s: DWARF %d said to be a float register the probes read", c.arch, c.first+FloatRegisters)
		}
	}
}
