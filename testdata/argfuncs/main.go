// Command argfuncs calls functions with arguments and results of every
// type class gi reads (integers of each size, floats, bools, strings,
// pointers, slices, arrays, structs in registers and on the stack,
// interfaces, errors, maps, channels, funcs, twelve ints, a method on a
// value receiver, an unnamed receiver) and prints what it passes and what comes back, in Go
// syntax: the ground truth of gi's argument capture.
//
// Each call is printed as "CALL <func> <args>" before it and
// "RET <func> <results>" after it, arguments separated by " | ".
// With -stdin it makes one round of calls per line "round" read from its
// standard input, answering "DONE round=N" after each; a line "blocked"
// calls floats twice on a thread that blocks SIGURG, answering "DONE
// blocked".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Small is passed in registers.
type Small struct {
	A int32
	B bool
	C uint16
}

// Big does not fit in registers: it goes on the stack.
type Big struct {
	A, B, C, D, E, F, G, H, I, J int
}

// Point has a method on a value receiver.
type Point struct{ X, Y int }

// Dist is a method on a value receiver.
//
//go:noinline
func (p Point) Dist(scale int) int { return (abs(p.X) + abs(p.Y)) * scale }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// NotFound is a concrete error type.
type NotFound struct{ Key string }

func (e *NotFound) Error() string { return "not found: " + e.Key }

//go:noinline
func ints(a int8, b int16, c int32, d int64, e uint8, f uint16, g uint32, h uint64, i int, j uint, k uintptr) int64 {
	return int64(a) + int64(b) + int64(c) + d + int64(e) + int64(f) + int64(g) + int64(h) + int64(i) + int64(j) + int64(k)
}

// floats has a frame: its entry probe is past the stack-check prologue.
//
//go:noinline
func floats(a float32, b float64) (float64, float32) {
	r := float64(a) + b
	sink = fmt.Sprint(r)
	return r, a * 2
}

var sink string

// leafFloat is a leaf with no frame: the probe is on its first
// instruction, which on amd64 and arm64 overwrites x with the sum.
//
//go:noinline
func leafFloat(x float64) float64 { return x + x }

// complexes, Vec.Scale, mixed and manyFloats call touch: they have
// frames, and gi reads every float argument.
//
//go:noinline
func complexes(c complex128, d complex64) complex128 {
	touch()
	return c * complex128(d)
}

// Vec is passed in float registers, field by field.
type Vec struct{ X, Y float64 }

// Scale is a method on a value receiver made of floats.
//
//go:noinline
func (v Vec) Scale(k float64) Vec {
	touch()
	return Vec{v.X * k, v.Y * k}
}

// Mixed is passed in integer and float registers at once.
type Mixed struct {
	N int
	F float32
	B bool
}

//go:noinline
func mixed(m Mixed, f float64) (float64, int) {
	touch()
	return float64(m.F) + f, m.N
}

// manyFloats has more floats than the float registers (15 on amd64, 16
// on arm64): the last go on the stack.
//
//go:noinline
func manyFloats(f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17 float64) float64 {
	touch()
	return f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8 + f9 + f10 + f11 + f12 + f13 + f14 + f15 + f16 + f17
}

//go:noinline
func anyFloat(v any) any { return v }

// sameFloat is a single RET: its entry probe is also its return, and
// both read X0 (V0 on arm64).
//
//go:noinline
func sameFloat(x float64) float64 { return x }

// dropFloat is a single RET too, with a float argument and no result.
//
//go:noinline
func dropFloat(x float64) {}

// touch makes its caller a function with a frame, whose entry probe is
// past the stack-check prologue (most functions worth tracing).
//
//go:noinline
func touch() {}

// floatsOnStack takes an array of two floats, which the register ABI
// passes on the stack.
//
//go:noinline
func floatsOnStack(a [2]float64, n int) int { return int(a[0]+a[1]) + n }

//go:noinline
func boolsAndString(ok bool, s string, done bool) (string, bool) {
	return strings.ToUpper(s), ok && !done
}

//go:noinline
func pointer(p *Point) *Point { return p }

//go:noinline
func slices(xs []int, bs []byte, ss []string) (int, int) { return len(xs) + len(bs), cap(ss) }

//go:noinline
func arrays(a [1]int, b [3]int) [1]int { return [1]int{a[0] + b[2]} }

