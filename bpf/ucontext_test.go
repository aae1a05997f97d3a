package bpf

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSignalFrameOffsets checks where gi_signal reads the interrupted
// thread's ip, sp and float registers in the kernel's signal frame
// (GI_UC_* and GI_FX_XMM in gi.bpf.c) against the Go runtime's own
// description of that frame, generated from the kernel's headers
// (runtime/defs_linux_<arch>.go of the installed Go, laid out for each
// architecture by go/types): ucontext, the sigcontext its uc_mcontext is
// read as, and on amd64 the fxsave image (fpstate1). The binaries' DWARF
// does not describe these types. The fpsimd_context magic and its vregs
// offset (arm64) are the kernel's alone: the runtime does not describe
// them.
func TestSignalFrameOffsets(t *testing.T) {
	src, err := os.ReadFile("gi.bpf.c")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start := strings.Index(text, "#if defined(__TARGET_ARCH_x86)\n#define GI_UC_IP")
	if start < 0 {
		t.Fatal("gi.bpf.c: the signal frame's #defines are not where this test looks")
	}
	block := text[start:]
	block = block[:strings.Index(block, "#endif")]
	amd64, arm64, _ := strings.Cut(block, "#else")
	defines := func(s string) map[string]int64 {
		out := map[string]int64{}
		for _, m := range regexp.MustCompile(`(?m)^#define (GI_[A-Z0-9_]+) +(0x[0-9a-fA-F]+|[0-9]+)`).FindAllStringSubmatch(s, -1) {
			v, _ := strconv.ParseInt(m[2], 0, 64)
			out[m[1]] = v
		}
		return out
	}
	for _, c := range []struct {
		arch    string
		defines map[string]int64
		// want names each #define's struct and field: a sigcontext field
		// is read at ucontext's uc_mcontext plus its offset.
		want map[string][2]string
	}{
		{"amd64", defines(amd64), map[string][2]string{
			"GI_UC_IP": {"sigcontext", "rip"}, "GI_UC_SP": {"sigcontext", "rsp"},
			"GI_UC_FPSTATE": {"sigcontext", "fpstate"}, "GI_FX_XMM": {"fpstate1", "_xmm"},
		}},
		{"arm64", defines(arm64), map[string][2]string{
			"GI_UC_IP": {"sigcontext", "pc"}, "GI_UC_SP": {"sigcontext", "sp"},
			"GI_UC_FPSIMD": {"sigcontext", "__reserved"},
		}},
	} {
		t.Run(c.arch, func(t *testing.T) {
			offset := runtimeDefs(t, c.arch)
			mcontext := offset("ucontext", "uc_mcontext")
			for name, path := range c.want {
				got, ok := c.defines[name]
				if !ok {
					t.Errorf("gi.bpf.c has no #define %s for %s", name, c.arch)
					continue
				}
				want := offset(path[0], path[1])
				if path[0] == "sigcontext" {
					want += mcontext
				}
				if got != want {
					t.Errorf("%s is %d in gi.bpf.c; the runtime puts %s.%s at %d", name, got, path[0], path[1], want)
				}
			}
		})
	}
}

// runtimeDefs type-checks the installed Go's runtime/defs_linux_<arch>.go
// alone, laid out for arch, and returns the offset of a field of one of
// its structs.
func runtimeDefs(t *testing.T, arch string) func(typ, field string) int64 {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(goroot)), "src", "runtime", "defs_linux_"+arch+".go")
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	sizes := types.SizesFor("gc", arch)
	// The file refers to the rest of the runtime here and there: those
	// errors leave the structs of the signal frame whole.
	conf := types.Config{Sizes: sizes, Error: func(error) {}}
	pkg, _ := conf.Check("runtime", fset, []*ast.File{file}, nil)
	return func(typ, field string) int64 {
		obj := pkg.Scope().Lookup(typ)
		if obj == nil {
			t.Fatalf("%s: no type %s", path, typ)
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			t.Fatalf("%s: %s is not a struct", path, typ)
		}
		fields := make([]*types.Var, st.NumFields())
		for i := range fields {
			fields[i] = st.Field(i)
		}
		offsets := sizes.Offsetsof(fields)
		for i, f := range fields {
			if f.Name() == field {
				return offsets[i]
			}
		}
		t.Fatalf("%s: %s has no field %s", path, typ, field)
		return 0
	}
}
