package inspect

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// ioWaiters maps the goroutines the copied pollDescs name as waiting to
// read (rg) or write (wg) to their pollDesc and side.
func (t *Target) ioWaiters(w *rawWaits, raws map[uint64]*rawG) map[uint64]ioWait {
	P := &t.Layout.Wait.PollDesc
	out := map[uint64]ioWait{}
	for pd, b := range w.polls {
		if g := t.u64(b, P.RG); raws[g] != nil {
			out[g] = ioWait{pd: pd, fd: w.pollFD[pd], dir: "read"}
		}
		if g := t.u64(b, P.WG); raws[g] != nil {
			out[g] = ioWait{pd: pd, fd: w.pollFD[pd], dir: "write"}
		}
	}
	return out
}

// pollStackScan is how much of an IO-waiting goroutine's stack, from
// its stack pointer, pollDescOnStack reads: gopark's and netpollblock's
// frames.
const pollStackScan = 1024

// pollDescOnStack finds the pollDesc an IO-waiting goroutine is parked on
// without the process's epoll registrations (a core file): netpollblock
// keeps &pd.rg (or &pd.wg) on its stack across the park, and that word
// holds the goroutine itself until it is woken. A word of the stack's
// top that points at a word holding the goroutine's address, at a
// pollDesc's rg or wg whose descriptor is one, is taken: nothing else
// holds a pointer to a word holding a parked goroutine.
func (t *Target) pollDescOnStack(rg *rawG) (ioWait, bool) {
	P := &t.Layout.Wait.PollDesc
	if rg == nil || P.Size == 0 {
		return ioWait{}, false
	}
	stack := rg.stack[:min(len(rg.stack), pollStackScan)]
	for i := 0; i+8 <= len(stack); i += 8 {
		v := t.u64(stack, int64(i))
		if v < 4096 || v%8 != 0 || (v >= rg.addr && v < rg.addr+uint64(t.Layout.G.Size)) {
			continue // the g's own fields (sched.g) hold it too
		}
		if w, err := t.readWord(v); err != nil || w != rg.addr {
			continue
		}
		for _, f := range []struct {
			off int64
			dir string
		}{{P.RG, "read"}, {P.WG, "write"}} {
			pd := v - uint64(f.off)
			if fd, err := t.readWord(pd + uint64(P.FD)); err == nil && fd < 1<<20 {
				return ioWait{pd: pd, fd: int(fd), dir: f.dir}, true
			}
		}
	}
	return ioWait{}, false
}

type ioWait struct {
	pd  uint64
	fd  int
	dir string
}

// problemWarnings are the snapshot warnings of what could not be followed.
func (w *rawWaits) problemWarnings() []string {
	out := make([]string, len(w.problems))
	for i, p := range w.problems {
		out[i] = "waiting on: " + p
	}
	return out
}

// index builds, after the stop, the maps decoding needs: sudogs by
// address, validated (each must name a goroutine of the snapshot), and the
// semaphore each sync waiter sleeps on.
func (t *Target) index(w *rawWaits, raws map[uint64]*rawG) {
	W := &t.Layout.Wait
	w.sudogs = map[uint64][]byte{}
	bad := 0
	for _, rd := range w.rounds {
		for i, r := range rd.reads {
			b := rd.bufs[i]
			if r.what != readSudog || b == nil {
				continue
			}
			g := t.u64(b, W.Sudog.G)
			if raws[g] == nil {
				// Not a waiter of a live goroutine: a structure that does
				// not make sense; its links were followed no further than
				// the bound.
				bad++
				continue
			}
			w.sudogs[r.addr] = b
			if t.u64(b, W.Sudog.C) == 0 {
				if sema := t.u64(b, W.Sudog.Elem); sema != 0 {
					w.semaOf[g] = sema
				}
			}
		}
	}
	if bad > 0 {
		w.problems = append(w.problems, fmt.Sprintf("%d sudogs do not name a goroutine: ignored", bad))
	}
}