//go:noinline
func structs(s Small, b Big) Small {
	s.A += int32(b.J)
	return s
}

//go:noinline
func ifaces(v any, err error) (any, error) { return v, err }

// boxed takes interfaces holding a pointer to a struct of scalars and a
// struct: gi shows the values behind them.
//
//go:noinline
func boxed(p any, v any) bool { return p != nil && v != nil }

// goSyntax is printed as is by join: the %#v of a value held in an
// interface, which join's address rule for pointers would hide.
type goSyntax string

//go:noinline
func containers(m map[string]int, c chan int, f func() int) int { return len(m) + cap(c) }

//go:noinline
func twelve(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 int) int {
	return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12
}

//go:noinline
func query(id int, key string) (int, error) {
	if id == 42 {
		return 0, &NotFound{Key: key}
	}
	return id * 2, nil
}

var deferred int

// withDefer has a defer: the compiler describes its result twice in DWARF.
//
//go:noinline
func withDefer(x int) int {
	defer func() { deferred++ }()
	return x * 2
}

//go:noinline
func threeIntsAndString(a, b, c int, s string) int { return a + b + c + len(s) }

// stackSlice gets its slice on the stack (nine ints take the integer
// registers) and never reads the slice's capacity: DWARF describes only
// its pointer and length.
//
//go:noinline
func stackSlice(a, b, c, d, e, f, g, h, i int, xs []int) int {
	return a + b + c + d + e + f + g + h + i + len(xs) + xs[0]
}

// Unnamed has an unnamed receiver.
//
//go:noinline
func (Point) Unnamed(k int) int { return k * 2 }

func call(name string, args ...any) {
	fmt.Printf("CALL %s %s\n", name, join(args))
}

func ret(name string, results ...any) {
	fmt.Printf("RET %s %s\n", name, join(results))
}

func join(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		if g, ok := v.(goSyntax); ok {
			parts[i] = string(g)
			continue
		}
		if k := reflect.ValueOf(v).Kind(); k == reflect.Pointer || k == reflect.Map {
			// Pointers and maps as addresses, which is what gi shows of them.
			parts[i] = fmt.Sprintf("(%T)(%p)", v, v)
			continue
		}
		parts[i] = fmt.Sprintf("%#v", v)
	}
	return strings.Join(parts, " | ")
}

// blocked calls floats twice with SIGURG blocked on its thread: a tracer
// that reads float registers through that signal cannot, and must say so
// without losing or misordering the calls.
func blocked() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var urg, old uint64 = 1 << (syscall.SIGURG - 1), 0
	const sigBlock, sigSetMask = 0, 2
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigBlock, uintptr(unsafe.Pointer(&urg)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
		panic(errno)
	}
	for i := 0; i < 2; i++ {
		x := float64(i) + 0.5
		call("main.floats", float32(1.5), x)
		f64, f32 := floats(1.5, x)
		ret("main.floats", f64, f32)
	}
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetMask, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
}

func main() {
	rounds := flag.Int("rounds", 1, "how many times to call every function (0: forever)")
	pause := flag.Duration("pause", 0, "pause between rounds")
	stdin := flag.Bool("stdin", false, "make a round of calls per line \"round\" on stdin instead")
	flag.Parse()
	fmt.Println("READY")
	if *stdin {
		sc := bufio.NewScanner(os.Stdin)
		for n := 0; sc.Scan(); n++ {
			if sc.Text() == "blocked" {
				blocked()
				fmt.Println("DONE blocked")
				continue
			}
			round(n)
			fmt.Printf("DONE round=%d\n", n)
		}
		return
	}
	if *pause > 0 {
		time.Sleep(*pause)
	}
	for n := 0; *rounds == 0 || n < *rounds; n++ {
		round(n)
		if *pause > 0 {
			time.Sleep(*pause)
		}
	}
	os.Stdout.Sync()
}

