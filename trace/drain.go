package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/gi-debug/gi/bpf"
)

// Event is one decoded probe hit.
type Event struct {
	Kind    uint8
	Time    uint64 // CLOCK_MONOTONIC ns
	Goid    uint64
	G       uint64
	SP      uint64
	StackHi uint64
	Caller  uint64
	// GoPC and Parent (entry events only) say who created the goroutine.
	GoPC, Parent uint64
	PID, TID     uint32
	// Func is the traced function (nil for goroutine exits); Site the
	// link-time address of the probe.
	Func *Function
	Site uint64
	// Values are the bytes the probe captured of the arguments (entry) or
	// results (return), read with Func.Args or Func.Results; valid only
	// during the callback.
	Values []byte
	// Scheduler events (Options.Why): a park's wait reason and channel
	// (0 if none), a sema's address, a poll's descriptor (in Object); a
	// ready's waker goroutine (0 if none); the return addresses of the
	// parked goroutine or of the waker, innermost first (runtime
	// addresses; valid only during the callback).
	Reason string
	Object uint64
	Waker  uint64
	PCs    []uint64
}

// Drain reads every event in the ring buffer now and passes each to fn.
// It never blocks: the programs submit without wakeups. Calls held for
// their float registers longer than heldTimeout are passed too, without
// them.
func (s *Session) Drain(fn func(*Event)) error {
	return s.drain(fn, heldTimeout)
}

// DrainAll is Drain at the end of a run: every held call is passed.
func (s *Session) DrainAll(fn func(*Event)) error {
	return s.drain(fn, 0)
}

// heldTimeout is how long a call may wait for its thread's signal before
// gi reports it without its float registers: the signal comes within
// microseconds unless the thread blocks SIGURG.
const heldTimeout = time.Second

func (s *Session) drain(fn func(*Event), timeout time.Duration) error {
	return s.drainFor(fn, timeout, 0)
}

// drainFor is drain, stopping after limit (if set) with events left: a
// flood the programs write as fast as gi reads does not hold the caller.
func (s *Session) drainFor(fn func(*Event), timeout, limit time.Duration) error {
	s.rd.SetDeadline(time.Now().Add(-time.Second))
	start := time.Now()
	for n := 1; ; n++ {
		if limit > 0 && n%256 == 0 && time.Since(start) > limit {
			break
		}
		err := s.rd.ReadInto(&s.rec)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return fmt.Errorf("read ring buffer: %w", err)
		}
		s.deliver(s.rec.RawSample, fn)
	}
	if s.floatRegs && s.objs != nil && s.objs.Held != nil {
		return s.releaseHeld(fn, timeout)
	}
	return nil
}

// deliver decodes one record (an Event, then its payload) and passes it
// to fn.
func (s *Session) deliver(raw []byte, fn func(*Event)) {
	if !bpf.DecodeEvent(raw, &s.raw) {
		return
	}
	s.Events++
	r := &s.raw
	ev := Event{Time: r.Ts, Goid: r.Goid, G: r.G, SP: r.Sp, StackHi: r.StackHi, Caller: r.Caller,
		GoPC: r.Gopc, Parent: r.Parent, PID: r.Pid, TID: r.Tid, Kind: r.Kind}
	cookie := r.Cookie
	if int(cookie) >= len(s.probes) {
		return
	}
	p := s.probes[cookie]
	ev.Func, ev.Site = p.fn, p.site
	n := int(r.ArgsLen)
	if n > 0 && bpf.EventSize+n <= len(raw) {
		ev.Values = raw[bpf.EventSize : bpf.EventSize+n]
	}
	if p.sched != 0 {
		ev.Kind = p.sched
		switch p.sched {
		case bpf.KindPark, bpf.KindSema, bpf.KindPoll:
			ev.Object = r.Gopc
			if p.sched == bpf.KindPark {
				ev.Reason = s.waitReason(r.Parent)
			}
		case bpf.KindReady:
			ev.Waker = r.Caller
		}
		s.pcs = s.pcs[:0]
		for i := 0; i+8 <= len(ev.Values) && i < 8*bpf.SchedFrames; i += 8 {
			s.pcs = append(s.pcs, binary.LittleEndian.Uint64(ev.Values[i:]))
		}
		ev.PCs, ev.Values = s.pcs, nil
	}
	fn(&ev)
}

// releaseHeld passes to fn the calls held for their threads' signals
// longer than timeout, without their float registers, oldest thread
// first.
func (s *Session) releaseHeld(fn func(*Event), timeout time.Duration) error {
	now := uint64(monotonicNow())
	var (
		tid  uint32
		h    bpf.HeldCalls
		late []bpf.HeldCalls
	)
	it := s.objs.Held.Iterate()
	for it.Next(&tid, &h) {
		if h.N == 0 || h.N > 2 || h.Rec[0].Ev.Ts+uint64(timeout) > now {
			continue
		}
		// A call the signal releases meanwhile is gone from the map.
		if err := s.objs.Held.Delete(tid); err == nil {
			late = append(late, h)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("held calls: %w", err)
	}
	sort.Slice(late, func(i, j int) bool { return late[i].Rec[0].Ev.Ts < late[j].Rec[0].Ev.Ts })
	for i := range late {
		for j := range late[i].N {
			rec := &late[i].Rec[j]
			raw := unsafe.Slice((*byte)(unsafe.Pointer(rec)), unsafe.Sizeof(*rec))
			s.unreadFloats++
			s.deliver(raw, fn)
		}
	}
	return nil
}

// Lost returns the events the programs could not write, summed over CPUs.
func (s *Session) Lost() uint64 {
	return s.lostCount(bpf.LostEvents)
}

// UnreadFloats returns the calls reported without the float registers
// their plans read (their values show as ?): the signal that reads them
// did not come, or came elsewhere than right after the probe.
func (s *Session) UnreadFloats() uint64 {
	return s.lostCount(bpf.LostFloatRegs) + s.unreadFloats
}

// lostCount sums the programs' per-CPU counter what of the lost map.
func (s *Session) lostCount(what uint32) uint64 {
	if s.objs == nil {
		return 0
	}
	n, _ := sumPerCPU(s.objs.Lost, what)
	return n
}

// sumPerCPU returns the value at key of m, a per-CPU array of counters,
// summed over CPUs.
func sumPerCPU(m *ebpf.Map, key uint32) (uint64, error) {
	var perCPU []uint64
	if err := m.Lookup(key, &perCPU); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}
