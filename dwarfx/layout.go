package dwarfx

import (
	"debug/dwarf"
	"fmt"
	"sort"
	"strings"
)

// Missing marks a field offset that the target's Go version does not have.
const Missing = -1

// GLayout holds the offsets in runtime.g that gi reads. A field the binary's
// Go version lacks is Missing.
type GLayout struct {
	Size         int64
	StackLo      int64
	StackHi      int64
	SchedSP      int64
	SchedPC      int64
	SchedBP      int64
	SchedLR      int64
	SyscallSP    int64
	SyscallPC    int64
	SyscallBP    int64
	M            int64
	AtomicStatus int64
	Goid         int64
	WaitSince    int64
	WaitReason   int64
	LockedM      int64
	ParentGoid   int64
	GoPC         int64
	StartPC      int64
	Labels       int64
}

// MLayout holds the offsets in runtime.m that gi reads.
type MLayout struct {
	Size   int64
	ID     int64
	ProcID int64
	CurG   int64
}

// ModuleLayout holds the offsets in runtime.moduledata that the pclntab
// decoder reads in stripped binaries: where function entries are counted
// from, where funcdata (inline trees) lives, and the end of the pclntab,
// which validates the other two.
type ModuleLayout struct {
	Text     int64 // moduledata.text
	GoFunc   int64 // moduledata.gofunc: the address of go:func.*
	EPclntab int64 // moduledata.epclntab (Go 1.24+), or Missing
}

// LabelsKind tells how g.labels is represented in a Go release.
type LabelsKind int

const (
	// LabelsUnknown means the representation could not be determined.
	LabelsUnknown LabelsKind = iota
	// LabelsMap is Go ≤1.23: g.labels points to a map[string]string variable.
	LabelsMap
	// LabelsList is Go ≥1.24: g.labels points to a struct whose first word
	// is a slice of {key, value string}.
	LabelsList
)

// HmapLayout describes the classic (pre-swiss) Go map header and the bucket
// of map[string]string, used to read pprof labels on Go ≤1.23.
type HmapLayout struct {
	Count, B, Buckets, OldBuckets int64
	BucketSize                    int64
	TopHash                       int64
	Keys, Elems                   int64
	Overflow                      int64
}

// RuntimeLayout is everything gi needs to know about one binary's runtime
// internals: struct offsets, status constants and variable addresses
// (link-time; add the load bias for PIE).
type RuntimeLayout struct {
	PtrSize int64
	G       GLayout
	M       MLayout
	Module  ModuleLayout
	// Status maps runtime status names ("_Grunning", ...) to their values.
	Status map[string]uint32
	// ScanBit is the value of runtime._Gscan.
	ScanBit uint32

	AllGs             uint64 // address of runtime.allgs (a slice header)
	AllGLen           uint64 // address of runtime.allglen
	WaitReasonStrings uint64 // address of runtime.waitReasonStrings ([N]string)
	WaitReasonCount   int64
	GStatusStrings    uint64 // address of runtime.gStatusStrings ([N]string), 0 if absent
	GStatusCount      int64
	// TracebackLabels is the address of runtime.debug.tracebacklabels (Go
	// 1.26+, an int32: 1 when tracebacks print pprof labels), 0 if absent.
	TracebackLabels uint64

	Labels LabelsKind
	Hmap   HmapLayout
}

// StatusValue returns the value of status name (without the package, e.g. "_Gwaiting").
func (l *RuntimeLayout) StatusValue(name string) (uint32, bool) {
	v, ok := l.Status[name]
	return v, ok
}

// StatusName returns the runtime constant name of status value v ("_Gwaiting"), or "".
func (l *RuntimeLayout) StatusName(v uint32) string {
	names := make([]string, 0, len(l.Status))
	for n := range l.Status {
		names = append(names, n)
	}
	sort.Strings(names) // deterministic when two names share a value
	for _, n := range names {
		if l.Status[n] == v {
			return n
		}
	}
	return ""
}

