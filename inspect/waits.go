package inspect

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/proc"
)

// WaitObject is one object a blocked goroutine waits on, as read in the
// stop. A select waits on several.
type WaitObject struct {
	// Kind is "chan", "mutex", "rwmutex", "waitgroup", "cond", "sema",
	// "timer" or "fd".
	Kind string
	// Addr is the object's address in the target (what %p prints); 0 for
	// a nil channel and a sleep's timer.
	Addr uint64
	// Name is the global variable holding the object ("main.slowMu",
	// "main.srv+16" for a field), "" for heap objects.
	Name string
	// Type is the object's Go type: "chan main.job", "*sync.Mutex".
	Type string
	// Dir is the goroutine's side: "send" or "recv" on a channel, "read"
	// or "write" on a RWMutex; "" when not known.
	Dir string
	// Chan is set for channels (not for a nil one).
	Chan *ChanState
	// Queued says the goroutine's sudog is in the channel's queue; not
	// while a goroutine that woke it is between taking it off the queue
	// and making it runnable, nor when the queue was not followed to it.
	Queued bool
	// Sync is set for sync objects; Sema is then the semaphore the
	// goroutine sleeps on (a word of the object: &m.sema, &wg.sema),
	// 0 if unknown.
	Sync *SyncState
	Sema uint64
	// FD is set for a descriptor (Addr is then its pollDesc, 0 for a
	// blocking system call).
	FD *proc.FD
	// Syscall names the system call a goroutine is blocked in on FD
	// ("read", "accept4"), "" for the netpoller's IO wait.
	Syscall string
	// WakeIn is, for a sleep, how long until the goroutine wakes up.
	WakeIn int64 // nanoseconds, may be negative when overdue
	// Unknown says what could not be learnt ("" when all is known).
	Unknown string
	// Unreachable is set by the leak walk (gi ps --leaks) for an object
	// no goroutine that can run reaches.
	Unreachable bool
}

// ChanState is a channel as the stop found it.
type ChanState struct {
	Len, Cap  uint64
	Closed    bool
	ElemType  string // "" if unknown (stripped)
	Receivers int    // goroutines queued to receive
	Senders   int    // goroutines queued to send
	// Incomplete is set when a queue could not be walked to its end.
	Incomplete bool
}

// SyncState is a sync object's state word(s) as the stop found them.
type SyncState struct {
	Locked   bool  // Mutex, or RWMutex write-locked / writer pending
	Starving bool  // Mutex
	Readers  int32 // RWMutex: readers holding it
	Counter  int32 // WaitGroup counter
	// Waiters is the number of goroutines the stop found sleeping on it.
	Waiters int
	// Holders are the goroutines that hold a Mutex or RWMutex by a
	// deferred unlock pending in one of their frames (holders.go); none
	// when it was taken without defer.
	Holders []Holder
	// Suspects, where no holder is known, are the goroutines whose code
	// suggests they hold a global mutex taken without defer: a frame
	// stopped between a Lock of it and an Unlock of it (holders.go). A
	// guess from the code, named as one.
	Suspects []Holder
}

// String says what the goroutine waits on in a table cell:
// "chan 0xc000123 (unbuffered, 3 receivers, 0 senders)",
// "mutex main.slowMu (locked, 4 waiters)", "sleep, wakes in 59m58s".
func (o WaitObject) String() string {
	head, details := o.Parts()
	if len(details) == 0 {
		return head
	}
	return head + " (" + strings.Join(details, ", ") + ")"
}

// Parts splits String: what the object is ("chan 0xc000123", "mutex
// main.slowMu", "sleep, wakes in 59m58s") and its state, the details
// String puts in parentheses ("locked", "4 waiters").
func (o WaitObject) Parts() (head string, details []string) {
	ref := o.Name
	if ref == "" && o.Addr != 0 {
		ref = fmt.Sprintf("%#x", o.Addr)
	}
	head = o.Kind
	if ref != "" {
		head += " " + ref
	}
	switch {
	case o.Unknown != "":
		details = append(details, "unknown: "+o.Unknown)
	case o.Kind == "chan" && o.Addr == 0:
		return "nil chan", []string{"blocks forever"}
	case o.Kind == "timer":
		return "sleep, wakes in " + formatDuration(o.WakeIn), nil
	case o.FD != nil && o.Syscall != "":
		return o.FD.String(), []string{"in " + o.Syscall}
	case o.FD != nil:
		return o.FD.String(), []string{o.Dir}
	case o.Chan != nil:
		c := o.Chan
		if c.Cap == 0 {
			details = append(details, "unbuffered")
		} else {
			details = append(details, fmt.Sprintf("%d/%d buffered", c.Len, c.Cap))
		}
		if c.Closed {
			details = append(details, "closed")
		}
		details = append(details, plural(c.Receivers, "receiver"), plural(c.Senders, "sender"))
	case o.Sync != nil:
		s := o.Sync
		switch o.Kind {
		case "mutex":
			if s.Locked && len(s.Holders) > 0 {
				details = append(details, "locked by "+holdersText(s.Holders))
			} else if s.Locked {
				// Locked without defer, by a goroutine gone, or in a
				// way gi does not read: never a guess, save one named
				// as such.
				details = append(details, "locked", "holder unknown")
				if len(s.Suspects) > 0 {
					details = append(details, "suspected "+holdersText(s.Suspects)+" (a Lock before where it is, an Unlock after, no defer)")
				}
			} else {
				details = append(details, "unlocked")
			}
			if s.Starving {
				details = append(details, "starving")
			}
		case "rwmutex":
			var writers, readers []Holder
			for _, h := range s.Holders {
				if h.Read {
					readers = append(readers, h)
				} else {
					writers = append(writers, h)
				}
			}
			switch {
			case s.Locked && len(writers) > 0:
				details = append(details, "write-locked by "+holdersText(writers))
			case s.Locked && len(readers) > 0:
				// Readers hold it: the negative reader count is a
				// writer waiting for them.
				details = append(details, "writer pending")
			case s.Locked:
				details = append(details, "write-locked", "holder unknown")
			}
			r := plural(int(s.Readers), "reader")
			if len(readers) > 0 {
				r += " (" + holdersText(readers) + ")"
			}
			details = append(details, r)
		case "waitgroup":
			details = append(details, fmt.Sprintf("counter %d", s.Counter))
		}
		details = append(details, plural(s.Waiters, "waiter"))
	}
	if o.Unreachable {
		details = append(details, "unreachable")
	}
	return head, details
}

// holdersText names the holders: "goroutine 29 at main.load
// demo/main.go:77", several joined by commas.
func holdersText(hs []Holder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func formatDuration(ns int64) string {
	d := time.Duration(ns)
	if d < 0 {
		return "0s (overdue " + FormatWait(-d) + ")"
	}
	return FormatWait(d)
}

// FormatWait renders a wait, or a time left to wait, compactly, as every
// column and cell of gi's tables does: 850ms, 12.3s, 4m05s, 2h03m.
func FormatWait(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// WaitingOnText joins what a goroutine waits on ("" for nothing known).
func (g *Goroutine) WaitingOnText() string {
	parts := make([]string, len(g.WaitingOn))
	for i, o := range g.WaitingOn {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}
