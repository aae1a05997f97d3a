package leak

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/proc"
)

// ErrMemoryLimit is the error of a frozen copy given up as the process's
// memory cgroup neared its limit while the copy was read.
var ErrMemoryLimit = errors.New("memory cgroup bound hit")

// ErrDied is the error of a capture during which the process, or the
// copy it made of itself, died: no verdict is given.
var ErrDied = errors.New("no verdict")

// guardInterval is how often a guard polls the memory cgroups' usage
// while the frozen copy lives: a process writing at 2 GB/s (a page
// copied per microsecond or so) grows 4 MB between two polls.
const guardInterval = 2 * time.Millisecond

// minCopyRoom is the least room Take wants for the frozen copy to grow
// in, however small the heap.
const minCopyRoom = 16 << 20

// memoryPlan is what the memory cgroups of a process, and gi's own, leave
// room for: the copy the process makes of itself grows in the process's
// cgroups (each page it writes while the copy lives is copied and
// charged there), gi's buffers in gi's.
type memoryPlan struct {
	cgroups []proc.MemoryCgroup // the process's, as read before the stop
	// stopAt is, for each of cgroups, the usage at which the copy is
	// given up (0: no limit there); budget the least room that leaves
	// the copy (NoMemoryLimit: none).
	stopAt []int64
	budget int64
	// noFreeze, when set, says why the process is not frozen: too little
	// room for the copy. noRoom, when set, is why nothing is copied at
	// all: gi's own copy would not fit under a limit it shares.
	noFreeze string
	noRoom   error
}

// mib formats n bytes in MiB.
func mib(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }

