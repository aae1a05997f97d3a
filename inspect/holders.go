package inspect

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
)

// Lock holders. A sync.Mutex records no owner, but the idiom that takes
// one, mu.Lock(); defer mu.Unlock(), leaves a pending deferred call in the
// holder's frame until it returns: the compiler lowers the deferred call
// into a wrapper closure (outer.deferwrapN; outer.funcN before Go 1.22)
// whose first context word is the receiver, the *Mutex, for a global
// mutex too. An open-coded defer (the usual kind) keeps its closure in a
// slot of the frame and a bit saying it is pending, both found through
// FUNCDATA_OpenCodedDeferInfo (pclntab.OpenDefers); the bit is cleared
// before the deferred call runs. So a goroutine whose frame has a pending
// deferred unlock of the mutex M, and that is not itself waiting for M
// (a defer registered before the Lock it waits in) nor in a Cond's Wait
// on M (which unlocked it), holds M. A lock taken without defer, or held
// by a goroutine that returned without unlocking, shows no holder: gi
// says so rather than guess.

// Holder is a goroutine that holds a lock, by the deferred unlock pending
// in one of its frames.
type Holder struct {
	Goid uint64
	// Function is the function whose frame holds the pending unlock;
	// File and Line are its defer statement's.
	Function string
	File     string
	Line     int
	// Read says it holds a RWMutex for reading (a deferred RUnlock).
	Read bool
	// WaitsOn is what the holder waits on itself ("chan 0xc000123000",
	// "mutex main.b"): the next link of a blocking chain.
	WaitsOn []string

	g *Goroutine
}

// String reads "goroutine 29 at main.load demo/main.go:77", and what the
// holder waits on itself: ", which waits on chan 0xc000123000".
func (h Holder) String() string {
	s := fmt.Sprintf("goroutine %d at %s %s:%d", h.Goid, h.Function, ShortPath(h.File), h.Line)
	switch {
	case len(h.WaitsOn) == 1 && h.WaitsOn[0] == "sleep":
		s += ", which sleeps"
	case len(h.WaitsOn) > 0:
		s += ", which waits on " + strings.Join(h.WaitsOn, " or ")
	}
	return s
}

// ShortPath keeps a path's last directory and file name: enough to find
// the file ("demo/main.go").
func ShortPath(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		if j := strings.LastIndexByte(p[:i], '/'); j >= 0 {
			return p[j+1:]
		}
	}
	return p
}

// unlockKind is what a deferred call releases.
type unlockKind uint8

const (
	unlockNone  unlockKind = iota
	unlockWrite            // sync.(*Mutex).Unlock, sync.(*RWMutex).Unlock
	unlockRead             // sync.(*RWMutex).RUnlock
)

// pendingUnlock is a deferred unlock pending in a goroutine's frame.
type pendingUnlock struct {
	// recv is the deferred closure's first context word: the receiver.
	recv uint64
	kind unlockKind
	// fn is the frame's function; file and line the defer statement.
	fn, file string
	line     int
	// frame is the frame's index among the goroutine's physical frames,
	// innermost 0.
	frame int
}

// maxWrapperCode bounds the code of a deferred closure gi decodes.
const maxWrapperCode = 512