func round(n int) {
	call("main.ints", int8(-8), int16(-16), int32(-32), int64(-64), uint8(8), uint16(16), uint32(32), uint64(64), n, uint(7), uintptr(0x1234))
	ret("main.ints", ints(-8, -16, -32, -64, 8, 16, 32, 64, n, 7, 0x1234))

	fx := float64(n) + 2.25
	call("main.floats", float32(1.5), fx)
	f64, f32 := floats(1.5, fx)
	ret("main.floats", f64, f32)

	call("main.leafFloat", fx)
	ret("main.leafFloat", leafFloat(fx))

	c1, c2 := complex(fx, -1), complex64(complex(0.5, 2))
	call("main.complexes", c1, c2)
	ret("main.complexes", complexes(c1, c2))

	vec := Vec{X: fx, Y: -0.125}
	call("main.Vec.Scale", vec, 4.0)
	ret("main.Vec.Scale", vec.Scale(4))

	mx := Mixed{N: n, F: 0.75, B: true}
	call("main.mixed", mx, 1e-3)
	mf, mn := mixed(mx, 1e-3)
	ret("main.mixed", mf, mn)

	fs := []any{}
	for i := 1; i <= 17; i++ {
		fs = append(fs, float64(i)+fx)
	}
	call("main.manyFloats", fs...)
	ret("main.manyFloats", manyFloats(1+fx, 2+fx, 3+fx, 4+fx, 5+fx, 6+fx, 7+fx, 8+fx, 9+fx, 10+fx, 11+fx, 12+fx, 13+fx, 14+fx, 15+fx, 16+fx, 17+fx))

	call("main.sameFloat", fx)
	ret("main.sameFloat", sameFloat(fx))

	call("main.dropFloat", fx)
	dropFloat(fx)
	ret("main.dropFloat")

	call("main.anyFloat", any(fx))
	ret("main.anyFloat", anyFloat(fx))

	fa := [2]float64{0.5, float64(n) + 0.25}
	call("main.floatsOnStack", fa, n)
	ret("main.floatsOnStack", floatsOnStack(fa, n))

	call("main.boolsAndString", true, "hello", false)
	s, ok := boolsAndString(true, "hello", false)
	ret("main.boolsAndString", s, ok)

	p := &Point{X: 3, Y: -4}
	call("main.pointer", p)
	ret("main.pointer", pointer(p))

	xs, bs, ss := []int{1, 2, 3}, []byte("abc"), make([]string, 2, 5)
	call("main.slices", xs, bs, ss)
	a, b := slices(xs, bs, ss)
	ret("main.slices", a, b)

	call("main.arrays", [1]int{n}, [3]int{4, 5, 6})
	ret("main.arrays", arrays([1]int{n}, [3]int{4, 5, 6}))

	sm, big := Small{A: -1, B: true, C: 7}, Big{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	call("main.structs", sm, big)
	ret("main.structs", structs(sm, big))

	var err error = &NotFound{Key: "k"}
	call("main.ifaces", any(n), err)
	v, e := ifaces(n, err)
	ret("main.ifaces", v, e)

	bp, bv := &Point{X: 3, Y: -4}, Small{A: int32(n), B: true, C: 9}
	call("main.boxed", goSyntax(fmt.Sprintf("%#v", bp)), goSyntax(fmt.Sprintf("%#v", bv)))
	ret("main.boxed", boxed(bp, bv))

	m, c := map[string]int{"a": 1}, make(chan int, 4)
	f := func() int { return 1 }
	call("main.containers", m, c, f)
	ret("main.containers", containers(m, c, f))

	call("main.twelve", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, n)
	ret("main.twelve", twelve(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, n))

	pt := Point{X: n, Y: 2}
	call("main.Point.Dist", pt, 3)
	ret("main.Point.Dist", pt.Dist(3))

	for _, id := range []int{n, 42} {
		key := fmt.Sprintf("user:%d", id)
		call("main.query", id, key)
		r, qerr := query(id, key)
		ret("main.query", r, qerr)
	}

	call("main.withDefer", n)
	ret("main.withDefer", withDefer(n))

	call("main.threeIntsAndString", 1, 2, n, "abc")
	ret("main.threeIntsAndString", threeIntsAndString(1, 2, n, "abc"))

	xs = []int{n + 1, 2, 3}
	call("main.stackSlice", 1, 2, 3, 4, 5, 6, 7, 8, 9, xs)
	ret("main.stackSlice", stackSlice(1, 2, 3, 4, 5, 6, 7, 8, 9, xs))

	call("main.Point.Unnamed", pt, n)
	ret("main.Point.Unnamed", pt.Unnamed(n))
}
