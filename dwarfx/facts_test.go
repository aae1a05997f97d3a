package dwarfx

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRuntimeFactsMatchDWARF checks the runtime facts gi needs where a
// stripped binary has no DWARF to give them, and which are therefore
// constants in the decoders: the layout of runtime._func and
// runtime.inlinedCall (pclntab, inline trees), against the DWARF of every
// Go release in the generated table, field by field, offset and size.
func TestRuntimeFactsMatchDWARF(t *testing.T) {
	type field struct {
		name      string
		off, size int64
	}
	funcFields := []field{
		{"entryOff", funcEntryOff, 4}, {"nameOff", funcNameOff, 4}, {"pcsp", funcPcsp, 4}, {"pcfile", funcPcfile, 4},
		{"pcln", funcPcln, 4}, {"npcdata", funcNpcdata, 4}, {"cuOffset", funcCuOffset, 4}, {"startLine", funcStartLine, 4},
		{"funcID", funcFuncID, 1}, {"flag", funcFlag, 1}, {"nfuncdata", funcNfuncdata, 1},
	}
	inlFields := []field{{"funcID", inlFuncID, 1}, {"nameOff", inlNameOff, 4}, {"parentPc", inlParentPc, 4}, {"startLine", inlStartLine, 4}}
	dir := t.TempDir()
	for _, tc := range TableToolchains() {
		for _, arch := range []string{"amd64", "arm64"} {
			t.Run(tc+"/"+arch, func(t *testing.T) {
				bin := filepath.Join(dir, tc+"-"+arch)
				cmd := exec.Command("go", "build", "-o", bin, ".")
				cmd.Dir = "testdata/layoutprobe"
				cmd.Env = append(cmd.Environ(), "GOTOOLCHAIN="+tc, "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("build: %v\n%s", err, out)
				}
				b, err := Open(bin)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				d, err := LoadDebug(b.File)
				if err != nil {
					t.Fatal(err)
				}
				check := func(typ string, size int64, fields []field) {
					st, err := d.Struct(typ)
					if err != nil {
						t.Fatal(err)
					}
					if st.ByteSize != size {
						t.Errorf("%s is %d bytes, the decoder reads %d", typ, st.ByteSize, size)
					}
					for _, f := range fields {
						off, ft, err := FieldOffset(st, f.name)
						if err != nil {
							t.Errorf("%s: %v", typ, err)
							continue
						}
						if off != f.off || ft.Size() != f.size {
							t.Errorf("%s.%s at %d (%d bytes), the decoder reads it at %d (%d bytes)", typ, f.name, off, ft.Size(), f.off, f.size)
						}
					}
				}
				check("runtime._func", funcSize, funcFields)
				check("runtime.inlinedCall", inlSize, inlFields)
			})
		}
	}
}
