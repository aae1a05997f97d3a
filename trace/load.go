package trace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/runtimelayout"
)

// speculativePlans bounds the argument capture plans the plan table is
// made for before the arguments are planned (712 bytes each in the
// kernel): distinct plans are few (446 for caddy's 3,628 functions).
var speculativePlans = 2048

// loadSetup is what loading the BPF objects needs, all known once the
// functions are selected.
type loadSetup struct {
	layout   *runtimelayout.RuntimeLayout
	programs []string // those with probes
	plans    int      // the plan table's size
	probes   int      // at least the number of probes
	gTLS     int64    // Binary.GTLSOffset
	// signal, when set, is where gi_signal goes: plans read float
	// registers.
	signal *signalProbe
	// maps, when set, are the maps to load the programs on (loaded
	// with the counting program first: Session.countWhileLoading)
	// instead of new ones.
	maps *bpf.Objects
}

// loaded is the outcome of loadObjects.
type loaded struct {
	objs    *bpf.Objects
	multi   bool // uprobe_multi links
	byIP    bool // probes find their cookie by address
	missing []KernelFeature
	err     error
}

// entryIsReturn reports whether fn's entry probe site is also one of its
// RETs (a leaf with no frame: "return p"): one probe reports both.
func (s *Session) entryIsReturn(fn *Function) bool {
	return !s.Opts.entryOnly && slices.Contains(fn.Returns, fn.EntrySite)
}

// planProbes gives each probe of the table its capture plan, function by
// function in the table's order, once planArgs has described the
// functions' arguments.
func (s *Session) planProbes() error {
	arch := binaryArch(s.Binary)
	planIndex := func(fn *Function, kind uint8) (int, error) {
		plan, ok, err := planOf(fn, kind, arch)
		if !ok || err != nil {
			return 0, err
		}
		return s.plans.add(plan) + 1, nil
	}
	var returnPlan int
	for i := range s.probes {
		p := &s.probes[i]
		switch p.kind {
		case bpf.KindEntry: // a function's first probe
			var err error
			if s.entryIsReturn(p.fn) {
				pe, pr, ok, err := planPair(p.fn, arch)
				if err != nil {
					return err
				}
				if ok {
					p.plan = s.plans.addPair(pe, pr) + 1
				}
			} else if p.plan, err = planIndex(p.fn, bpf.KindEntry); err != nil {
				return err
			}
			if returnPlan, err = planIndex(p.fn, bpf.KindReturn); err != nil {
				return err
			}
		case bpf.KindReturn:
			p.plan = returnPlan
		}
	}
	return nil
}

// planBound bounds the capture plans planArgs can make for sel: three for a
// function whose entry is a RET (the pair and the return's), two for any
// other, counting only the functions planArgs captures for.
func (s *Session) planBound(sel *Selection) int {
	n := len(s.Opts.Where)
	if s.Opts.Args && len(sel.Functions) <= maxArgFunctions {
		n = len(sel.Functions)
	}
	return max(1, 3*n)
}

