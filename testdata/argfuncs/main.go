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
// standard input, answering "DONE round=N" after each.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
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

//go:noinline
func floats(a float32, b float64) float64 { return float64(a) + b }

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

func main() {
	rounds := flag.Int("rounds", 1, "how many times to call every function (0: forever)")
	pause := flag.Duration("pause", 0, "pause between rounds")
	stdin := flag.Bool("stdin", false, "make a round of calls per line \"round\" on stdin instead")
	flag.Parse()
	fmt.Println("READY")
	if *stdin {
		sc := bufio.NewScanner(os.Stdin)
		for n := 0; sc.Scan(); n++ {
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

	call("main.floats", float32(1.5), 2.25)
	ret("main.floats", floats(1.5, 2.25))

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
