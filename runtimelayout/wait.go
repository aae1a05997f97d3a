package runtimelayout

import (
	"debug/dwarf"
	"fmt"
	"strings"
)

// WaitLayout holds the layouts of the runtime structures a blocked
// goroutine waits through: its sudogs (g.waiting), the channels they point
// at, the semaphore table the sync package's waiters queue in, and the
// time.Sleep timer. Known is false when the binary's DWARF (or the table)
// does not describe them; Reason then says why.
type WaitLayout struct {
	Known  bool
	Reason string

	// In runtime.g.
	GWaiting   int64 // g.waiting: *sudog
	GTimer     int64 // g.timer: the cached time.Sleep timer
	GSleepWhen int64 // g.sleepWhen (Go 1.23+), or Missing
	// TimerWhen is runtime.timer.nextwhen before Go 1.23 (what
	// time.Sleep sets), else runtime.timer.when.
	TimerWhen int64

	Sudog SudogLayout
	Chan  ChanLayout

	// SemRootSize is the stride of runtime.semtable's entries; SemRootTreap
	// the offset of semaRoot.treap in each; SemTableLen their count.
	SemTableLen  int64
	SemRootSize  int64
	SemRootTreap int64
	// SemTable is the link-time address of runtime.semtable (0 in the
	// generated table: it is binary-specific).
	SemTable uint64

	// Offsets of the semaphores inside the sync types, to go from the
	// address a waiter sleeps on back to the object.
	MutexSema          int64 // sync.Mutex
	MutexState         int64
	RWMutexWriterSem   int64 // sync.RWMutex
	RWMutexReaderSem   int64
	RWMutexReaderCount int64
	RWMutexReaderWait  int64
	WaitGroupSema      int64 // sync.WaitGroup
	WaitGroupState     int64
	// CondNotify is the offset of sync.Cond.notify, the list its waiters
	// queue in, and CondChecker of its copyChecker, which holds its own
	// address once the Cond has been waited on (both Missing when the
	// binary has no sync.Cond); CondSize is the Cond's size.
	CondNotify, CondChecker, CondSize int64
	// NotifyList is runtime.notifyList (Size 0 if the binary has none).
	NotifyList NotifyListLayout

	// PollDesc is runtime.pollDesc (Size 0 if the binary has none): the
	// netpoller's record of a descriptor, with the goroutines waiting to
	// read (rg) and write (wg) on it.
	PollDesc PollDescLayout

	// TypeTFlag and TypeStr are the offsets of tflag and str (a name
	// offset from the module's types base) in a runtime type descriptor
	// (internal/abi.Type, runtime._type before Go 1.21): channel element
	// types are named through them.
	TypeTFlag, TypeStr int64
}

// PollDescLayout holds the offsets of runtime.pollDesc fields.
type PollDescLayout struct {
	Size, FD, RG, WG int64
}

// NotifyListLayout holds the offsets of runtime.notifyList fields: the
// tickets handed out (wait) and woken (notify), and the queue of waiters'
// sudogs, linked by sudog.next.
type NotifyListLayout struct {
	Size, Wait, Notify, Head, Tail int64
}

// SudogLayout holds the offsets of runtime.sudog fields.
type SudogLayout struct {
	Size                             int64
	G, Next, Prev, Elem, WaitLink, C int64
	Ticket                           int64
}

// ChanLayout holds the offsets of runtime.hchan fields (a waitq is
// {first, last *sudog}).
type ChanLayout struct {
	Size                     int64
	QCount, DataQSiz, Closed int64
	ElemType, RecvQ, SendQ   int64
}

// waitLayoutFromDWARF fills the wait layout; what is missing leaves it
// unknown with the reason, without failing the rest of the layout.
func waitLayoutFromDWARF(d *Debug, g *dwarf.StructType) WaitLayout {
	w, err := waitLayout(d, g)
	if err != nil {
		return WaitLayout{Reason: err.Error()}
	}
	w.Known = true
	return w
}

type fieldSpec struct {
	dst      *int64
	path     []string
	size     int64
	optional bool
}

func readFields(st *dwarf.StructType, what string, fields []fieldSpec) error {
	for _, f := range fields {
		off, ft, err := FieldOffset(st, f.path...)
		switch {
		case err != nil && f.optional:
			off = Missing
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case f.size != 0 && ft.Size() != f.size:
			return fmt.Errorf("%s.%s is %d bytes, gi reads %d", what, strings.Join(f.path, "."), ft.Size(), f.size)
		}
		*f.dst = off
	}
	return nil
}