// decodeWaits fills WaitingOn of every waiting goroutine.
func (t *Target) decodeWaits(w *rawWaits, gs []*Goroutine, rgs []*rawG, now int64, raws map[uint64]*rawG) {
	W := &t.Layout.Wait
	if w == nil {
		return
	}
	if !W.Known {
		for _, g := range gs {
			if waitKind(g.WaitReason) != "" {
				g.WaitingOn = []WaitObject{{Kind: waitKind(g.WaitReason), Unknown: "the binary does not describe the runtime's wait structures: " + W.Reason}}
			}
		}
		return
	}
	chanDir, queues := t.walkChanQueues(w)
	io := t.ioWaiters(w, raws)
	waiting, inSyscall := t.mustStatus("_Gwaiting"), t.mustStatus("_Gsyscall")
	fds := map[int]*proc.FD{}
	describe := func(fd int) *proc.FD {
		d := fds[fd]
		if d == nil {
			desc := proc.FD{FD: fd}
			if t.process != nil && t.process.DescribeFD != nil {
				if got, err := t.process.DescribeFD(fd); err == nil {
					desc = got
				}
			}
			d = &desc
			fds[fd] = d
		}
		return d
	}
	for i, g := range gs {
		// A goroutine blocked in a system call on a descriptor.
		if rg := rgs[i]; rg.inSyscall && g.StatusValue == inSyscall {
			if sc, ok := fdSyscallsFor(t.Binary.Arch)[rg.syscall]; ok && rg.syscallArg0 < 1<<31 {
				d := describe(int(rg.syscallArg0))
				g.WaitingOn = []WaitObject{{Kind: "fd", Dir: sc.dir, Syscall: sc.name, FD: d, Type: typeOr(d.Kind, "fd")}}
			}
		}
	}
	chans := map[uint64]WaitObject{}    // each channel described once: its queues may be long
	objects := map[uint64]*WaitObject{} // sync objects shared by their waiters, counting them
	var condOf map[uint64][]uint64      // the Conds waiters are queued in
	_, followConds := t.condWaitReason()
	describeWait := func(g *Goroutine, rg *rawG) {
		switch reason := g.WaitReason; {
		case reason == "chan receive (nil chan)" || reason == "chan send (nil chan)":
			dir := "recv"
			if strings.HasPrefix(reason, "chan send") {
				dir = "send"
			}
			g.WaitingOn = []WaitObject{{Kind: "chan", Dir: dir, Type: "chan (nil)"}}
		case reason == "chan receive" || reason == "chan send" || reason == "select":
			for s, n := rg.waiting, 0; s != 0 && n < 1<<16; n++ {
				sb, ok := w.sudogs[s]
				if !ok {
					g.WaitingOn = append(g.WaitingOn, WaitObject{Kind: "chan", Unknown: fmt.Sprintf("sudog %#x not copied", s)})
					break
				}
				c := t.u64(sb, W.Sudog.C)
				shared, ok := chans[c]
				if !ok {
					shared = t.chanObject(w, c, queues[c])
					chans[c] = shared
				}
				obj := shared
				obj.Dir = chanDir[s]
				obj.Queued = obj.Dir != ""
				if obj.Dir == "" && reason != "select" {
					obj.Dir = map[string]string{"chan receive": "recv", "chan send": "send"}[reason]
				}
				g.WaitingOn = append(g.WaitingOn, obj)
				s = t.u64(sb, W.Sudog.WaitLink)
			}
		case reason == "sleep":
			var when int64
			if W.GSleepWhen != runtimelayout.Missing {
				when = int64(rg.sleepWhen)
			} else if tw, ok := w.timerWhen[g.Addr]; ok {
				when = tw
			} else {
				g.WaitingOn = []WaitObject{{Kind: "timer", Unknown: "its timer was not copied"}}
				return
			}
			if now == 0 {
				g.WaitingOn = []WaitObject{{Kind: "timer", Type: "time.Sleep", Unknown: "the time of the snapshot is unknown"}}
				return
			}
			g.WaitingOn = []WaitObject{{Kind: "timer", Type: "time.Sleep", WakeIn: when - now}}
		case reason == "IO wait":
			iw, ok := io[g.Addr]
			if !ok && !t.live {
				iw, ok = t.pollDescOnStack(rg)
			}
			if !ok {
				g.WaitingOn = []WaitObject{{Kind: "fd", Unknown: "no pollDesc registered with epoll names the goroutine"}}
				return
			}
			d := describe(iw.fd)
			g.WaitingOn = []WaitObject{{Kind: "fd", Addr: iw.pd, Dir: iw.dir, FD: d, Type: typeOr(d.Kind, "fd")}}
		case reason == "sync.Cond.Wait":
			if condOf == nil {
				condOf = t.condOf(w, raws)
			}
			obj := WaitObject{Kind: "cond", Type: "*sync.Cond"}
			switch conds := condOf[g.Addr]; {
			case !followConds:
				obj.Unknown = "the binary does not describe sync.Cond and runtime.notifyList"
			case len(conds) > 1:
				obj.Unknown = fmt.Sprintf("%d sync.Conds its stack points at queue it", len(conds))
			case len(conds) == 0:
				obj.Unknown = "no sync.Cond its sudog or stack points at has it in its queue"
			default:
				base := conds[0]
				shared := objects[base]
				if shared == nil {
					shared = &WaitObject{Kind: "cond", Type: "*sync.Cond", Addr: base, Name: t.globalName(base), Sync: &SyncState{}}
					objects[base] = shared
				}
				shared.Sync.Waiters++
				obj = *shared
			}
			g.WaitingOn = []WaitObject{obj}
		default:
			sema, ok := w.semaOf[g.Addr]
			if !ok {
				kind, dir, _ := t.syncObject(g, 0)
				if kind == "sema" {
					kind = waitKind(reason)
				}
				why := "not found in the semaphore table"
				if W.SemTable == 0 {
					why = "the semaphore table's address is unknown (a stripped binary on an architecture gi cannot find it on)"
				}
				if kind != "" {
					g.WaitingOn = []WaitObject{{Kind: kind, Dir: dir, Unknown: why}}
				}
				return
			}
			kind, dir, base := t.syncObject(g, sema)
			obj := objects[base]
			if obj == nil {
				obj = t.syncState(w, kind, base, sema)
				objects[base] = obj
			}
			obj.Sync.Waiters++
			o := *obj
			o.Dir, o.Sema = dir, sema
			g.WaitingOn = []WaitObject{o}
		}
	}
	interned := waitInterner{}
	for i, g := range gs {
		if g.StatusValue != waiting {
			continue
		}
		describeWait(g, rgs[i])
		g.WaitingOn = interned.keep(g.WaitingOn)
	}
	// Each waiter's copy of a sync object shares its SyncState: the
	// waiter count is complete once every goroutine is seen.
}