// openDefers collects the deferred unlocks pending in the frame of f at
// [sp, fp) of rg's copied stack, appending them to g's.
func (t *Target) openDefers(g *Goroutine, rg *rawG, f *pclntab.Func, sp, fp uint64, frame int) {
	s := t.sym
	od, ok := s.openDefers(f)
	if !ok {
		return
	}
	varp := fp
	if t.Binary.Arch != "arm64" {
		varp -= 8
	}
	if varp > sp {
		varp -= 8
	}
	word := func(addr uint64) (uint64, bool) {
		base, n := rg.sp, uint64(len(rg.stack))
		if addr < base || n < 8 || addr-base > n-8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(rg.stack[addr-base:]), true
	}
	if od.BitsOff == 0 || od.BitsOff > varp-sp {
		return
	}
	bitsAt := varp - od.BitsOff
	if bitsAt < rg.sp || bitsAt >= rg.sp+uint64(len(rg.stack)) {
		return
	}
	bits := rg.stack[bitsAt-rg.sp]
	for i, off := range od.SlotOff {
		if bits&(1<<i) == 0 || off > varp-sp {
			continue
		}
		clo, ok := word(varp - off)
		if !ok || clo == 0 {
			continue
		}
		var fv [16]byte // code pointer, first context word
		if code, ok := word(clo); ok {
			recv, _ := word(clo + 8)
			binary.LittleEndian.PutUint64(fv[:], code)
			binary.LittleEndian.PutUint64(fv[8:], recv)
		} else if n, err := t.Mem.ReadAt(fv[:], clo); err != nil || n != len(fv) {
			continue // a closure off the stack that cannot be read
		}
		code, recv := binary.LittleEndian.Uint64(fv[:]), binary.LittleEndian.Uint64(fv[8:])
		w := s.funcFor(code)
		if w == nil || w.Entry+s.bias != code || recv == 0 {
			continue
		}
		kind := t.unlockKindOf(w)
		if kind == unlockNone {
			continue
		}
		p := pendingUnlock{recv: recv, kind: kind, fn: f.Name, frame: frame}
		// The wrapper's first instruction is on the defer statement's
		// line.
		if fr, err := s.logical(w, w.Entry+s.bias); err == nil && len(fr) > 0 {
			p.file, p.line = fr[len(fr)-1].File, fr[len(fr)-1].Line
		}
		g.unlocks = append(g.unlocks, p)
	}
}

// openDefers returns f's open-coded defers, cached.
func (s *symbolizer) openDefers(f *pclntab.Func) (pclntab.OpenDefers, bool) {
	if !s.lines.HasOpenDefers(f) {
		return pclntab.OpenDefers{}, false // most frames: no map lookup
	}
	if d, ok := s.defers[f.Entry]; ok {
		return d, d.SlotOff != nil
	}
	d, ok, err := s.lines.OpenDefers(f, s.minor != 0 && s.minor < 22)
	if err != nil || !ok {
		d = pclntab.OpenDefers{}
	}
	if s.defers == nil {
		s.defers = map[uint64]pclntab.OpenDefers{}
	}
	s.defers[f.Entry] = d
	return d, d.SlotOff != nil
}

// unlockKindOf says what the deferred closure w releases, by the
// functions its code calls directly: the slow paths of the unlocks the
// compiler inlines (sync.(*Mutex).Unlock's unlockSlow, RUnlock's
// rUnlockSlow), or the unlocks themselves. Cached by entry.
func (t *Target) unlockKindOf(w *pclntab.Func) unlockKind {
	s := t.sym
	if k, ok := s.unlockKinds[w.Entry]; ok {
		return k
	}
	k := unlockNone
	n := min(w.End-w.Entry, maxWrapperCode)
	code := make([]byte, n)
	if got, err := t.Binary.ReadAt(code, w.Entry); err == nil && uint64(got) == n {
		for _, target := range directCalls(t.Binary.Arch, code, w.Entry) {
			if callee := s.lines.FuncForPC(target); callee != nil && callee.Entry == target {
				if k = unlockKindByName(callee.Name); k != unlockNone {
					break
				}
			}
		}
	}
	if s.unlockKinds == nil {
		s.unlockKinds = map[uint64]unlockKind{}
	}
	s.unlockKinds[w.Entry] = k
	return k
}

// unlockKindByName says what a function of package sync releases.
func unlockKindByName(name string) unlockKind {
	switch name {
	case "sync.(*Mutex).Unlock", "sync.(*Mutex).unlockSlow", "internal/sync.(*Mutex).Unlock", "internal/sync.(*Mutex).unlockSlow",
		"sync.(*RWMutex).Unlock":
		return unlockWrite
	case "sync.(*RWMutex).RUnlock", "sync.(*RWMutex).rUnlockSlow":
		return unlockRead
	}
	return unlockNone
}