// LayoutFromDWARF derives the runtime layout from the binary's DWARF.
func LayoutFromDWARF(d *Debug) (*RuntimeLayout, error) {
	l := &RuntimeLayout{PtrSize: 8, Status: make(map[string]uint32)}
	g, err := d.Struct("runtime.g")
	if err != nil {
		return nil, fmt.Errorf("runtime.g layout: %w", err)
	}
	l.G.Size = g.ByteSize
	// Each field with the size gi reads it as: a release that widens one
	// fails here, by name, instead of being decoded wrong.
	fields := []struct {
		dst      *int64
		path     []string
		size     int64
		optional bool
	}{
		{&l.G.StackLo, []string{"stack", "lo"}, 8, false},
		{&l.G.StackHi, []string{"stack", "hi"}, 8, false},
		{&l.G.SchedSP, []string{"sched", "sp"}, 8, false},
		{&l.G.SchedPC, []string{"sched", "pc"}, 8, false},
		{&l.G.SchedBP, []string{"sched", "bp"}, 8, true},
		{&l.G.SchedLR, []string{"sched", "lr"}, 8, true},
		{&l.G.SyscallSP, []string{"syscallsp"}, 8, false},
		{&l.G.SyscallPC, []string{"syscallpc"}, 8, false},
		{&l.G.SyscallBP, []string{"syscallbp"}, 8, true},
		{&l.G.M, []string{"m"}, 8, false},
		{&l.G.AtomicStatus, []string{"atomicstatus"}, 4, false},
		{&l.G.Goid, []string{"goid"}, 8, false},
		{&l.G.WaitSince, []string{"waitsince"}, 8, false},
		{&l.G.WaitReason, []string{"waitreason"}, 1, false},
		{&l.G.LockedM, []string{"lockedm"}, 8, false},
		{&l.G.ParentGoid, []string{"parentGoid"}, 8, true},
		{&l.G.GoPC, []string{"gopc"}, 8, false},
		{&l.G.StartPC, []string{"startpc"}, 8, false},
		{&l.G.Labels, []string{"labels"}, 8, true},
	}
	for _, f := range fields {
		off, ft, err := FieldOffset(g, f.path...)
		if err != nil {
			if !f.optional {
				return nil, fmt.Errorf("runtime.g: %w", err)
			}
			off = Missing
		} else if ft.Size() != f.size {
			return nil, fmt.Errorf("runtime.g.%s is %d bytes, gi reads %d", strings.Join(f.path, "."), ft.Size(), f.size)
		}
		*f.dst = off
	}

	m, err := d.Struct("runtime.m")
	if err != nil {
		return nil, fmt.Errorf("runtime.m layout: %w", err)
	}
	l.M.Size = m.ByteSize
	for _, f := range []struct {
		dst  *int64
		name string
	}{{&l.M.ID, "id"}, {&l.M.ProcID, "procid"}, {&l.M.CurG, "curg"}} {
		off, ft, err := FieldOffset(m, f.name)
		if err != nil {
			return nil, fmt.Errorf("runtime.m: %w", err)
		}
		if ft.Size() != 8 {
			return nil, fmt.Errorf("runtime.m.%s is %d bytes, gi reads 8", f.name, ft.Size())
		}
		*f.dst = off
	}

	md, err := d.Struct("runtime.moduledata")
	if err != nil {
		return nil, fmt.Errorf("runtime.moduledata layout: %w", err)
	}
	for _, f := range []struct {
		dst      *int64
		name     string
		optional bool
	}{{&l.Module.Text, "text", false}, {&l.Module.GoFunc, "gofunc", false}, {&l.Module.EPclntab, "epclntab", true}} {
		off, ft, err := FieldOffset(md, f.name)
		if err != nil {
			if !f.optional {
				return nil, fmt.Errorf("runtime.moduledata: %w", err)
			}
			off = Missing
		} else if ft.Size() != 8 {
			return nil, fmt.Errorf("runtime.moduledata.%s is %d bytes, gi reads 8", f.name, ft.Size())
		}
		*f.dst = off
	}

	for name, v := range d.ConstantsWithPrefix("runtime._G") {
		short := strings.TrimPrefix(name, "runtime.")
		if short == "_Gscan" {
			l.ScanBit = uint32(v)
			continue
		}
		if strings.HasPrefix(short, "_Gscan") || strings.HasPrefix(short, "_GC") || strings.HasPrefix(short, "_Goid") {
			continue // combined scan states, GC phases, goid cache
		}
		l.Status[short] = uint32(v)
	}
	for _, need := range []string{"_Grunnable", "_Grunning", "_Gsyscall", "_Gwaiting", "_Gdead"} {
		if _, ok := l.Status[need]; !ok {
			return nil, fmt.Errorf("status constant runtime.%s not in DWARF", need)
		}
	}
	if l.ScanBit == 0 {
		return nil, fmt.Errorf("status constant runtime._Gscan not in DWARF")
	}

	var ok bool
	if l.AllGs, ok = d.Variable("runtime.allgs"); !ok {
		return nil, fmt.Errorf("variable runtime.allgs not in DWARF")
	}
	if l.AllGLen, ok = d.Variable("runtime.allglen"); !ok {
		return nil, fmt.Errorf("variable runtime.allglen not in DWARF")
	}
	if l.WaitReasonStrings, l.WaitReasonCount, err = stringArray(d, "runtime.waitReasonStrings"); err != nil {
		return nil, err
	}
	if l.GStatusStrings, l.GStatusCount, err = stringArray(d, "runtime.gStatusStrings"); err != nil {
		l.GStatusStrings, l.GStatusCount = 0, 0 // optional: names fall back to the constants
	}
	l.Labels, l.Hmap = labelsLayout(d)
	l.TracebackLabels = tracebackLabels(d)
	return l, nil
}

