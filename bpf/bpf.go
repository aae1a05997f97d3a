package bpf

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/go-delve/delve/pkg/dwarf/regnum"
)

// Event is one probe hit as the programs write it to the ring buffer: the
// bpf2go-generated twin of struct event in gi.bpf.c.
type Event = giEvent

// EventSize is the size of an Event in the ring buffer.
const EventSize = int(unsafe.Sizeof(Event{}))

// Event kinds (Event.Kind).
const (
	KindEntry  = 1
	KindReturn = 2
	KindGoexit = 3
	// Scheduler events (Options.Why in package trace): a goroutine with a
	// traced call open parks, is made ready, runs, or is put back in a
	// run queue while still runnable.
	KindPark  = 4
	KindReady = 5
	KindRun   = 6
	KindYield = 7
	// It enters and leaves a system call (or cgo call).
	KindSyscall = 8
	KindSysret  = 9
	// What it is about to wait on: a semaphore's address, a descriptor.
	KindSema = 10
	KindPoll = 11
)

// SchedEvent is a scheduler event as gi_sched writes it: an Event, then
// up to SchedFrames return addresses (Event.ArgsLen bytes of them).
type SchedEvent = giSchedEvent

// SchedFrames is how many return addresses a scheduler event carries at
// most.
const SchedFrames = 12

// CookieTLS, set in a probe's cookie, makes the program read the g pointer
// from thread-local storage instead of the register Go's ABI keeps it in.
const CookieTLS = 1 << 32

// Specs are the programs, maps and load-time variables of gi.bpf.c before
// loading, as bpf2go generates them: set the variables and size the maps
// through them, so a name that no longer exists in the C fails to compile.
type Specs = giSpecs

// ProgCost is one program kind's runs and the nanoseconds spent in them,
// on one CPU: the value of the cost map.
type ProgCost = giProgCost

// Objects are the loaded programs, maps and variables (bpf2go's binding).
type Objects = giObjects

// LoadSpecs returns the collection built for the host architecture, not yet
// loaded, with its parts assigned to a Specs. It fails if struct event in
// the object and the Event type disagree.
func LoadSpecs() (*ebpf.CollectionSpec, *Specs, error) {
	spec, err := loadGi()
	if err != nil {
		return nil, nil, err
	}
	if err := CheckEventLayout(spec); err != nil {
		return nil, nil, err
	}
	var s Specs
	if err := spec.Assign(&s); err != nil {
		return nil, nil, fmt.Errorf("assign BPF specs: %w", err)
	}
	return spec, &s, nil
}

// Load loads spec (after the caller set its variables) into the generated
// objects: its maps and the programs named (every program of spec if none
// is). The verifier's time dominates (20 to 60 ms a program on 6.18), so a
// program without probes is better not loaded; it stays nil in the
// objects.
func Load(spec *ebpf.CollectionSpec, programs ...string) (*Objects, error) {
	return load(spec, nil, programs)
}

// LoadSharing loads the programs of spec named, as Load does, but on the
// maps of maps (loaded by Load from the same spec, the same sizes set)
// instead of new ones: programs loaded after others, sharing their
// state, so that those can run while the verifier checks these. The
// Objects returned hold those programs and their own references to the
// maps; closing either Objects leaves the other's working.
func LoadSharing(spec *ebpf.CollectionSpec, maps *Objects, programs ...string) (*Objects, error) {
	replace := map[string]*ebpf.Map{}
	v := reflect.ValueOf(&maps.giMaps).Elem()
	for i := range v.NumField() {
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil {
			replace[v.Type().Field(i).Tag.Get("ebpf")] = m
		}
	}
	return load(spec, replace, programs)
}

// load is Load, with the maps of replace instead of new ones by name.
func load(spec *ebpf.CollectionSpec, replace map[string]*ebpf.Map, programs []string) (*Objects, error) {
	spec = spec.Copy()
	if len(programs) > 0 {
		for name := range spec.Programs {
			if !slices.Contains(programs, name) {
				delete(spec.Programs, name)
			}
		}
		for _, name := range programs {
			if spec.Programs[name] == nil {
				return nil, fmt.Errorf("program %s not in the BPF object", name)
			}
		}
	}
	c, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: replace})
	if err != nil {
		return nil, err
	}
	o := &Objects{}
	assignTagged(&o.giPrograms, c.Programs)
	assignTagged(&o.giMaps, c.Maps)
	c.Close() // what was not assigned: the data sections' maps (the programs keep their own references)
	return o, nil
}