// waitInterner shares equal WaitingOn lists between goroutines: 100k
// goroutines blocked on one channel wait on the same thing (10 MB of
// copies). Lists are never written after keep.
type waitInterner sharedLists[WaitObject]

// keep returns a list already kept equal to objs, else keeps objs.
func (in waitInterner) keep(objs []WaitObject) []WaitObject {
	if len(objs) == 0 {
		return objs
	}
	h := newListHash()
	for i := range objs {
		o := &objs[i]
		h.str(o.Kind)
		h.word(o.Addr)
		h.str(o.Name)
		h.str(o.Type)
		h.str(o.Dir)
		h.word(uint64(uintptr(unsafe.Pointer(o.Chan))))
		h.word(uint64(uintptr(unsafe.Pointer(o.Sync))))
		h.word(uint64(uintptr(unsafe.Pointer(o.FD))))
		h.str(o.Syscall)
		h.word(uint64(o.WakeIn))
		h.str(o.Unknown)
	}
	lists := sharedLists[WaitObject](in)
	if same, ok := lists.find(h, objs); ok {
		return same
	}
	lists.add(h, objs)
	return objs
}

func typeOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (t *Target) mustStatus(name string) uint32 {
	v, _ := t.Layout.StatusValue(name)
	return v
}

// waitKind is the kind of object a wait reason implies, "" for none.
func waitKind(reason string) string {
	switch {
	case strings.HasPrefix(reason, "chan "), reason == "select":
		return "chan"
	case reason == "sync.Mutex.Lock":
		return "mutex"
	case strings.HasPrefix(reason, "sync.RWMutex"):
		return "rwmutex"
	case reason == "sync.WaitGroup.Wait":
		return "waitgroup"
	case reason == "sync.Cond.Wait":
		return "cond"
	case reason == "semacquire":
		return "sema"
	case reason == "IO wait":
		return "fd"
	case reason == "sleep":
		return "timer"
	}
	return ""
}

// chanQueues are the lengths of a channel's queues.
type chanQueues struct {
	receivers, senders int
	// incomplete is set when a queue could not be walked to its end.
	incomplete bool
}

// walkChanQueues walks each copied channel's receive and send queues
// through the copied sudogs (every queued sudog belongs to a waiting
// goroutine, so no read is needed): the side of each sudog, and each
// channel's queue lengths.
func (t *Target) walkChanQueues(w *rawWaits) (dir map[uint64]string, queues map[uint64]chanQueues) {
	W := &t.Layout.Wait
	dir, queues = map[uint64]string{}, map[uint64]chanQueues{}
	for c, cb := range w.chans {
		var q chanQueues
		for _, side := range []struct {
			off  int64
			name string
			n    *int
		}{{W.Chan.RecvQ, "recv", &q.receivers}, {W.Chan.SendQ, "send", &q.senders}} {
			for s, n := t.u64(cb, side.off), 0; s != 0 && n <= len(w.sudogs); n++ {
				sb, ok := w.sudogs[s]
				if !ok {
					q.incomplete = true
					break
				}
				dir[s] = side.name
				*side.n++
				s = t.u64(sb, W.Sudog.Next)
			}
		}
		queues[c] = q
	}
	return dir, queues
}

