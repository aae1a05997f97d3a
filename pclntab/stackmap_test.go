package pclntab_test

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
)

// testPclntabStackMaps decodes the stack maps of every Go function of the
// test program at each of its call sites (the return addresses a parked
// goroutine's frames hold, found by decoding the code), with every
// toolchain: no error but for code without maps (assembly), the locals'
// map within the frame (pcsp), the arguments' within the function's
// arguments, and the stack objects inside the frame or its arguments.
func testPclntabStackMaps(t *testing.T, pb *targets.PclnBuilder) {
	if runtime.GOARCH != "amd64" {
		t.Skip("call sites are found by decoding amd64 code")
	}
	pb.ForEach(t, []string{"exe"}, func(t *testing.T, k targets.PclnKey) {
		b := pclnOpen(t, pb.Build(t, k))
		lt := b.Lines
		sites, withMaps := 0, 0
		for _, f := range lt.Funcs() {
			if f.End-f.Entry > 1<<20 {
				t.Fatalf("%s: %d bytes of code", f.Name, f.End-f.Entry)
			}
			code := make([]byte, f.End-f.Entry)
			if _, err := b.ReadAt(code, f.Entry); err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(code); {
				inst, err := x86asm.Decode(code[off:], 64)
				if err != nil {
					off++
					continue
				}
				off += inst.Len
				if inst.Op != x86asm.CALL || off >= len(code) {
					continue
				}
				pc := f.Entry + uint64(off) // the return address
				sites++
				frame, err := lt.SPDelta(f, pc)
				if err != nil {
					t.Fatalf("%s at %#x: %v", f.Name, pc, err)
				}
				// A frame with locals (past the saved frame pointer):
				// not the call of morestack before the frame is made.
				withLocals := frame > 8
				locals, args, err := lt.StackMaps(f, pc, withLocals)
				if errors.Is(err, pclntab.ErrNoStackMap) {
					continue
				}
				if err != nil {
					t.Errorf("%s at %#x: %v", f.Name, pc, err)
					continue
				}
				withMaps++
				if int64(locals.N)*8 > frame {
					t.Errorf("%s at %#x: a locals map of %d words in a frame of %d bytes", f.Name, pc, locals.N, frame)
				}
				if f.Args != pclntab.ArgsSizeUnknown && args.N*8 > int(f.Args) {
					t.Errorf("%s at %#x: an arguments map of %d words for %d bytes of arguments", f.Name, pc, args.N, f.Args)
				}
				objs, err := lt.StackObjects(f)
				if err != nil {
					t.Errorf("%s: stack objects: %v", f.Name, err)
				}
				for _, o := range objs {
					if !withLocals {
						break
					}
					if o.Size <= 0 || (o.Off < 0 && int64(-o.Off) > frame+8) || (o.Off >= 0 && f.Args != pclntab.ArgsSizeUnknown && o.Off+o.Size > f.Args) {
						t.Errorf("%s: stack object %+v outside a frame of %d bytes and %d of arguments", f.Name, o, frame, f.Args)
					}
				}
			}
		}
		if sites < 1000 || withMaps < sites/2 {
			t.Errorf("%d call sites, %d with stack maps: the decoding found too few", sites, withMaps)
		}
	})
}