// MovePrograms moves the programs of src (loaded by LoadSharing on dst's
// maps) into dst's fields that have none, and closes src's references to
// the maps: dst then holds both loads' programs.
func MovePrograms(dst, src *Objects) {
	d, sp := reflect.ValueOf(&dst.giPrograms).Elem(), reflect.ValueOf(&src.giPrograms).Elem()
	for i := range sp.NumField() {
		if p, ok := sp.Field(i).Interface().(*ebpf.Program); ok && p != nil && d.Field(i).IsNil() {
			d.Field(i).Set(sp.Field(i))
			sp.Field(i).SetZero()
		}
	}
	src.Close() // what was not moved: src's maps, a program dst had
}

// assignTagged sets each field of the struct dst points to from byName,
// by its `ebpf` tag, and removes it from byName; a name byName lacks
// leaves its field nil. Variables are not assigned: gi sets them in the
// spec before loading.
func assignTagged[T any](dst any, byName map[string]T) {
	v := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("ebpf")
		if x, ok := byName[name]; ok {
			v.Field(i).Set(reflect.ValueOf(x))
			delete(byName, name)
		}
	}
}

// CheckEventLayout compares struct event in spec's BTF with the Event type,
// member by member (name, offset, size), and the total size.
func CheckEventLayout(spec *ebpf.CollectionSpec) error {
	var st *btf.Struct
	if err := spec.Types.TypeByName("event", &st); err != nil {
		return fmt.Errorf("struct event not in the BPF object's BTF: %w", err)
	}
	return checkEventStruct(st)
}

// checkEventStruct compares one BTF struct event with Event.
func checkEventStruct(st *btf.Struct) error {
	if int(st.Size) != EventSize {
		return fmt.Errorf("struct event is %d bytes in the BPF object, bpf.Event %d", st.Size, EventSize)
	}
	gt := reflect.TypeOf(Event{})
	var goFields []reflect.StructField
	for i := range gt.NumField() {
		if f := gt.Field(i); f.Name != "_" {
			goFields = append(goFields, f)
		}
	}
	if len(st.Members) != len(goFields) {
		return fmt.Errorf("struct event has %d members in the BPF object, bpf.Event %d fields", len(st.Members), len(goFields))
	}
	for i, m := range st.Members {
		f := goFields[i]
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return fmt.Errorf("struct event member %s: %w", m.Name, err)
		}
		if uint32(f.Offset) != m.Offset.Bytes() || int(f.Type.Size()) != size {
			return fmt.Errorf("struct event member %s at %d (%d bytes) in the BPF object, bpf.Event.%s at %d (%d bytes)",
				m.Name, m.Offset.Bytes(), size, f.Name, f.Offset, f.Type.Size())
		}
	}
	return nil
}

// DecodeEvent copies a ring-buffer record into ev (aligned, no allocation);
// false if the record is shorter than an Event.
func DecodeEvent(raw []byte, ev *Event) bool {
	if len(raw) < EventSize {
		return false
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(ev)), EventSize), raw)
	return true
}

// ArgPlan is what one probe captures of a function's arguments or
// results, and the --where conditions it checks on them in the kernel:
// the bpf2go-generated twin of struct arg_plan in gi.bpf.c.
type ArgPlan = giArgPlan

// Operation kinds of an ArgPlan (GI_OP_* in gi.bpf.c).
const (
	OpReg   = 1
	OpStack = 2
	OpDeref = 3
	OpFreg  = 4
)

// Comparisons of an ArgPlan's filters (GI_CMP_* in gi.bpf.c).
const (
	CmpEq        = 1
	CmpNe        = 2
	CmpLt        = 3
	CmpGt        = 4
	CmpStrEq     = 5
	CmpStrNe     = 6
	CmpStrPrefix = 7
)