// directCalls returns the targets (link-time addresses) of the direct
// calls in code, which starts at entry.
func directCalls(arch string, code []byte, entry uint64) []uint64 {
	var out []uint64
	if arch == "arm64" {
		for off := 0; off+4 <= len(code); off += 4 {
			inst, err := arm64asm.Decode(code[off:])
			if err != nil || inst.Op != arm64asm.BL {
				continue
			}
			if rel, ok := inst.Args[0].(arm64asm.PCRel); ok {
				out = append(out, uint64(int64(entry)+int64(off)+int64(rel)))
			}
		}
		return out
	}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			off++
			continue
		}
		if inst.Op == x86asm.CALL {
			if rel, ok := inst.Args[0].(x86asm.Rel); ok {
				out = append(out, uint64(int64(entry)+int64(off+inst.Len)+int64(rel)))
			}
		}
		off += inst.Len
	}
	return out
}

// isLockPlumbing says whether a function is the runtime's or package
// sync's: frames a goroutine waiting in Lock has above its caller's.
func isLockPlumbing(name string) bool {
	return strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "sync.") || strings.HasPrefix(name, "internal/sync.")
}

// findHolders names, on every mutex and RWMutex the goroutines of gs wait
// on, the goroutines that hold it by a pending deferred unlock, and
// returns the cycles of goroutines each waiting for a lock the next holds
// (deadlocks), marking their members. A holder is named only where the
// lock's state agrees: a mutex locked, a RWMutex write-locked for a
// writer, read by some for readers.
func (t *Target) findHolders(gs []*Goroutine) []Deadlock {
	byRecv := map[uint64][]int{} // receiver -> indexes into gs
	for i, g := range gs {
		for _, u := range g.unlocks {
			if l := byRecv[u.recv]; len(l) == 0 || l[len(l)-1] != i {
				byRecv[u.recv] = append(byRecv[u.recv], i)
			}
		}
	}
	if len(byRecv) == 0 {
		return nil
	}
	// A goroutine in a Cond's Wait unlocked the Cond's lock: L, the
	// interface before the Cond's notify list (its data word the lock's
	// address). 0 when not known.
	condLock := map[uint64]uint64{}
	lockOf := func(cond uint64) uint64 {
		if l, ok := condLock[cond]; ok {
			return l
		}
		l := uint64(0)
		if off := t.Layout.Wait.CondNotify; cond != 0 && off != runtimelayout.Missing && off >= 8 {
			var b [8]byte
			if n, err := t.Mem.ReadAt(b[:], cond+uint64(off)-8); err == nil && n == 8 {
				l = binary.LittleEndian.Uint64(b[:])
			}
		}
		condLock[cond] = l
		return l
	}
	// holds says whether h's pending unlock u means h holds m: not when h
	// waits in a Cond's Wait on m, or on a Cond whose lock is not known;
	// not when h waits for m itself from the frame whose defer is pending
	// (a defer registered before its Lock); when the defer is in a frame
	// further out, h took m and waits to take it again.
	holds := func(h *Goroutine, u pendingUnlock, m uint64) bool {
		for _, o := range h.WaitingOn {
			if o.Addr == m && (o.Kind == "mutex" || o.Kind == "rwmutex") {
				return h.lockCaller >= 0 && u.frame > h.lockCaller
			}
			if o.Kind == "cond" {
				if l := lockOf(o.Addr); l == 0 || l == m {
					return false
				}
			}
		}
		for _, f := range h.Frames {
			if f.Function == "sync.(*Cond).Wait" && !waitsOnKnownCond(h) {
				return false
			}
		}
		return true
	}
	holders := map[uint64][]Holder{}
	done := map[uint64]bool{}
	for _, g := range gs {
		for _, o := range g.WaitingOn {
			if o.Sync == nil || (o.Kind != "mutex" && o.Kind != "rwmutex") || o.Addr == 0 {
				continue
			}
			m := o.Addr
			if done[m] {
				continue
			}
			done[m] = true
			for _, i := range byRecv[m] {
				h := gs[i]
				for _, u := range h.unlocks {
					if u.recv != m || !stateAgrees(o, u.kind) || !holds(h, u, m) {
						continue
					}
					holders[m] = append(holders[m], Holder{Goid: h.ID, Function: u.fn, File: u.file, Line: u.line, Read: u.kind == unlockRead, g: h})
					break
				}
			}
		}
	}
	// What each holder waits on itself: the chain's next link.
	for m, hs := range holders {
		for i := range hs {
			for _, o := range hs[i].g.WaitingOn {
				head, _ := o.Parts()
				if o.Kind == "timer" {
					head = "sleep"
				}
				hs[i].WaitsOn = append(hs[i].WaitsOn, head)
			}
		}
		holders[m] = hs
	}
	for _, g := range gs {
		for _, o := range g.WaitingOn {
			if o.Sync != nil && o.Sync.Holders == nil {
				o.Sync.Holders = holders[o.Addr]
			}
		}
	}
	// A writer parked on a RWMutex's writerSem holds its inner mutex:
	// new readers wait for it.
	pending := map[uint64][]*Goroutine{}
	if off := t.Layout.Wait.RWMutexWriterSem; off != runtimelayout.Missing {
		for _, g := range gs {
			for _, o := range g.WaitingOn {
				if o.Kind == "rwmutex" && o.Dir == "write" && o.Addr != 0 && o.Sema == o.Addr+uint64(off) {
					pending[o.Addr] = append(pending[o.Addr], g)
				}
			}
		}
	}
	return deadlocks(gs, holders, pending)
}

