package trace_test

import (
	"debug/elf"
	"encoding/binary"
	"maps"
	"slices"
	"testing"

	"github.com/gi-debug/gi/trace"
)

// TestStepAt checks what gi takes an instruction at a probe site to do
// before the signal that reads float registers: where the thread is next,
// and which float registers (DWARF numbers) it overwrote first. The
// instructions are those the Go compiler puts at entry sites (from
// objdump of testdata/argfuncs, amd64 and arm64).
func TestStepAt(t *testing.T) {
	le32 := func(w uint32) []byte { return binary.LittleEndian.AppendUint32(nil, w) }
	for _, tc := range []struct {
		name    string
		machine elf.Machine
		code    []byte
		ret     bool
		next    int64
		writes  []uint64
		unknown bool
	}{
		{"PUSHQ BP", elf.EM_X86_64, []byte{0x55}, false, 1, nil, false},
		{"CVTSS2SD X0, X0", elf.EM_X86_64, []byte{0xf3, 0x0f, 0x5a, 0xc0}, false, 4, []uint64{17}, false},
		{"ADDSD X1, X0", elf.EM_X86_64, []byte{0xf2, 0x0f, 0x58, 0xc1}, false, 4, []uint64{17}, false},
		{"MOVSS X0, 0x40(SP) (a store)", elf.EM_X86_64, []byte{0xf3, 0x0f, 0x11, 0x44, 0x24, 0x40}, false, 6, nil, false},
		{"MOVSD 0x8(SP), X3 (a load)", elf.EM_X86_64, []byte{0xf2, 0x0f, 0x10, 0x5c, 0x24, 0x08}, false, 6, []uint64{20}, false},
		{"XORL CX, CX", elf.EM_X86_64, []byte{0x31, 0xc9}, false, 2, nil, false},
		{"JMP +11", elf.EM_X86_64, []byte{0xeb, 0x0b}, false, 13, nil, false},
		{"JBE", elf.EM_X86_64, []byte{0x0f, 0x86, 0x8f, 0, 0, 0}, false, 0, nil, true},
		{"RET", elf.EM_X86_64, []byte{0xc3}, true, 0, nil, false},
		{"MOVD.W R30, -64(RSP)", elf.EM_AARCH64, le32(0xf81c0ffe), false, 4, nil, false},
		{"FMOVS F0, 72(RSP) (a store)", elf.EM_AARCH64, le32(0xbd004be0), false, 4, nil, false},
		{"FCVTSD F0, F0", elf.EM_AARCH64, le32(0x1e22c000), false, 4, []uint64{64}, false},
		{"FADDD F1, F0, F0", elf.EM_AARCH64, le32(0x1e612800), false, 4, []uint64{64}, false},
		{"BLS", elf.EM_AARCH64, le32(0x54000469), false, 0, nil, true},
		{"RET", elf.EM_AARCH64, le32(0xd65f03c0), true, 0, nil, false},
	} {
		step, err := trace.StepAt(tc.machine, tc.code)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		writes := slices.Sorted(maps.Keys(step.Writes))
		if step.Return != tc.ret || (step.Unknown != "") != tc.unknown || (!tc.ret && !tc.unknown && step.Next != tc.next) || !slices.Equal(writes, tc.writes) {
			t.Errorf("%s: return %v, next %d, writes %v, unknown %q; want return %v, next %d, writes %v, unknown %v",
				tc.name, step.Return, step.Next, writes, step.Unknown, tc.ret, tc.next, tc.writes, tc.unknown)
		}
	}
	if _, err := trace.StepAt(elf.EM_X86_64, []byte{0xf2, 0x0f, 0x58}); err == nil {
		t.Error("a truncated instruction decoded")
	}
}
