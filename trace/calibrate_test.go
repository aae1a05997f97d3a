package trace

import (
	"debug/elf"
	"testing"

	"github.com/cilium/ebpf/features"

	"github.com/gi-debug/gi/internal/targets"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		machine elf.Machine
		code    []byte
		want    siteClass
	}{
		{elf.EM_X86_64, []byte{0x55}, classEmulated},                    // PUSHQ BP
		{elf.EM_X86_64, []byte{0x41, 0x57}, classEmulated},              // PUSHQ R15
		{elf.EM_X86_64, []byte{0xe8, 0, 0, 0, 0}, classEmulated},        // CALL rel32
		{elf.EM_X86_64, []byte{0x74, 0x05}, classEmulated},              // JE rel8
		{elf.EM_X86_64, []byte{0xc3}, classStepped},                     // RET
		{elf.EM_X86_64, []byte{0x48, 0x89, 0xe5}, classStepped},         // MOVQ SP, BP
		{elf.EM_X86_64, []byte{0xff, 0x34, 0x24}, classStepped},         // PUSHQ (SP): memory operand
		{elf.EM_X86_64, []byte{0x0f}, classStepped},                     // does not decode
		{elf.EM_AARCH64, []byte{0xc0, 0x03, 0x5f, 0xd6}, classEmulated}, // RET
		{elf.EM_AARCH64, []byte{0x00, 0x00, 0x00, 0x94}, classEmulated}, // BL
		{elf.EM_AARCH64, []byte{0xfe, 0x0f, 0x1f, 0xf8}, classStepped},  // MOVD.W R30, -16(RSP)
		{elf.EM_AARCH64, []byte{0x00, 0x00, 0x00}, classStepped},        // short
	} {
		if got := classify(c.machine, c.code); got != c.want {
			t.Errorf("classify(%v, % x) = %d, want %d", c.machine, c.code, got, c.want)
		}
	}
}

// TestCalibrateProbes measures the probe costs with each attach mechanism
// the kernel offers: both figures measured, an emulated hit cheaper than
// a single-stepped one.
func TestCalibrateProbes(t *testing.T) {
	targets.RequirePrivilege(t, "eBPF uprobes")
	for _, multi := range []bool{true, false} {
		if multi && features.HaveBPFLinkUprobeMulti() != nil {
			continue
		}
		c, err := measureProbes(multi)
		if err != nil {
			t.Fatalf("multi=%v: %v", multi, err)
		}
		t.Logf("multi=%v: %v", multi, c)
		if c.Emulated >= c.Stepped {
			t.Errorf("multi=%v: an emulated hit costs %v, a single-stepped one %v", multi, c.Emulated, c.Stepped)
		}
	}
}
