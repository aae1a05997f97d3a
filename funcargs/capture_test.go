package funcargs_test

import (
	"debug/elf"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/internal/targets"
)

// openArgfuncs reads the DWARF of the argfuncs target built for amd64.
func openArgfuncs(tb testing.TB) *funcargs.Reader {
	tb.Helper()
	f, err := elf.Open(targets.Build(tb, "argfuncs", targets.BuildOptions{Arch: "amd64"}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	r, err := funcargs.Open(f, "amd64")
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// payloadFor plays the probe program on a memory image: registers by DWARF
// number, and the bytes behind each deref operation in order.
func payloadFor(t *testing.T, c *funcargs.Capture, regs map[uint64]uint64, behind [][]byte) []byte {
	t.Helper()
	p := make([]byte, c.Size)
	d := 0
	for _, op := range c.Ops {
		switch op.Kind {
		case funcargs.OpReg, funcargs.OpFloatReg:
			binary.LittleEndian.PutUint64(p[op.Out:], regs[op.Reg])
		case funcargs.OpDeref:
			if d >= len(behind) {
				t.Fatalf("capture has more derefs than the %d given", len(behind))
			}
			b := behind[d]
			if len(b) > op.Size {
				b = b[:op.Size]
			}
			binary.LittleEndian.PutUint64(p[op.Out:], uint64(len(b)))
			copy(p[op.Out+8:], b)
			d++
		default:
			t.Fatalf("unexpected op %+v", op)
		}
	}
	return p
}

// TestCaptureFloats plans the capture of main.mixed's arguments (a struct
// of an int, a float32 and a bool, then a float64: integer and float
// registers) from real DWARF, and formats payloads whose word of float
// status says the probe read the float registers, or could not.
func TestCaptureFloats(t *testing.T) {
	r := openArgfuncs(t)
	fn, err := r.Func("main.mixed", 0)
	if err != nil {
		t.Fatal(err)
	}
	params, _, err := fn.Locate(fn.Entry, r.Arch.CFAFromSP)
	if err != nil {
		t.Fatal(err)
	}
	c := funcargs.NewCapture(params, funcargs.CaptureOptions{})
	floats := 0
	for _, op := range c.Ops {
		if op.Kind == funcargs.OpFloatReg {
			floats++
		}
	}
	if floats != 2 || c.FloatStatus < 0 {
		t.Fatalf("ops %+v, float status at %d: want 2 float registers and a status word", c.Ops, c.FloatStatus)
	}
	regs := map[uint64]uint64{
		regnum.AMD64_Rax: 7, regnum.AMD64_Rbx: 1, // N, B
		regnum.AMD64_XMM0: uint64(math.Float32bits(0.75)), regnum.AMD64_XMM0 + 1: math.Float64bits(1e-3),
	}
	p := payloadFor(t, c, regs, nil)
	binary.LittleEndian.PutUint64(p[c.FloatStatus:], 1)
	want := []string{"main.Mixed{N:7, F:0.75, B:true}", "0.001"}
	for i, v := range c.Decode(p, nil) {
		if v.Value != want[i] {
			t.Errorf("read: %s = %s, want %s", v.Name, v.Value, want[i])
		}
	}
	binary.LittleEndian.PutUint64(p[c.FloatStatus:], 0)
	for _, v := range c.Decode(p, nil) {
		if v.Value != "?" {
			t.Errorf("float registers unread: %s = %s, want ?", v.Name, v.Value)
		}
	}

	// Where the probed instruction overwrites X0 first, m is unknown
	// with that reason, f still read.
	c = funcargs.NewCapture(params, funcargs.CaptureOptions{Overwritten: map[uint64]string{regnum.AMD64_XMM0: "CVTSS2SD X0, X0"}, RegName: r.Arch.RegName})
	if u := c.Unknown(); len(u) != 1 || !strings.Contains(u[0], "m: passed in XMM0, which the probed instruction (CVTSS2SD X0, X0) overwrites") {
		t.Errorf("unknown %q", u)
	}
	if c.FloatStatus < 0 {
		t.Error("f (X1) is not read")
	}
	c = funcargs.NewCapture(params, funcargs.CaptureOptions{NoFloatRegs: "no signal"})
	if u := c.Unknown(); len(u) != 2 || c.FloatStatus >= 0 {
		t.Errorf("float registers off: unknown %q, status at %d", u, c.FloatStatus)
	}
}

// TestCaptureDecode plans the capture of main.query's arguments and
// results (amd64) from real DWARF, and formats payloads built by hand.
func TestCaptureDecode(t *testing.T) {
	r := openArgfuncs(t)
	fn, err := r.Func("main.query", 0)
	if err != nil {
		t.Fatal(err)
	}
	params, results, err := fn.Locate(fn.Entry, r.Arch.CFAFromSP)
	if err != nil {
		t.Fatal(err)
	}
	args := funcargs.NewCapture(params, funcargs.CaptureOptions{StringSize: 4})
	// id in RAX, key in RBX (pointer) and RCX (length), and one read
	// behind key's pointer, bounded by the string size.
	if len(args.Ops) != 4 || args.Ops[3].Kind != funcargs.OpDeref || args.Ops[3].Size != 4 {
		t.Fatalf("ops %+v", args.Ops)
	}
	regs := map[uint64]uint64{regnum.AMD64_Rax: 42, regnum.AMD64_Rbx: 0xc000010000, regnum.AMD64_Rcx: 7}
	vals := args.Decode(payloadFor(t, args, regs, [][]byte{[]byte("user:42")}), nil)
	if len(vals) != 2 || vals[0] != (funcargs.Value{Name: "id", Type: "int", Value: "42"}) ||
		vals[1] != (funcargs.Value{Name: "key", Type: "string", Value: `"user"...(len 7)`}) {
		t.Errorf("decoded %+v", vals)
	}
	regs[regnum.AMD64_Rcx] = 0
	if vals := args.Decode(payloadFor(t, args, regs, [][]byte{nil}), nil); vals[1].Value != `""` {
		t.Errorf("empty string decoded as %s", vals[1].Value)
	}
	if vals := args.Decode(nil, nil); vals[0].Value != "?" || vals[1].Value != "?" {
		t.Errorf("a short payload decoded as %+v", vals)
	}

	// (int, error): a nil error, then a *main.NotFound named through the
	// type resolver.
	res := funcargs.NewCapture(results, funcargs.CaptureOptions{})
	regs = map[uint64]uint64{regnum.AMD64_Rax: 3}
	if vals := res.Decode(payloadFor(t, res, regs, [][]byte{nil, nil}), nil); vals[0].Value != "3" || vals[1].Value != "nil" || vals[1].Type != "error" {
		t.Errorf("(3, nil) decoded as %+v", vals)
	}
	ptrFn, err := r.Func("main.pointer", 0)
	if err != nil {
		t.Fatal(err)
	}
	pointType := ptrFn.Params[0].Type // *main.Point, as the dynamic type
	itabType := make([]byte, 8)
	binary.LittleEndian.PutUint64(itabType, 0x4a0000)
	regs = map[uint64]uint64{regnum.AMD64_Rax: 0, regnum.AMD64_Rbx: 0x4b0000, regnum.AMD64_Rcx: 0xc000020000}
	types := func(addr uint64) godwarf.Type {
		if addr == 0x4a0000 {
			return pointType
		}
		return nil
	}
	point := make([]byte, 16)
	binary.LittleEndian.PutUint64(point, 3)
	binary.LittleEndian.PutUint64(point[8:], uint64(1<<64-4))
	vals = res.Decode(payloadFor(t, res, regs, [][]byte{itabType, point}), types)
	if vals[1].Value != "&main.Point{X:3, Y:-4}" {
		t.Errorf("an error holding a *main.Point decoded as %+v", vals[1])
	}
	// Less read behind the pointer than the struct: its address only.
	vals = res.Decode(payloadFor(t, res, regs, [][]byte{itabType, point[:8]}), types)
	if vals[1].Value != "(*main.Point)(0xc000020000)" {
		t.Errorf("a *main.Point read in part decoded as %+v", vals[1])
	}
	// A dynamic type DWARF does not know: its address, not a guess.
	vals = res.Decode(payloadFor(t, res, regs, [][]byte{itabType, point}), nil)
	if vals[1].Value != "error(type 0x4a0000, data 0xc000020000)" {
		t.Errorf("an unknown dynamic type decoded as %+v", vals[1])
	}
}

// FuzzDecode formats arbitrary payloads with the captures of every
// argfuncs function, with a type resolver that names any address: a
// corrupt or hostile payload must give bounded strings, never a panic.
func FuzzDecode(f *testing.F) {
	r := openArgfuncs(f)
	var captures []*funcargs.Capture
	var dynamic []godwarf.Type
	for _, name := range targets.ArgFuncs {
		fn, err := r.Func(name, 0)
		if err != nil {
			f.Fatal(err)
		}
		params, results, err := fn.Locate(fn.Entry, r.Arch.CFAFromSP)
		if err != nil {
			f.Fatal(err)
		}
		captures = append(captures, funcargs.NewCapture(params, funcargs.CaptureOptions{StringSize: 16}),
			funcargs.NewCapture(results, funcargs.CaptureOptions{StringSize: 16}))
		for _, v := range append(fn.Params, fn.Results...) {
			dynamic = append(dynamic, v.Type)
		}
	}
	types := func(addr uint64) godwarf.Type {
		if addr%3 == 0 {
			return nil
		}
		return dynamic[addr%uint64(len(dynamic))]
	}
	f.Add([]byte{})
	f.Add(make([]byte, 512))
	seed := make([]byte, 512)
	for i := range seed {
		seed[i] = byte(i * 7)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, c := range captures {
			vals := c.Decode(payload, types)
			if len(vals) != len(c.Values) {
				t.Fatalf("%d values decoded, %d captured", len(vals), len(c.Values))
			}
			for _, v := range vals {
				if len(v.Value) > 1<<16 {
					t.Fatalf("%s: a %d-byte value", v.Name, len(v.Value))
				}
			}
		}
	})
}
