package bpf

import (
	"reflect"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/regnum"
	"golang.org/x/sys/unix"
)

// TestRegisterWordsAmd64 checks RegisterWord's word of amd64's struct
// pt_regs for each DWARF register number (Delve's regnum) against x/sys's
// layout of it (PtraceRegsAmd64), field by field.
func TestRegisterWordsAmd64(t *testing.T) {
	amd64 := map[uint64]string{
		regnum.AMD64_Rax: "Rax", regnum.AMD64_Rdx: "Rdx", regnum.AMD64_Rcx: "Rcx", regnum.AMD64_Rbx: "Rbx",
		regnum.AMD64_Rsi: "Rsi", regnum.AMD64_Rdi: "Rdi", regnum.AMD64_Rbp: "Rbp", regnum.AMD64_Rsp: "Rsp",
		regnum.AMD64_R8: "R8", regnum.AMD64_R9: "R9", regnum.AMD64_R10: "R10", regnum.AMD64_R11: "R11",
		regnum.AMD64_R12: "R12", regnum.AMD64_R13: "R13", regnum.AMD64_R14: "R14", regnum.AMD64_R15: "R15",
	}
	ptRegs := reflect.TypeFor[unix.PtraceRegsAmd64]()
	for reg, name := range amd64 {
		field, ok := ptRegs.FieldByName(name)
		if !ok {
			t.Fatalf("PtraceRegsAmd64 has no %s", name)
		}
		if w, ok := RegisterWord("amd64", reg); !ok || w*8 != int(field.Offset) {
			t.Errorf("amd64 DWARF %d (%s): word %d (%v), pt_regs has it at word %d", reg, strings.ToLower(name), w, ok, field.Offset/8)
		}
	}
}