// tracebackLabels returns the address of runtime.debug.tracebacklabels, the
// GODEBUG setting that makes tracebacks print labels, or 0.
func tracebackLabels(d *Debug) uint64 {
	addr, ok := d.Variable("runtime.debug")
	if !ok {
		return 0
	}
	t, err := d.variableType(d.data.Reader(), "runtime.debug")
	if err != nil {
		return 0
	}
	st, ok := resolve(t).(*dwarf.StructType)
	if !ok {
		return 0
	}
	off, ft, err := FieldOffset(st, "tracebacklabels")
	if err != nil || ft.Size() != 4 {
		return 0
	}
	return addr + uint64(off)
}

// stringArray finds a package-level [N]string variable and its length.
func stringArray(d *Debug, name string) (uint64, int64, error) {
	addr, ok := d.Variable(name)
	if !ok {
		return 0, 0, fmt.Errorf("variable %s not in DWARF", name)
	}
	r := d.data.Reader()
	// Find the variable's entry again to learn its type: variables are few
	// compared with types, so a second targeted lookup is cheap enough and
	// keeps the index small.
	t, err := d.variableType(r, name)
	if err != nil {
		return 0, 0, err
	}
	at, ok := resolve(t).(*dwarf.ArrayType)
	if !ok || at.Count <= 0 {
		return 0, 0, fmt.Errorf("variable %s has type %v, want [N]string", name, t)
	}
	return addr, at.Count, nil
}

func (d *Debug) variableType(r *dwarf.Reader, name string) (dwarf.Type, error) {
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("find %s: %w", name, err)
		}
		if e == nil {
			return nil, fmt.Errorf("variable %s not in DWARF", name)
		}
		if e.Tag == dwarf.TagVariable {
			if n, _ := e.Val(dwarf.AttrName).(string); n == name {
				off, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
				if !ok {
					return nil, fmt.Errorf("variable %s has no type", name)
				}
				return d.data.Type(off)
			}
		}
		if e.Tag != dwarf.TagCompileUnit && e.Children {
			r.SkipChildren()
		}
	}
}

// labelsLayout finds how runtime/pprof's labelMap is represented.
func labelsLayout(d *Debug) (LabelsKind, HmapLayout) {
	t, err := d.Type("runtime/pprof.labelMap")
	if err != nil {
		return LabelsUnknown, HmapLayout{}
	}
	if _, ok := resolve(t).(*dwarf.StructType); ok {
		return LabelsList, HmapLayout{}
	}
	// map[string]string: classic hmap and bucket types.
	var h HmapLayout
	hm, err := d.Struct("runtime.hmap")
	if err != nil {
		return LabelsUnknown, h
	}
	b, err := d.Struct("bucket<string,string>")
	if err != nil {
		return LabelsUnknown, h
	}
	h.BucketSize = b.ByteSize
	for _, f := range []struct {
		dst  *int64
		st   *dwarf.StructType
		name string
	}{
		{&h.Count, hm, "count"}, {&h.B, hm, "B"}, {&h.Buckets, hm, "buckets"}, {&h.OldBuckets, hm, "oldbuckets"},
		{&h.TopHash, b, "tophash"}, {&h.Keys, b, "keys"}, {&h.Elems, b, "values"}, {&h.Overflow, b, "overflow"},
	} {
		off, _, err := FieldOffset(f.st, f.name)
		if err != nil {
			return LabelsUnknown, h
		}
		*f.dst = off
	}
	return LabelsMap, h
}