// stateAgrees says whether a lock in o's state can be held by a pending
// unlock of kind k: a mutex locked; a RWMutex write-locked (or a writer
// pending) for a writer, with readers for a reader.
func stateAgrees(o WaitObject, k unlockKind) bool {
	s := o.Sync
	switch {
	case o.Unknown != "":
		return false
	case o.Kind == "mutex":
		return k == unlockWrite && s.Locked
	case k == unlockWrite:
		return s.Locked
	case k == unlockRead:
		return s.Readers > 0
	}
	return false
}

// waitsOnKnownCond says whether g waits on a Cond gi identified.
func waitsOnKnownCond(g *Goroutine) bool {
	for _, o := range g.WaitingOn {
		if o.Kind == "cond" && o.Addr != 0 {
			return true
		}
	}
	return false
}

// Deadlock is a cycle of goroutines each waiting for a lock the next
// holds, by the holders' pending deferred unlocks: none of them can run
// again.
type Deadlock struct {
	Members []DeadlockMember
}

// DeadlockMember is one goroutine of a deadlock: the lock it waits for,
// held by the next member (the last's by the first).
type DeadlockMember struct {
	Goid uint64
	// Function and Line are where it waits (its innermost frame outside
	// the runtime and package sync).
	Function string
	File     string
	Line     int
	// WaitsFor is the lock it waits for ("mutex main.b").
	WaitsFor string

	lock uint64 // the address of the lock it waits for
}

// String reads "goroutine 7 at main.ab demo/main.go:20 waits for mutex
// main.b".
func (m DeadlockMember) String() string {
	return fmt.Sprintf("goroutine %d at %s %s:%d waits for %s", m.Goid, m.Function, ShortPath(m.File), m.Line, m.WaitsFor)
}