// traceablePointer returns the offset of a sudog pointer field: a plain
// pointer, or (Go 1.26+) a maybeTraceablePtr whose uintptr vu holds the
// address while vp may have been cleared to hide it from the GC.
func traceablePointer(sg *dwarf.StructType, name string) (int64, error) {
	off, ft, err := FieldOffset(sg, name)
	if err != nil {
		return 0, fmt.Errorf("runtime.sudog: %w", err)
	}
	if ft.Size() == 8 {
		return off, nil
	}
	for _, path := range [][]string{{name, "vu"}, {name, "maybeTraceablePtr", "vu"}} {
		if o, ft, err := FieldOffset(sg, path...); err == nil && ft.Size() == 8 {
			return o, nil
		}
	}
	return 0, fmt.Errorf("runtime.sudog.%s is %d bytes and has no vu address", name, ft.Size())
}

func waitLayout(d *Debug, g *dwarf.StructType) (WaitLayout, error) {
	var w WaitLayout
	if err := readFields(g, "runtime.g", []fieldSpec{
		{&w.GWaiting, []string{"waiting"}, 8, false},
		{&w.GTimer, []string{"timer"}, 8, false},
		{&w.GSleepWhen, []string{"sleepWhen"}, 8, true},
	}); err != nil {
		return w, err
	}
	timer, err := d.Struct("runtime.timer")
	if err != nil {
		return w, err
	}
	when := "when"
	if w.GSleepWhen == Missing {
		when = "nextwhen"
	}
	if err := readFields(timer, "runtime.timer", []fieldSpec{{&w.TimerWhen, []string{when}, 8, false}}); err != nil {
		return w, err
	}

	sg, err := d.Struct("runtime.sudog")
	if err != nil {
		return w, err
	}
	s := &w.Sudog
	s.Size = sg.ByteSize
	if err := readFields(sg, "runtime.sudog", []fieldSpec{
		{&s.G, []string{"g"}, 8, false}, {&s.Next, []string{"next"}, 8, false}, {&s.Prev, []string{"prev"}, 8, false},
		{&s.WaitLink, []string{"waitlink"}, 8, false}, {&s.Ticket, []string{"ticket"}, 4, false},
	}); err != nil {
		return w, err
	}
	if s.Elem, err = traceablePointer(sg, "elem"); err != nil {
		return w, err
	}
	if s.C, err = traceablePointer(sg, "c"); err != nil {
		return w, err
	}

	hc, err := d.Struct("runtime.hchan")
	if err != nil {
		return w, err
	}
	c := &w.Chan
	c.Size = hc.ByteSize
	if err := readFields(hc, "runtime.hchan", []fieldSpec{
		{&c.QCount, []string{"qcount"}, 8, false}, {&c.DataQSiz, []string{"dataqsiz"}, 8, false},
		{&c.Closed, []string{"closed"}, 4, false},
		{&c.ElemType, []string{"elemtype"}, 8, false}, {&c.RecvQ, []string{"recvq", "first"}, 8, false},
		{&c.SendQ, []string{"sendq", "first"}, 8, false},
	}); err != nil {
		return w, err
	}

	st, err := d.Type("runtime.semTable")
	if err != nil {
		return w, err
	}
	at, ok := resolve(st).(*dwarf.ArrayType)
	if !ok || at.Count <= 0 {
		return w, fmt.Errorf("runtime.semTable is %v, want an array", st)
	}
	entry, ok := resolve(at.Type).(*dwarf.StructType)
	if !ok {
		return w, fmt.Errorf("runtime.semTable's element is %v, want a struct", at.Type)
	}
	w.SemTableLen, w.SemRootSize = at.Count, entry.ByteSize
	if err := readFields(entry, "runtime.semTable entry", []fieldSpec{{&w.SemRootTreap, []string{"root", "treap"}, 8, false}}); err != nil {
		return w, err
	}
	if w.SemTable, ok = d.Variable("runtime.semtable"); !ok {
		return w, fmt.Errorf("variable runtime.semtable not in DWARF")
	}

	typ, err := d.Struct("internal/abi.Type")
	if err != nil {
		if typ, err = d.Struct("runtime._type"); err != nil {
			return w, fmt.Errorf("runtime type descriptor: %w", err)
		}
	}
	if err := readFields(typ, typ.StructName, []fieldSpec{{&w.TypeTFlag, []string{"TFlag"}, 1, true}, {&w.TypeStr, []string{"Str"}, 4, true}}); err != nil {
		return w, err
	}
	if w.TypeStr == Missing { // Go 1.20 spells them in lower case
		if err := readFields(typ, typ.StructName, []fieldSpec{{&w.TypeTFlag, []string{"tflag"}, 1, false}, {&w.TypeStr, []string{"str"}, 4, false}}); err != nil {
			return w, err
		}
	}

	if pd, err := d.Struct("runtime.pollDesc"); err == nil {
		p := &w.PollDesc
		p.Size = pd.ByteSize
		if err := readFields(pd, "runtime.pollDesc", []fieldSpec{{&p.FD, []string{"fd"}, 8, false}, {&p.RG, []string{"rg"}, 8, false}, {&p.WG, []string{"wg"}, 8, false}}); err != nil {
			return w, err
		}
	}

	if nl, err := d.Struct("runtime.notifyList"); err == nil {
		n := &w.NotifyList
		n.Size = nl.ByteSize
		if err := readFields(nl, "runtime.notifyList", []fieldSpec{{&n.Wait, []string{"wait"}, 4, false}, {&n.Notify, []string{"notify"}, 4, false},
			{&n.Head, []string{"head"}, 8, false}, {&n.Tail, []string{"tail"}, 8, false}}); err != nil {
			return w, err
		}
	}

	// The sync types: a program that does not use one has no waiter on it
	// either, so a missing type leaves its offsets Missing.
	for _, s := range []struct {
		name   string
		fields []fieldSpec
	}{
		{"sync.RWMutex", []fieldSpec{{&w.RWMutexWriterSem, []string{"writerSem"}, 4, false}, {&w.RWMutexReaderSem, []string{"readerSem"}, 4, false},
			{&w.RWMutexReaderCount, []string{"readerCount"}, 4, false}, {&w.RWMutexReaderWait, []string{"readerWait"}, 4, false}}},
		{"sync.WaitGroup", []fieldSpec{{&w.WaitGroupState, []string{"state"}, 8, false}, {&w.WaitGroupSema, []string{"sema"}, 4, false}}},
		{"sync.Cond", []fieldSpec{{&w.CondNotify, []string{"notify"}, 0, false}, {&w.CondChecker, []string{"checker"}, 8, false}}},
	} {
		st, err := d.Struct(s.name)
		if err != nil {
			for _, f := range s.fields {
				*f.dst = Missing
			}
			continue
		}
		if err := readFields(st, s.name, s.fields); err != nil {
			return w, err
		}
		if s.name == "sync.Cond" {
			w.CondSize = st.ByteSize
		}
	}
	w.MutexState, w.MutexSema = Missing, Missing
	if mu, err := d.Struct("sync.Mutex"); err == nil {
		if err := readFields(mu, "sync.Mutex", []fieldSpec{{&w.MutexState, []string{"state"}, 4, true}, {&w.MutexSema, []string{"sema"}, 4, true}}); err != nil {
			return w, err
		}
		if w.MutexSema == Missing {
			// Go 1.24+: sync.Mutex wraps internal/sync.Mutex in field mu.
			base, _, err := FieldOffset(mu, "mu")
			if err != nil {
				return w, fmt.Errorf("sync.Mutex has neither sema nor mu: %w", err)
			}
			inner, err := d.Struct("internal/sync.Mutex")
			if err != nil {
				return w, err
			}
			if err := readFields(inner, "internal/sync.Mutex", []fieldSpec{{&w.MutexState, []string{"state"}, 4, false}, {&w.MutexSema, []string{"sema"}, 4, false}}); err != nil {
				return w, err
			}
			w.MutexState += base
			w.MutexSema += base
		}
	}
	return w, nil
}