// chanObject describes channel c from its copy and its queues.
func (t *Target) chanObject(w *rawWaits, c uint64, q chanQueues) WaitObject {
	W := &t.Layout.Wait
	obj := WaitObject{Kind: "chan", Addr: c, Type: "chan"}
	cb, ok := w.chans[c]
	if !ok {
		obj.Unknown = "channel not copied"
		return obj
	}
	st := &ChanState{
		Len:        t.u64(cb, W.Chan.QCount),
		Cap:        t.u64(cb, W.Chan.DataQSiz),
		Closed:     t.u32(cb, W.Chan.Closed) != 0,
		Receivers:  q.receivers,
		Senders:    q.senders,
		Incomplete: q.incomplete,
	}
	if elem := t.typeName(t.u64(cb, W.Chan.ElemType)); elem != "" {
		st.ElemType = elem
		obj.Type = "chan " + elem
	}
	obj.Chan = st
	obj.Name = t.globalName(c)
	return obj
}

// syncObject tells which sync object a goroutine sleeping on semaphore
// sema waits for, from its stack: kind, the goroutine's side and the
// object's address.
func (t *Target) syncObject(g *Goroutine, sema uint64) (kind, dir string, base uint64) {
	functions := make([]string, len(g.Frames))
	for i, f := range g.Frames {
		functions[i] = f.Function
	}
	return t.Layout.Wait.SyncObject(functions, sema)
}

// syncState reads a sync object's state from the bytes copied around its
// semaphore.
func (t *Target) syncState(w *rawWaits, kind string, base, sema uint64) *WaitObject {
	W := &t.Layout.Wait
	obj := &WaitObject{Kind: kind, Addr: base, Sync: &SyncState{}, Name: t.globalName(base)}
	obj.Type = map[string]string{"mutex": "*sync.Mutex", "rwmutex": "*sync.RWMutex", "waitgroup": "*sync.WaitGroup", "sema": "semaphore"}[kind]
	window, copied := w.windows[sema]
	win := window.bytes
	at := func(off int64, size int) (uint64, bool) {
		p := int64(base) + off - int64(sema-semWindowBefore)
		if !copied || p < int64(window.lo) || p+int64(size) > int64(window.hi) {
			return 0, false
		}
		if size == 4 {
			return uint64(binary.LittleEndian.Uint32(win[p:])), true
		}
		return binary.LittleEndian.Uint64(win[p:]), true
	}
	known := false
	switch kind {
	case "mutex":
		if s, ok := at(W.MutexState, 4); ok {
			obj.Sync.Locked, obj.Sync.Starving, known = s&runtimelayout.MutexLocked != 0, s&runtimelayout.MutexStarving != 0, true
		}
	case "rwmutex":
		if c, ok := at(W.RWMutexReaderCount, 4); ok {
			n := int32(c)
			if n < 0 { // a writer holds it or waits for readers to leave
				obj.Sync.Locked = true
				n += runtimelayout.RWMutexMaxReaders
			}
			obj.Sync.Readers, known = n, true
		}
	case "waitgroup":
		if s, ok := at(W.WaitGroupState, 8); ok {
			obj.Sync.Counter, known = int32(s>>runtimelayout.WaitGroupCounterShift), true
		}
	case "sema":
		known = true
	}
	if !known {
		obj.Unknown = "state not copied"
	}
	return obj
}

// globalName names the global variable holding runtime address addr, ""
// for an address outside the binary's data.
func (t *Target) globalName(addr uint64) string {
	if addr < t.Bias {
		return ""
	}
	return t.Binary.GlobalName(addr - t.Bias)
}

// typeName returns the name of the runtime type descriptor at runtime
// address typ, read from the binary (type descriptors are read-only data),
// or "" when it cannot be read.
func (t *Target) typeName(typ uint64) string {
	W := &t.Layout.Wait
	base, ok := t.Binary.Symbol("runtime.types")
	if typ == 0 || !ok || typ < t.Bias {
		return ""
	}
	var hdr [64]byte
	if _, err := t.Binary.ReadAt(hdr[:], typ-t.Bias); err != nil || W.TypeStr+4 > int64(len(hdr)) {
		return ""
	}
	tflag := hdr[W.TypeTFlag]
	str := int32(binary.LittleEndian.Uint32(hdr[W.TypeStr:]))
	var nb [2 + binary.MaxVarintLen64 + 256]byte
	n, _ := t.Binary.ReadAt(nb[:], base.Addr+uint64(str))
	if n < 2 {
		return ""
	}
	l, k := binary.Uvarint(nb[1:n])
	if k <= 0 || 1+k+int(l) > n {
		return ""
	}
	name := string(nb[1+k : 1+k+int(l)])
	if tflag&runtimelayout.TFlagExtraStar != 0 {
		name = strings.TrimPrefix(name, "*")
	}
	return name
}
