package trace

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/proc"
)

// Clock maps CLOCK_MONOTONIC nanoseconds to wall-clock time.
type Clock struct {
	wallAtZero time.Time
}

// NewClock captures the offset between CLOCK_MONOTONIC and wall time now.
//
// The wall clock is read between two reads of the monotonic one, a few
// times: the pair whose reads lie closest together gives the offset, so
// that gi being descheduled between two reads does not shift every time
// it prints.
func NewClock() Clock {
	var best Clock
	gap := int64(-1)
	for range 5 {
		before := monotonicNow()
		wall := time.Now()
		after := monotonicNow()
		if d := after - before; gap < 0 || d < gap {
			gap = d
			best = Clock{wallAtZero: wall.Add(-time.Duration(before + d/2))}
		}
	}
	return best
}

// Wall converts a monotonic timestamp.
func (c Clock) Wall(mono uint64) time.Time {
	return c.wallAtZero.Add(time.Duration(mono))
}

// MonotonicNow returns the host's CLOCK_MONOTONIC in nanoseconds, the
// clock of event timestamps (bpf_ktime_get_ns), even when gi runs in a
// time namespace of its own.
func MonotonicNow() int64 { return monotonicNow() }

// selfClockOffset is gi's own time-namespace offset, read once.
var selfClockOffset = sync.OnceValue(func() int64 {
	off, _ := proc.MonotonicOffset(0)
	return int64(off)
})

// monotonicNow returns the host's CLOCK_MONOTONIC, the clock
// bpf_ktime_get_ns reads: gi's own clock minus its namespace's offset.
func monotonicNow() int64 {
	// The offset first: the first call reads it from /proc, and the clock
	// must be read after that, not before.
	off := selfClockOffset()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() - off
}
