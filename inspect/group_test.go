package inspect_test

import (
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
)

// TestGroupWaitingOn folds what goroutines wait on into one row's cell:
// sleepers share their sleep (with the soonest wake-up) though each one's
// own text differs; select waiters on the same channels share both;
// goroutines on different objects, or some on none, say how many.
func TestGroupWaitingOn(t *testing.T) {
	sleep := func(in time.Duration) *inspect.Goroutine {
		return &inspect.Goroutine{WaitingOn: []inspect.WaitObject{{Kind: "timer", WakeIn: int64(in)}}}
	}
	chans := func(addrs ...uint64) *inspect.Goroutine {
		g := &inspect.Goroutine{}
		for _, a := range addrs {
			g.WaitingOn = append(g.WaitingOn, inspect.WaitObject{Kind: "chan", Addr: a, Dir: "recv", Chan: &inspect.ChanState{Receivers: 2}})
		}
		return g
	}
	for _, c := range []struct {
		name   string
		gs     []*inspect.Goroutine
		text   string
		shared bool
	}{
		{"sleepers", []*inspect.Goroutine{sleep(3 * time.Second), sleep(time.Second), sleep(2 * time.Second)}, "sleep, wakes in 1.0s", true},
		{"one channel", []*inspect.Goroutine{chans(0xc000010000), chans(0xc000010000)}, "chan 0xc000010000 (unbuffered, 2 receivers, 0 senders)", true},
		{"a select on two", []*inspect.Goroutine{chans(0xc000010000, 0xc000020000), chans(0xc000010000, 0xc000020000)},
			"chan 0xc000010000 (unbuffered, 2 receivers, 0 senders); chan 0xc000020000 (unbuffered, 2 receivers, 0 senders)", true},
		{"two channels", []*inspect.Goroutine{chans(0xc000010000), chans(0xc000020000), chans(0xc000010000)}, "2 objects", false},
		{"some on nothing", []*inspect.Goroutine{chans(0xc000010000), {}}, "1 object", false},
		{"nothing", []*inspect.Goroutine{{}, {}}, "", true},
	} {
		text, shared := inspect.GroupWaitingOn(c.gs)
		if text != c.text || shared != c.shared {
			t.Errorf("%s: %q, shared %v; want %q, %v", c.name, text, shared, c.text, c.shared)
		}
	}
}