// deadlocks finds the cycles of the wait-for graph: an edge from each
// goroutine waiting for a lock to each of the lock's holders (a reader
// waiting on a RWMutex waits only for its writer, and for the writers
// pending, by RWMutex, which hold its inner mutex). Lock waits are all
// needed, so every cycle is a deadlock: the graph's strongly connected
// components of more than one goroutine, or of one waiting for itself,
// each reported once as its shortest cycle through its least goroutine
// id, whose members are marked Deadlocked.
func deadlocks(gs []*Goroutine, holders map[uint64][]Holder, pending map[uint64][]*Goroutine) []Deadlock {
	type edge struct {
		to   int
		lock WaitObject
	}
	index := make(map[*Goroutine]int, len(gs))
	for i, g := range gs {
		index[g] = i
	}
	next := make([][]edge, len(gs))
	hasEdges := false
	for i, g := range gs {
		for _, o := range g.WaitingOn {
			if o.Kind != "mutex" && o.Kind != "rwmutex" {
				continue
			}
			for _, h := range holders[o.Addr] {
				if o.Kind == "rwmutex" && o.Dir == "read" && h.Read {
					continue // readers do not exclude a reader
				}
				if j, ok := index[h.g]; ok {
					next[i] = append(next[i], edge{j, o})
					hasEdges = true
				}
			}
			if o.Kind == "rwmutex" && o.Dir == "read" {
				for _, w := range pending[o.Addr] {
					if j, ok := index[w]; ok && w != g {
						next[i] = append(next[i], edge{j, o})
						hasEdges = true
					}
				}
			}
		}
	}
	if !hasEdges {
		return nil
	}
	comp := components(len(gs), func(i int, visit func(int)) {
		for _, e := range next[i] {
			visit(e.to)
		}
	})
	var out []Deadlock
	for _, c := range comp {
		in := map[int]bool{}
		least := c[0]
		for _, i := range c {
			in[i] = true
			if gs[i].ID < gs[least].ID {
				least = i
			}
		}
		// The shortest cycle through least, by a breadth-first walk
		// inside the component.
		prev := map[int]edge{}
		from := map[int]int{}
		queue := []int{least}
		seen := map[int]bool{least: true}
		closing, found := -1, false
		for len(queue) > 0 && !found {
			i := queue[0]
			queue = queue[1:]
			for _, e := range next[i] {
				if !in[e.to] {
					continue
				}
				if e.to == least {
					closing, found = i, true
					prev[least] = e
					break
				}
				if !seen[e.to] {
					seen[e.to] = true
					prev[e.to], from[e.to] = e, i
					queue = append(queue, e.to)
				}
			}
		}
		if !found {
			continue // a component of one goroutine that waits for no one in it
		}
		// Walk back from the edge that closes the cycle.
		var cycle []int
		for i := closing; ; i = from[i] {
			cycle = append(cycle, i)
			if i == least {
				break
			}
		}
		slices.Reverse(cycle) // least first
		d := Deadlock{}
		for k, i := range cycle {
			g := gs[i]
			// The lock member k waits for is on its edge to member k+1.
			to := cycle[(k+1)%len(cycle)]
			var lock WaitObject
			for _, e := range next[i] {
				if e.to == to {
					lock = e.lock
					break
				}
			}
			g.Deadlocked = true
			head, _ := lock.Parts()
			m := DeadlockMember{Goid: g.ID, WaitsFor: head, lock: lock.Addr}
			if fr := g.waitFrame(); fr != nil {
				m.Function, m.File, m.Line = fr.Function, fr.File, fr.Line
			}
			d.Members = append(d.Members, m)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Deadlock) int { return cmp.Compare(a.Members[0].Goid, b.Members[0].Goid) })
	return out
}

// components returns the strongly connected components of a graph of n
// nodes whose edges each calls visit on (Tarjan's algorithm, iterative:
// a chain of 100k goroutines does not grow the stack).
func components(n int, edges func(i int, visit func(int))) [][]int {
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	counter := 0
	type frame struct {
		node int
		succ []int
		at   int
	}
	succOf := func(i int) []int {
		var s []int
		edges(i, func(j int) { s = append(s, j) })
		return s
	}
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		work := []frame{{node: root, succ: succOf(root)}}
		index[root], low[root] = counter, counter
		counter++
		stack = append(stack, root)
		onStack[root] = true
		for len(work) > 0 {
			f := &work[len(work)-1]
			if f.at < len(f.succ) {
				j := f.succ[f.at]
				f.at++
				switch {
				case index[j] < 0:
					index[j], low[j] = counter, counter
					counter++
					stack = append(stack, j)
					onStack[j] = true
					work = append(work, frame{node: j, succ: succOf(j)})
				case onStack[j]:
					low[f.node] = min(low[f.node], index[j])
				}
				continue
			}
			i := f.node
			work = work[:len(work)-1]
			if len(work) > 0 {
				p := work[len(work)-1].node
				low[p] = min(low[p], low[i])
			}
			if low[i] == index[i] {
				var c []int
				for {
					j := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[j] = false
					c = append(c, j)
					if j == i {
						break
					}
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// waitFrame is the goroutine's innermost frame outside the runtime and
// package sync, nil if none.
func (g *Goroutine) waitFrame() *Frame {
	for i := range g.Frames {
		if !isLockPlumbing(g.Frames[i].Function) {
			return &g.Frames[i]
		}
	}
	return nil
}