// SyncObject tells which sync object a goroutine sleeping on semaphore
// sema waits for, from the functions of its stack, innermost first: its
// kind (mutex, rwmutex, waitgroup, or sema when none is recognised), the
// goroutine's side (read or write on a RWMutex) and the object's address.
func (w *WaitLayout) SyncObject(functions []string, sema uint64) (kind, dir string, base uint64) {
	inMutex := false
	for _, f := range functions {
		switch f {
		case "sync.(*Mutex).Lock", "sync.(*Mutex).lockSlow", "internal/sync.(*Mutex).Lock", "internal/sync.(*Mutex).lockSlow":
			inMutex = true
		case "sync.(*RWMutex).RLock":
			if w.RWMutexReaderSem != Missing {
				return "rwmutex", "read", sema - uint64(w.RWMutexReaderSem)
			}
		case "sync.(*RWMutex).Lock":
			if inMutex && w.MutexSema != Missing {
				// Waiting for another writer on the RWMutex's inner
				// Mutex, its first field.
				return "rwmutex", "write", sema - uint64(w.MutexSema)
			}
			if w.RWMutexWriterSem != Missing {
				return "rwmutex", "write", sema - uint64(w.RWMutexWriterSem)
			}
		case "sync.(*WaitGroup).Wait":
			if w.WaitGroupSema != Missing {
				return "waitgroup", "", sema - uint64(w.WaitGroupSema)
			}
		default:
			if inMutex && !strings.HasPrefix(f, "sync.") && !strings.HasPrefix(f, "internal/sync.") && !strings.HasPrefix(f, "runtime.") {
				return "mutex", "", sema - uint64(w.MutexSema)
			}
		}
	}
	if inMutex && w.MutexSema != Missing {
		return "mutex", "", sema - uint64(w.MutexSema)
	}
	return "sema", "", sema
}