// anonResident returns the private memory process pid has in RAM
// (RssAnon), 0 if unknown.
func anonResident(pid int) int64 {
	v, err := proc.StatusField(pid, 0, "RssAnon")
	if err != nil {
		return 0
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// planMemory reads the memory cgroups of process pid and gi's, and plans
// a capture of a heap of heapBytes: gi itself needs about twice that
// (the copy and the walk), charged to gi's cgroups, which count against
// a limit the process's cgroups share with them. The copy may grow by
// half of what is left below each limit; the process is not frozen with
// less room than its private memory in RAM (RssAnon: a process that
// rewrites it while gi reads the copy costs that much), the heap, or
// minCopyRoom. No memory controller plans nothing (no bound); cgroups
// that cannot be read plan no freeze.
func planMemory(pid int, heapBytes int64) *memoryPlan {
	cgs, err := proc.MemoryCgroups(pid)
	if err != nil {
		// A limit gi cannot read may be one the copy would cross: the
		// process is not frozen (gi in a container of its own cgroup
		// namespace, say, which does not show the process's).
		return &memoryPlan{budget: proc.NoMemoryLimit, noFreeze: fmt.Sprintf("its memory cgroup's limit could not be read (%v), and a frozen copy's pages would be charged there", err)}
	}
	if len(cgs) == 0 {
		return &memoryPlan{budget: proc.NoMemoryLimit}
	}
	mine := map[string]bool{}
	if self, err := proc.SelfMemoryCgroups(); err == nil {
		for _, c := range self {
			mine[c.Dir] = true
		}
	}
	giNeeds := 2*heapBytes + 64<<20
	p := &memoryPlan{cgroups: cgs, stopAt: make([]int64, len(cgs)), budget: proc.NoMemoryLimit}
	var tightest *proc.MemoryCgroup
	for i := range cgs {
		c := &cgs[i]
		if c.Limit == proc.NoMemoryLimit {
			continue
		}
		room := c.Room()
		shared := mine[c.Dir]
		if shared {
			if room < giNeeds && p.noRoom == nil {
				p.noRoom = fmt.Errorf("%w: memory cgroup %s, which gi is in too, has %s left below its limit of %s, and gi needs about %s to copy the heap: nothing copied, no walk made",
					ErrMemoryLimit, c.Path, mib(room), mib(c.Limit), mib(giNeeds))
			}
			room -= giNeeds
		}
		half := max(room/2, 0)
		p.stopAt[i] = c.Usage + half
		if shared {
			p.stopAt[i] += giNeeds
		}
		if p.budget == proc.NoMemoryLimit || half < p.budget {
			p.budget, tightest = half, c
		}
	}
	// At worst the process writes every private page it has while gi
	// reads the copy: each is then copied.
	worst := max(heapBytes, anonResident(pid), minCopyRoom)
	if tightest != nil && p.budget < worst {
		p.noFreeze = fmt.Sprintf("its memory cgroup %s has %s left below its limit of %s: too little for a copy of the process to grow in (each page it writes while gi reads the copy is copied and charged there)",
			tightest.Path, mib(tightest.Room()), mib(tightest.Limit))
	}
	return p
}

// limited reports whether any of the process's cgroups has a limit.
func (p *memoryPlan) limited() bool { return p.budget != proc.NoMemoryLimit }

// oomKills returns a sentence saying which of the process's cgroups
// counted OOM kills since the plan was made, "" if none did.
func (p *memoryPlan) oomKills() string {
	for _, c := range p.cgroups {
		if c.OOMKills < 0 {
			continue
		}
		now := c
		if err := now.Refresh(); err != nil || now.OOMKills <= c.OOMKills {
			continue
		}
		return fmt.Sprintf("its memory cgroup %s killed %d processes out of memory meanwhile (oom_kill %d, was %d)", c.Path, now.OOMKills-c.OOMKills, now.OOMKills, c.OOMKills)
	}
	return ""
}

// died returns the error of a capture during which process pid died, or
// (copyDied) its frozen copy, saying whether its memory cgroup killed
// it; nil if neither died.
func (p *memoryPlan) died(pid int, frozen, copyDied bool) error {
	what := ""
	switch {
	case !proc.Alive(pid) && frozen:
		what = fmt.Sprintf("process %d died while gi read the copy it made of itself", pid)
	case !proc.Alive(pid):
		what = fmt.Sprintf("process %d died while gi read it", pid)
	case copyDied:
		what = fmt.Sprintf("the copy process %d made of itself died while gi read it", pid)
	default:
		return nil
	}
	if oom := p.oomKills(); oom != "" {
		what += ": " + oom
	}
	return fmt.Errorf("%s: %w", what, ErrDied)
}

// guard polls the usage of the process's limited memory cgroups while
// its frozen copy lives, and past a cgroup's stopAt kills the copy (the
// pages the process wrote meanwhile are then its own again, the copy's
// old ones freed) and records why.
type guard struct {
	pid  int
	plan *memoryPlan
	stop chan struct{}
	done chan struct{}

	mu  sync.Mutex
	err error // set before the copy is killed
}

// startGuard starts polling for plan's process pid.
func startGuard(pid int, plan *memoryPlan) *guard {
	g := &guard{pid: pid, plan: plan, stop: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g
}

func (g *guard) run() {
	defer close(g.done)
	// A thread of its own, sleeping in the kernel between polls: the
	// goroutines reading the copy, busy on every P, do not delay it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		select {
		case <-g.stop:
			return
		default:
		}
		ts := unix.NsecToTimespec(int64(guardInterval))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
		for i := range g.plan.cgroups {
			c, at := &g.plan.cgroups[i], g.plan.stopAt[i]
			if at == 0 {
				continue
			}
			usage, err := c.ReadUsage()
			if err != nil || usage < at {
				continue
			}
			g.mu.Lock()
			g.err = fmt.Errorf("%w: while gi read the copy process %d made of itself, its memory cgroup %s reached %s of its limit of %s, past the %s gi let the copy cost it (half the room that was left): the copy was given up",
				ErrMemoryLimit, g.pid, c.Path, mib(usage), mib(c.Limit), mib(at))
			g.mu.Unlock()
			killCopies(g.pid)
			return
		}
	}
}

// end stops the polling, and returns why the copy was given up (and
// killed), nil if it was not.
func (g *guard) end() error {
	if g == nil {
		return nil
	}
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
	return g.tripped()
}

// tripped returns why the copy was given up (set before the guard kills
// it), nil if it was not.
func (g *guard) tripped() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// killCopies kills the children of process pid that a thread of gi
// traces — the frozen copy, the only child of the process gi traces —
// and reports whether it killed one. A traced child stays a zombie until
// gi collects it, so its pid names nothing else meanwhile.
func killCopies(pid int) bool {
	self := os.Getpid()
	killed := false
	for _, kid := range proc.Children(pid) {
		tracer := proc.TracerOf(kid, kid)
		if tracer == 0 {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(self) + "/task/" + strconv.Itoa(tracer)); err == nil {
			if syscall.Kill(kid, syscall.SIGKILL) == nil {
				killed = true
			}
		}
	}
	return killed
}