// Bounds of an ArgPlan (GI_ARG_OPS, GI_ARG_FILTERS, GI_FILTER_STR,
// GI_ARG_BYTES, GI_DEREF_MAX in gi.bpf.c).
const (
	PlanOps        = len(ArgPlan{}.Ops)
	PlanFilters    = len(ArgPlan{}.Filters)
	FilterString   = len(ArgPlan{}.Filters[0].Str)
	PlanPayloadMax = 1024
	DerefMax       = 512
	// NoLength marks a deref without an element count (arg_op.len).
	NoLength = 0xffff
)

// ArgsEvent is an event with the values its probe captured: the
// generated twin of struct args_event, the record a probe with a plan
// reserves (Event, then Event.ArgsLen bytes of payload).
type ArgsEvent = giArgsEvent

// HeldCalls are the calls held for one thread while their float
// registers are read (the held map's value): the generated twin of struct
// held_calls.
type HeldCalls = giHeldCalls

// Indexes of the per-CPU counters of the lost map.
const (
	// LostEvents counts events the ring buffer had no room for.
	LostEvents = 0
	// LostFloatRegs counts calls reported without their float registers.
	LostFloatRegs = 1
	// SentSignals counts the signals sent to read float registers.
	SentSignals = 2
)

// FloatRegisters is how many float registers a plan may read (X0-X15 on
// amd64, V0-V15 on arm64: GI_FREGS in gi.bpf.c).
const FloatRegisters = 16

// CookiePlanShift is where a probe's cookie holds its plan's index plus
// one (0: no plan), in CookiePlanBits bits.
const (
	CookiePlanShift = 33
	CookiePlanBits  = 28
)

// CookieGen is a probe's generation: the probe reports only while its
// entry in the probe_gen map holds the same (0 or 1). gi replaces a
// uprobe_multi link by one of the other generation without a hit reported
// twice or lost.
const CookieGen = 1 << 61

// CookieSampled, set in a probe's cookie, marks a probe of a function
// traced in sampling windows: its calls are reported by the window's
// rules (SampleWindow), whole or not at all.
const CookieSampled = 1 << 63

// CookieStepped, set in a probe's cookie, says the kernel single-steps the
// probed instruction: the programs count the thread's hits by class
// (ThreadCost).
const CookieStepped = 1 << 62

// ThreadCost is the value of the thread_costs map: one thread's probe
// hits, by how the kernel runs the probed instruction, and the
// nanoseconds spent in programs.
type ThreadCost = giThreadCost

// Sampling window states (SampleWindow.State).
const (
	WindowOpen    = 0
	WindowClosing = 1
)

// SampleWindow is the value of the window map: the state of the
// sampling window and its number.
type SampleWindow = giSampleWindow

// Counters of the sampled_count map: sampled calls reported, and their
// returns reported.
const (
	SampledOpened   = 0
	SampledReturned = 1
)

// FloatRegisterIndex returns the number of the floating-point register
// with DWARF number reg of architecture arch (X0-X15 on amd64, V0-V15 on
// arm64), as the signal frame the probe programs read them from orders
// them; false for any other register.
func FloatRegisterIndex(arch string, reg uint64) (int, bool) {
	first := uint64(regnum.AMD64_XMM0)
	if arch == "arm64" {
		first = regnum.ARM64_V0
	} else if arch != "amd64" {
		return 0, false
	}
	if reg >= first && reg < first+FloatRegisters {
		return int(reg - first), true
	}
	return 0, false
}

// RegisterWord returns the index of DWARF register reg of architecture
// arch ("amd64", "arm64") among the words of the kernel's struct pt_regs,
// which the probe programs copy; false for a register uprobe programs do
// not get (floating-point and vector registers).
func RegisterWord(arch string, reg uint64) (int, bool) {
	switch arch {
	case "amd64":
		// DWARF: rax rdx rcx rbx rsi rdi rbp rsp r8..r15; pt_regs: r15 r14
		// r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss.
		words := []int{10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0}
		if reg < uint64(len(words)) {
			return words[reg], true
		}
	case "arm64":
		// DWARF x0..x30 and sp are pt_regs' regs[0..30] and sp.
		if reg <= 31 {
			return int(reg), true
		}
	}
	return 0, false
}