// loadObjects loads the BPF programs and maps for setup. It runs beside
// planArgs: it reads the session's options only.
func (s *Session) loadObjects(setup loadSetup) (l loaded) {
	spec, specs, err := bpf.LoadSpecs()
	if err != nil {
		l.err = fmt.Errorf("load BPF spec: %w", err)
		return l
	}
	layout := setup.layout
	parentOff := uint64(0)
	if layout.G.ParentGoid != runtimelayout.Missing {
		parentOff = uint64(layout.G.ParentGoid)
	}
	// Events carry pids as gi's own PID namespace numbers them, so that
	// inside a container (kubectl debug --target, a sidecar) they match the
	// pid gi was given.
	var ns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &ns); err != nil {
		l.err = fmt.Errorf("gi's PID namespace: %w", err)
		return l
	}
	// --why reads the first sudog's channel, and the descriptor of a
	// network poller's wait, where the layout has them.
	waiting, pollFD := uint64(0), uint64(0)
	if layout.Wait.Known {
		waiting = present(layout.Wait.GWaiting)
		if layout.Wait.PollDesc.Size > 0 {
			pollFD = present(layout.Wait.PollDesc.FD)
		}
	}
	for _, v := range []struct {
		spec  *ebpf.VariableSpec
		value any
	}{
		{specs.GopcOffset, uint64(layout.G.GoPC)},
		{specs.ParentGoidOffset, parentOff},
		{specs.GoidOffset, uint64(layout.G.Goid)},
		{specs.StackHiOffset, uint64(layout.G.StackHi)},
		{specs.FilterGoids, boolByte(len(s.Opts.Goids) > 0)},
		{specs.G_tlsOffset, setup.gTLS},
		{specs.PidnsDev, uint64(ns.Dev)},
		{specs.PidnsIno, ns.Ino},
		{specs.Why, boolByte(s.Opts.Why)},
		{specs.G_mOffset, present(layout.G.M)},
		{specs.M_curgOffset, present(layout.M.CurG)},
		{specs.G_waitreasonOffset, present(layout.G.WaitReason)},
		{specs.G_schedBpOffset, present(layout.G.SchedBP)},
		{specs.G_waitingOffset, waiting},
		{specs.SudogC_offset, present(layout.Wait.Sudog.C)},
		{specs.PolldescFdOffset, pollFD},
	} {
		if err := v.spec.Set(v.value); err != nil {
			l.err = fmt.Errorf("set %s: %w", v.spec.Name, err)
			return l
		}
	}
	specs.Events.MaxEntries = uint32(s.Opts.RingBytes)
	specs.Plans.MaxEntries = uint32(max(1, setup.plans))
	// A counter per probe and CPU: a growable session counts at most
	// growableHits probes added later (a probe beyond is not counted).
	specs.Hits.MaxEntries = uint32(max(1, setup.probes))
	if s.Opts.Growable {
		specs.Hits.MaxEntries += growableHits
	}
	// A generation per probe whose hits are counted: those gi may move
	// between links (Session.demote).
	specs.ProbeGen.MaxEntries = specs.Hits.MaxEntries
	l.multi = !s.Opts.PerfEvents
	if l.multi {
		if err := features.HaveBPFLinkUprobeMulti(); err != nil {
			l.multi = false
			l.missing = append(l.missing, UprobeMulti)
		}
	}
	if !l.multi {
		for _, p := range spec.Programs {
			p.AttachType = ebpf.AttachNone
		}
	}
	l.byIP = s.Opts.CookieByIP
	if !l.byIP && !haveAttachCookies() {
		l.byIP = true
		l.missing = append(l.missing, AttachCookies)
	}
	if l.byIP {
		specs.Cookies.MaxEntries = uint32(setup.probes)
		if s.Opts.Growable {
			specs.Cookies.MaxEntries += growableProbes
		}
		if err := specs.CookieByIp.Set(uint8(1)); err != nil {
			l.err = fmt.Errorf("set %s: %w", specs.CookieByIp.Name, err)
			return l
		}
	}
	if setup.signal != nil {
		if err := specs.FloatRegs.Set(uint8(1)); err != nil {
			l.err = fmt.Errorf("set %s: %w", specs.FloatRegs.Name, err)
			return l
		}
		if err := specs.SignalCtxWord.Set(uint32(setup.signal.ctxWord)); err != nil {
			l.err = fmt.Errorf("set %s: %w", specs.SignalCtxWord.Name, err)
			return l
		}
		// A thread holds calls from its probe to its signal, microseconds:
		// a few per CPU at once.
		specs.Held.MaxEntries = uint32(max(256, 16*runtime.NumCPU()))
	}
	load := bpf.Load
	if setup.maps != nil {
		load = func(spec *ebpf.CollectionSpec, programs ...string) (*bpf.Objects, error) {
			return bpf.LoadSharing(spec, setup.maps, programs...)
		}
	}
	if l.objs, err = load(spec, setup.programs...); err != nil {
		if errors.Is(err, os.ErrPermission) {
			l.err = s.permissionError(err)
		} else {
			l.err = fmt.Errorf("load BPF programs: %w", err)
		}
	}
	return l
}

// present is a field offset for the programs, 0 (not read) where the
// layout lacks the field.
func present(off int64) uint64 {
	if off < 0 { // runtimelayout.Missing
		return 0
	}
	return uint64(off)
}
