package trace_test

import (
	"debug/elf"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
	"github.com/gi-debug/gi/trace"
)

// objdumpRETs counts the RET instructions `go tool objdump` shows in fn.
func objdumpRETs(t *testing.T, bin, fn string) int {
	t.Helper()
	out, err := exec.Command("go", "tool", "objdump", "-s", "^"+strings.ReplaceAll(fn, ".", `\.`)+"$", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		// file:line  0xaddr  hex  MNEMONIC ...
		if len(f) >= 4 && f[3] == "RET" {
			n++
		}
	}
	if n == 0 && !strings.Contains(string(out), "TEXT "+fn) {
		t.Fatalf("objdump shows no %s", fn)
	}
	return n
}

func funcCode(t *testing.T, bin *elfbin.Binary, name string) (*pclntab.Func, []byte) {
	t.Helper()
	f := bin.Lines.FuncByName(name)
	if f == nil {
		t.Fatalf("no function %s", name)
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := bin.ReadAt(code, f.Entry); err != nil {
		t.Fatal(err)
	}
	return f, code
}

var probedFuncs = []string{"main.multiRet", "main.chainA", "main.tiny", "main.grower", "main.recoverer", "main.thrower", "main.parWorker"}

func TestProbeSitesAMD64(t *testing.T) {
	path := targets.Build(t, "tracee", targets.BuildOptions{Arch: "amd64"})
	bin, err := elfbin.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, name := range probedFuncs {
		f, code := funcCode(t, bin, name)
		sites, err := trace.FindProbeSites(elf.EM_X86_64, code, f.Entry)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := objdumpRETs(t, path, name); len(sites.Returns) != want {
			t.Errorf("%s: %d RETs, objdump shows %d", name, len(sites.Returns), want)
		}
		for _, r := range sites.Returns {
			inst, err := x86asm.Decode(code[r-f.Entry:], 64)
			if err != nil || inst.Op != x86asm.RET {
				t.Errorf("%s: return site %#x is not a RET: %v %v", name, r, inst, err)
			}
		}
		// Functions with a frame: the entry probe is PUSHQ BP, right after
		// the conditional jump of the stack check. Leaf functions without a
		// stack check are probed at their first instruction.
		if name == "main.tiny" {
			if sites.Entry != f.Entry {
				t.Errorf("main.tiny has no prologue, entry site %#x != %#x", sites.Entry, f.Entry)
			}
			continue
		}
		inst, err := x86asm.Decode(code[sites.Entry-f.Entry:], 64)
		if err != nil || inst.Op != x86asm.PUSH || inst.Args[0] != x86asm.RBP {
			t.Errorf("%s: entry site %#x holds %v, want PUSHQ BP", name, sites.Entry, inst)
		}
	}
	if name := "main.main"; true {
		f, code := funcCode(t, bin, name)
		if _, err := trace.FindProbeSites(elf.EM_X86_64, code, f.Entry); !errors.Is(err, trace.ErrNoReturn) {
			t.Errorf("%s ends in select{}: want ErrNoReturn, got %v", name, err)
		}
	}
	// A huge frame has two conditional branches to morestack (overflow
	// check, then the guard): the entry probe must follow the second, or
	// morestack would make it fire twice.
	checkHugeFrame(t, bin, elf.EM_X86_64)
	// Invalid opcodes in 64-bit mode (PUSH ES) must be refused, not skipped.
	f, code := funcCode(t, bin, "main.multiRet")
	bad := append([]byte{0x06, 0x06, 0x06}, code[3:]...)
	if _, err := trace.FindProbeSites(elf.EM_X86_64, bad, f.Entry); !errors.Is(err, trace.ErrDecode) {
		t.Errorf("corrupt code: want ErrDecode, got %v", err)
	}
	checkWholeBinary(t, bin, elf.EM_X86_64)
}

func TestProbeSitesARM64(t *testing.T) {
	path := targets.Build(t, "tracee", targets.BuildOptions{Arch: "arm64"})
	bin, err := elfbin.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	if bin.Arch != "arm64" {
		t.Fatalf("cross-built binary is %s", bin.Arch)
	}
	for _, name := range probedFuncs {
		f, code := funcCode(t, bin, name)
		sites, err := trace.FindProbeSites(elf.EM_AARCH64, code, f.Entry)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := objdumpRETs(t, path, name); len(sites.Returns) != want {
			t.Errorf("%s: %d RETs, objdump shows %d", name, len(sites.Returns), want)
		}
		if name == "main.tiny" {
			if sites.Entry != f.Entry {
				t.Errorf("main.tiny has no prologue, entry site %#x != %#x", sites.Entry, f.Entry)
			}
			continue
		}
		// The instruction before the entry site is the B.LS to morestack.
		prev, err := arm64asm.Decode(code[sites.Entry-f.Entry-4:])
		if _, cond := prev.Args[0].(arm64asm.Cond); err != nil || prev.Op != arm64asm.B || !cond {
			t.Errorf("%s: instruction before the entry site is %v, want a conditional branch", name, prev)
		}
	}
	checkHugeFrame(t, bin, elf.EM_AARCH64)
	f, code := funcCode(t, bin, "main.multiRet")
	bad := make([]byte, len(code))
	for i := range bad {
		bad[i] = 0xff // not instructions: data where code should be
	}
	copy(bad[len(bad)-4:], code[len(code)-4:])
	if _, err := trace.FindProbeSites(elf.EM_AARCH64, bad, f.Entry); !errors.Is(err, trace.ErrDecode) {
		t.Errorf("corrupt code: want ErrDecode, got %v", err)
	}
	checkWholeBinary(t, bin, elf.EM_AARCH64)
}

// checkWholeBinary decodes every function of the binary: none may panic, and
// nearly all must give probe sites or a clean ErrNoReturn.
func checkWholeBinary(t *testing.T, bin *elfbin.Binary, m elf.Machine) {
	var ok, noRet, bad int
	var badNames []string
	for _, f := range bin.Lines.Funcs() {
		code := make([]byte, f.End-f.Entry)
		if _, err := bin.ReadAt(code, f.Entry); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		_, err := trace.FindProbeSites(m, code, f.Entry)
		switch {
		case err == nil:
			ok++
		case errors.Is(err, trace.ErrNoReturn):
			noRet++
		case errors.Is(err, trace.ErrDecode):
			bad++
			if len(badNames) < 10 {
				badNames = append(badNames, f.Name)
			}
		default:
			t.Fatalf("%s: unexpected error %v", f.Name, err)
		}
	}
	total := ok + noRet + bad
	t.Logf("%v: %d functions: %d with probe sites, %d without RET, %d refused (%v)", m, total, ok, noRet, bad, badNames)
	if ok*100 < total*90 || bad*100 > total {
		t.Errorf("too few functions decode: %d of %d, %d refused", ok, total, bad)
	}
}

func checkHugeFrame(t *testing.T, bin *elfbin.Binary, m elf.Machine) {
	t.Helper()
	f, code := funcCode(t, bin, "main.grower")
	sites, err := trace.FindProbeSites(m, code, f.Entry)
	if err != nil {
		t.Fatal(err)
	}
	// Count the conditional branches before the entry site: exactly the
	// prologue's (two for a frame above StackBig).
	conds := 0
	for off := 0; uint64(off) < sites.Entry-f.Entry; {
		switch m {
		case elf.EM_X86_64:
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(inst.Op.String(), "J") && inst.Op != x86asm.JMP {
				conds++
			}
			off += inst.Len
		default:
			inst, err := arm64asm.Decode(code[off:])
			if err == nil && inst.Op == arm64asm.B {
				if _, ok := inst.Args[0].(arm64asm.Cond); ok {
					conds++
				}
			}
			off += 4
		}
	}
	if conds != 2 {
		t.Errorf("%v main.grower (4 KiB frame): %d conditional branches before the entry site, want 2", m, conds)
	}
}

// TestEntrySitesOutsideRestartSequences checks, on the tracee cross-built
// for arm64 by every Go release in the table, that no entry site Select
// chooses lies in a restartable instruction sequence, where a preemption
// signal landing right after the probe makes the runtime re-run it (one
// call seen entered twice, as the arm64 guests of make test-kernels
// showed). main.grower's frame (over 4 KiB) puts such a sequence right
// after its stack check: its site must have been moved past it, onto the
// instruction that stores the frame record.
func TestEntrySitesOutsideRestartSequences(t *testing.T) {
	for _, tc := range runtimelayout.TableToolchains() {
		t.Run(tc, func(t *testing.T) {
			bin, err := elfbin.Open(targets.Build(t, "tracee", targets.BuildOptions{Toolchain: tc, Arch: "arm64"}))
			if err != nil {
				t.Fatal(err)
			}
			defer bin.Close()
			pat, err := trace.ParsePattern("main.*")
			if err != nil {
				t.Fatal(err)
			}
			sel, err := trace.Select(bin, []trace.Pattern{pat}, nil)
			if err != nil {
				t.Fatal(err)
			}
			moved := 0
			for _, fn := range sel.Functions {
				f := bin.Lines.FuncByName(fn.Name)
				if _, in, err := bin.Lines.RestartSequence(f, fn.EntrySite); err != nil || in {
					t.Errorf("%s: entry site %#x in a restartable sequence (%v)", fn.Name, fn.EntrySite, err)
				}
				code := make([]byte, f.End-f.Entry)
				if _, err := bin.ReadAt(code, f.Entry); err != nil {
					t.Fatal(err)
				}
				raw, _ := trace.FindProbeSites(elf.EM_AARCH64, code, f.Entry)
				if raw.Entry == fn.EntrySite {
					continue
				}
				moved++
				if _, in, _ := bin.Lines.RestartSequence(f, raw.Entry); !in {
					t.Errorf("%s: entry site moved from %#x to %#x without a restartable sequence", fn.Name, raw.Entry, fn.EntrySite)
				}
				if fn.Name == "main.grower" {
					inst, err := arm64asm.Decode(code[fn.EntrySite-f.Entry:])
					if err != nil || inst.Op != arm64asm.STP {
						t.Errorf("main.grower: moved entry site holds %v (%v), want the STP of the frame record", inst, err)
					}
				}
			}
			if grower := slices.IndexFunc(sel.Functions, func(fn *trace.Function) bool { return fn.Name == "main.grower" }); grower < 0 || moved == 0 {
				t.Errorf("main.grower selected: %v; %d entry sites moved past a restartable sequence, want main.grower's at least", grower >= 0, moved)
			}
		})
	}
}
