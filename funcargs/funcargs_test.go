package funcargs_test

import (
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestABIMatchesDWARF checks, for every function of the argfuncs target
// built by each supported release for amd64 and arm64 (default and PIE),
// that where the register ABI assigns each argument is where the DWARF
// location lists put it at the function's entry: the same registers, the
// same stack offsets, piece by piece. Results have no DWARF location; gi
// places them with the same assignment.
func TestABIMatchesDWARF(t *testing.T) {
	for _, tc := range []string{"local", "go1.20.14", "go1.22.12", "go1.24.13", "go1.27.4"} {
		for _, arch := range []string{"amd64", "arm64"} {
			for _, pie := range []bool{false, true} {
				opts := targets.BuildOptions{Toolchain: tc, Arch: arch, PIE: pie}
				t.Run(opts.String(), func(t *testing.T) {
					t.Parallel()
					checkABI(t, targets.Build(t, "argfuncs", opts), arch)
				})
			}
		}
	}
}

// partialDWARF are the argfuncs functions whose arguments DWARF does not
// place fully at the entry: Locate takes them from the register ABI, and
// the raw comparison skips them.
var partialDWARF = map[string]string{
	"main.stackSlice":    "DWARF places only the pointer and length of the slice passed on the stack (amd64)",
	"main.Point.Unnamed": "DWARF has no location for the unnamed receiver (no entry at all before Go 1.21)",
}

func checkABI(t *testing.T, path, arch string) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	goMinor, _ := runtimelayout.GoMinor(info.GoVersion)
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := funcargs.Open(f, arch)
	if err != nil {
		t.Fatal(err)
	}
	pieces := 0
	for _, name := range targets.ArgFuncs {
		fn, err := r.Func(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(fn.Params) == 0 || len(fn.Results) == 0 && name != "main.dropFloat" { // dropFloat has none
			t.Errorf("%s: %d arguments, %d results", name, len(fn.Params), len(fn.Results))
			continue
		}
		var params, results []godwarf.Type
		for _, v := range fn.Params {
			params = append(params, v.Type)
		}
		for _, v := range fn.Results {
			results = append(results, v.Type)
		}
		abiParams, abiResults, err := funcargs.ABILocations(r.Arch, params, results)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(abiResults) != len(results) {
			t.Errorf("%s: %d result locations for %d results", name, len(abiResults), len(results))
		}
		if _, partial := partialDWARF[name]; partial {
			continue
		}
		for i, v := range fn.Params {
			got, err := fn.Location(v, fn.Entry, r.Arch.CFAFromSP)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			want := abiParams[i]
			for j := range want {
				if want[j].Stack {
					want[j].Offset += r.Arch.CFAFromSP
				}
			}
			if g, w := describe(r.Arch, got), describe(r.Arch, want); g != w {
				t.Errorf("%s %s %s: DWARF says %s, the ABI %s", name, v.Name, v.TypeName(), g, w)
			}
			pieces += len(want)
		}
	}
	checkLocate(t, r, goMinor)
	if pieces < 40 {
		t.Errorf("only %d pieces compared", pieces)
	}
}

// describe prints the available pieces of a location, in order, with
// their sizes: "Rax:4 Rbx:1 SP+8:8". Not where each goes in the value:
// Go's DWARF concatenates a struct's register pieces without the padding
// between its fields (the ABI's assignment says where they go).
func describe(a *funcargs.Arch, ps []funcargs.Piece) string {
	var parts []string
	for _, p := range ps {
		if p.Missing {
			continue
		}
		where := a.RegName(p.Reg)
		if p.Stack {
			where = fmt.Sprintf("SP%+d", p.Offset)
		}
		parts = append(parts, fmt.Sprintf("%s:%d", where, p.Size))
	}
	return strings.Join(parts, " ")
}

// checkLocate checks what Locate gives at each function's entry: every
// argument and result located, each piece inside its value and none
// overlapping, a struct's fields where its layout puts them, and
// main.query's (int, error) results in the first three integer registers.
func checkLocate(t *testing.T, r *funcargs.Reader, goMinor int) {
	for _, name := range targets.ArgFuncs {
		fn, err := r.Func(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		params, results, err := fn.Locate(fn.Entry, r.Arch.CFAFromSP)
		if err != nil {
			t.Fatal(err)
		}
		if name == "main.Point.Unnamed" && goMinor < 21 {
			// No receiver in DWARF: k cannot be checked against the ABI,
			// which needs the receiver before it. Unknown, not guessed.
			if len(params) != 1 || params[0].Unknown == "" {
				t.Errorf("%s (Go 1.%d): want k alone and unknown, got %d arguments %+v", name, goMinor, len(params), params)
			}
			continue
		}
		for _, l := range append(params, results...) {
			if l.Unknown != "" || len(l.Pieces) == 0 {
				t.Errorf("%s %s: not located: %s", name, l.Var.Name, l.Unknown)
				continue
			}
			var covered int64
			for _, p := range l.Pieces {
				if p.ValueOffset < covered || p.ValueOffset+p.Size > l.Var.Type.Size() {
					t.Errorf("%s %s: piece %+v outside its %d-byte value or overlapping", name, l.Var.Name, p, l.Var.Type.Size())
				}
				covered = p.ValueOffset + p.Size
			}
		}
		switch name {
		case "main.structs":
			var offs []int64
			for _, p := range params[0].Pieces {
				offs = append(offs, p.ValueOffset)
			}
			if fmt.Sprint(offs) != "[0 4 6]" {
				t.Errorf("main.Small's fields at %v, want [0 4 6]", offs)
			}
		case "main.query":
			if got, want := describe(r.Arch, append(results[0].Pieces, results[1].Pieces...)), describe(r.Arch, []funcargs.Piece{
				{Reg: r.Arch.IntRegs[0], Size: 8}, {Reg: r.Arch.IntRegs[1], Size: 8}, {Reg: r.Arch.IntRegs[2], Size: 8}}); got != want {
				t.Errorf("main.query's results at %s, want %s", got, want)
			}
		}
	}
}

// TestFuncByPC checks that finding a function through the unit holding
// its code (what gi trace does) gives what the index of every unit gives,
// for every function of real binaries: the same entry, the same
// arguments and results.
func TestFuncByPC(t *testing.T) {
	for _, opts := range []targets.BuildOptions{{}, {Toolchain: "go1.20.14", PIE: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			path := targets.Build(t, "argfuncs", opts)
			bin, err := elfbin.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer bin.Close()
			byPC, err := funcargs.Open(bin.File, "amd64")
			if err != nil {
				t.Fatal(err)
			}
			all, err := funcargs.Open(bin.File, "amd64")
			if err != nil {
				t.Fatal(err)
			}
			described := 0
			for _, f := range bin.Lines.Funcs() {
				a, errA := byPC.Func(f.Name, f.Entry)
				b, errB := all.Func(f.Name, 0)
				if (errA == nil) != (errB == nil) {
					t.Errorf("%s at %#x: by pc %v, by name %v", f.Name, f.Entry, errA, errB)
					continue
				}
				if errA != nil {
					continue
				}
				described++
				if got, want := signature(a), signature(b); got != want || a.Entry != b.Entry {
					t.Errorf("%s: by pc %s at %#x, by name %s at %#x", f.Name, got, a.Entry, want, b.Entry)
				}
			}
			if described < 1000 {
				t.Errorf("only %d functions described by DWARF", described)
			}
			t.Logf("%d functions of %d described", described, len(bin.Lines.Funcs()))
		})
	}
}

// signature names a function's arguments and results with their types.
func signature(f *funcargs.Func) string {
	var b strings.Builder
	for _, v := range f.Params {
		fmt.Fprintf(&b, "%s %s, ", v.Name, v.TypeName())
	}
	b.WriteString("-> ")
	for _, v := range f.Results {
		fmt.Fprintf(&b, "%s %s, ", v.Name, v.TypeName())
	}
	return b.String()
}
