package runtimelayout_test

import (
	"debug/dwarf"
	"debug/elf"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
)

// forEachRelease calls check with the DWARF of the probe program built by
// every Go release in the generated table, for amd64 and arm64, indexed as
// LoadDebug indexes it (the runtime's units).
func forEachRelease(t *testing.T, check func(t *testing.T, d *runtimelayout.Debug)) {
	forEachReleaseLoaded(t, runtimelayout.LoadDebug, check)
}

// forEachReleaseEveryUnit is forEachRelease with every unit indexed, for
// the constants of other packages than runtime (internal/abi's).
func forEachReleaseEveryUnit(t *testing.T, check func(t *testing.T, d *runtimelayout.Debug)) {
	forEachReleaseLoaded(t, runtimelayout.LoadDebugEveryUnit, check)
}

func forEachReleaseLoaded(t *testing.T, load func(*elf.File) (*runtimelayout.Debug, error), check func(t *testing.T, d *runtimelayout.Debug)) {
	dir := t.TempDir()
	for _, tc := range runtimelayout.TableToolchains() {
		for _, arch := range []string{"amd64", "arm64"} {
			t.Run(tc+"/"+arch, func(t *testing.T) {
				f, err := elf.Open(targets.BuildProbe(t, dir, tc, arch))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				d, err := load(f)
				if err != nil {
					t.Fatal(err)
				}
				check(t, d)
			})
		}
	}
}

// TestRecordsMatchDWARF checks the runtime facts the pclntab decoder needs
// where a stripped binary has no DWARF to give them, and which are
// therefore constants in it: the layouts of runtime._func and
// runtime.inlinedCall (pclntab.Records), against the DWARF of every Go
// release in the generated table, field by field, offset and size.
func TestRecordsMatchDWARF(t *testing.T) {
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		for _, r := range pclntab.Records {
			st, err := d.Struct(r.Type)
			if err != nil {
				t.Fatal(err)
			}
			if st.ByteSize != r.Size {
				t.Errorf("%s is %d bytes, the decoder reads %d", r.Type, st.ByteSize, r.Size)
			}
			for _, fd := range r.Fields {
				off, ft, err := runtimelayout.FieldOffset(st, fd.Name)
				if err != nil {
					t.Errorf("%s: %v", r.Type, err)
					continue
				}
				if off != fd.Offset || ft.Size() != fd.Size {
					t.Errorf("%s.%s at %d (%d bytes), the decoder reads it at %d (%d bytes)", r.Type, fd.Name, off, ft.Size(), fd.Offset, fd.Size)
				}
			}
		}
	})
}

// TestGStackguard0MatchesDWARF checks GStackguard0 against the DWARF of
// every Go release in the generated table, amd64 and arm64.
func TestGStackguard0MatchesDWARF(t *testing.T) {
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		g, err := d.Struct("runtime.g")
		if err != nil {
			t.Fatal(err)
		}
		if off, ft, err := runtimelayout.FieldOffset(g, "stackguard0"); err != nil || off != runtimelayout.GStackguard0 || ft.Size() != 8 {
			t.Errorf("g.stackguard0 at %d (%v), gi assumes %d", off, err, runtimelayout.GStackguard0)
		}
	})
}

// TestTFlagExtraStarMatchesDWARF checks TFlagExtraStar against the
// runtime's own constant on every release: internal/abi.TFlagExtraStar
// (Go 1.21+) or runtime.tflagExtraStar (Go 1.20), whichever the release
// has; both must agree where both exist, and one must.
func TestTFlagExtraStarMatchesDWARF(t *testing.T) {
	forEachReleaseEveryUnit(t, func(t *testing.T, d *runtimelayout.Debug) {
		found := false
		for _, name := range []string{"internal/abi.TFlagExtraStar", "runtime.tflagExtraStar"} {
			v, ok := d.Constant(name)
			if !ok {
				continue
			}
			found = true
			if v != runtimelayout.TFlagExtraStar {
				t.Errorf("%s = %#x, gi assumes %#x", name, v, runtimelayout.TFlagExtraStar)
			}
		}
		if !found {
			t.Error("neither internal/abi.TFlagExtraStar nor runtime.tflagExtraStar in DWARF")
		}
	})
}

// TestWaitGroupCounterShiftMatchesDWARF checks what DWARF can say of
// WaitGroupCounterShift on every release: sync.WaitGroup's state is at the
// offset the layout records (WaitLayout.WaitGroupState), an unsigned
// 8-byte word (a uint64, or an atomic.Uint64 around one), and the
// counter's 32 bits (an int32) end at its top bit. The bit layout itself
// only the targets can check (TestWaitingOn in inspect).
func TestWaitGroupCounterShiftMatchesDWARF(t *testing.T) {
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		l, err := runtimelayout.LayoutFromDWARF(d)
		if err != nil {
			t.Fatal(err)
		}
		wg, err := d.Struct("sync.WaitGroup")
		if err != nil {
			t.Fatal(err)
		}
		off, ft, err := runtimelayout.FieldOffset(wg, "state")
		if err != nil {
			t.Fatal(err)
		}
		if off != l.Wait.WaitGroupState {
			t.Errorf("sync.WaitGroup.state at %d, the layout records %d", off, l.Wait.WaitGroupState)
		}
		word := ft
		if st, ok := ft.(*dwarf.StructType); ok { // atomic.Uint64
			if _, word, err = runtimelayout.FieldOffset(st, "v"); err != nil {
				t.Fatalf("sync.WaitGroup.state is %s: %v", ft, err)
			}
		}
		if u, ok := word.(*dwarf.UintType); !ok || u.Size() != 8 {
			t.Errorf("sync.WaitGroup.state is %s (%s), want an 8-byte unsigned word", ft, word)
		}
		if bits := 8 * ft.Size(); runtimelayout.WaitGroupCounterShift+32 != bits {
			t.Errorf("gi reads the counter as the int32 at bit %d of sync.WaitGroup.state, which has %d bits: not its high 32", runtimelayout.WaitGroupCounterShift, bits)
		}
	})
}

// TestHmapFactsMatchDWARF checks the classic map's facts readLabelMap
// (inspect) reads the Go ≤1.23 label map with, on every release that has
// runtime.hmap: HmapBucketCount against runtime.bucketCnt (or
// internal/abi.MapBucketCount, Go 1.23's name for it) and the arrays of
// bucket<string,string>, HmapMinTopHash against runtime.minTopHash, and
// StringSize against the keys' and values' strings (the data pointer at 0,
// the length at 8). Releases without the classic map are skipped; at least
// one must have it.
func TestHmapFactsMatchDWARF(t *testing.T) {
	checked := 0
	forEachReleaseEveryUnit(t, func(t *testing.T, d *runtimelayout.Debug) {
		if _, err := d.Struct("runtime.hmap"); err != nil {
			t.Logf("no classic map: %v", err)
			return
		}
		checked++
		found := false
		for _, name := range []string{"runtime.bucketCnt", "internal/abi.MapBucketCount"} {
			if v, ok := d.Constant(name); ok {
				found = true
				if v != runtimelayout.HmapBucketCount {
					t.Errorf("%s = %d, gi assumes %d", name, v, runtimelayout.HmapBucketCount)
				}
			}
		}
		if !found {
			t.Error("neither runtime.bucketCnt nor internal/abi.MapBucketCount in DWARF")
		}
		if v, ok := d.Constant("runtime.minTopHash"); !ok || v != runtimelayout.HmapMinTopHash {
			t.Errorf("runtime.minTopHash = %d (in DWARF: %v), gi assumes %d", v, ok, runtimelayout.HmapMinTopHash)
		}
		b, err := d.Struct("bucket<string,string>")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			name string
			size int64
		}{{"tophash", 1}, {"keys", runtimelayout.StringSize}, {"values", runtimelayout.StringSize}} {
			_, ft, err := runtimelayout.FieldOffset(b, f.name)
			if err != nil {
				t.Fatal(err)
			}
			at, ok := ft.(*dwarf.ArrayType)
			if !ok {
				t.Errorf("bucket<string,string>.%s is %s, want an array", f.name, ft)
				continue
			}
			if at.Count != runtimelayout.HmapBucketCount || at.Type.Size() != f.size {
				t.Errorf("bucket<string,string>.%s is %s: %d elements of %d bytes, gi reads %d of %d", f.name, ft, at.Count, at.Type.Size(), runtimelayout.HmapBucketCount, f.size)
			}
			if f.size == runtimelayout.StringSize {
				checkString(t, "bucket<string,string>."+f.name, at.Type)
			}
		}
	})
	if checked == 0 {
		t.Error("no release has runtime.hmap: the classic map's facts were checked on none")
	}
}

// TestPprofLabelMatchesDWARF checks the label-list facts readLabelList
// (inspect) reads the Go 1.24+ labels with, on every release whose
// runtime/pprof.labelMap is a struct (LabelsList): the labelMap begins
// with the slice of labels (runtime/pprof.LabelSet's list, or from Go 1.26
// internal/runtime/pprof/label.Set's List), whose element
// (runtime/pprof.label, internal/runtime/pprof/label.Label from Go 1.26)
// is PprofLabelSize bytes with its key string at PprofLabelKey and its
// value string at PprofLabelValue. Releases with the map of Go ≤1.23 are
// skipped; at least one must have the list.
func TestPprofLabelMatchesDWARF(t *testing.T) {
	checked := 0
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		lt, err := d.Type("runtime/pprof.labelMap")
		if err != nil {
			t.Fatal(err)
		}
		lm, ok := runtimelayout.Resolve(lt).(*dwarf.StructType)
		if !ok {
			t.Logf("runtime/pprof.labelMap is %s, the map of Go ≤1.23: no label list", runtimelayout.Resolve(lt))
			return
		}
		checked++
		// The slice at offset 0, through the embedded set: DWARF
		// describes a slice as a struct named []T whose array field
		// points at its elements.
		cur := lm
		for !strings.HasPrefix(cur.StructName, "[]") {
			if len(cur.Field) == 0 || cur.Field[0].ByteOffset != 0 {
				t.Fatalf("%s does not begin with the slice of labels", cur.StructName)
			}
			next, ok := runtimelayout.Resolve(cur.Field[0].Type).(*dwarf.StructType)
			if !ok {
				t.Fatalf("%s begins with %s, want the slice of labels", cur.StructName, cur.Field[0].Type)
			}
			cur = next
		}
		var el *dwarf.StructType
		if off, at, err := runtimelayout.FieldOffset(cur, "array"); err == nil && off == 0 {
			if p, ok := at.(*dwarf.PtrType); ok {
				el, _ = runtimelayout.Resolve(p.Type).(*dwarf.StructType)
			}
		}
		if el == nil {
			t.Fatalf("the label list is %s, want a slice of structs with its data pointer first", cur.StructName)
		}
		t.Logf("labels: %s", el.StructName)
		if el.ByteSize != runtimelayout.PprofLabelSize {
			t.Errorf("%s is %d bytes, gi reads %d", el.StructName, el.ByteSize, runtimelayout.PprofLabelSize)
		}
		if len(el.Field) != 2 {
			t.Errorf("%s has %d fields, want key and value", el.StructName, len(el.Field))
		}
		for _, f := range []struct {
			name string
			off  int64
		}{{"key", runtimelayout.PprofLabelKey}, {"value", runtimelayout.PprofLabelValue}} {
			off, ft, err := runtimelayout.FieldOffset(el, f.name)
			if err != nil { // internal/runtime/pprof/label.Label exports them
				off, ft, err = runtimelayout.FieldOffset(el, strings.ToUpper(f.name[:1])+f.name[1:])
			}
			if err != nil {
				t.Errorf("%s: %v", el.StructName, err)
				continue
			}
			if off != f.off {
				t.Errorf("%s.%s at %d, gi reads it at %d", el.StructName, f.name, off, f.off)
			}
			checkString(t, el.StructName+"."+f.name, ft)
		}
	})
	if checked == 0 {
		t.Error("no release has the label list: its facts were checked on none")
	}
}

// checkString checks that typ is a string header as gi reads one:
// StringSize bytes, the data pointer at 0 and the length at 8.
func checkString(t *testing.T, what string, typ dwarf.Type) {
	t.Helper()
	st, ok := runtimelayout.Resolve(typ).(*dwarf.StructType)
	if !ok || st.StructName != "string" || st.ByteSize != runtimelayout.StringSize {
		t.Errorf("%s is %s (%d bytes), want a %d-byte string", what, typ, typ.Size(), runtimelayout.StringSize)
		return
	}
	for _, f := range []struct {
		name string
		off  int64
	}{{"str", 0}, {"len", 8}} {
		if off, ft, err := runtimelayout.FieldOffset(st, f.name); err != nil || off != f.off || ft.Size() != 8 {
			t.Errorf("%s: string.%s at %d (%v), gi reads it as the word at %d", what, f.name, off, err, f.off)
		}
	}
}

// TestSyncFactsMatchDWARF checks the bits gi reads sync.Mutex's and
// sync.RWMutex's state by against the DWARF constants of every release:
// package sync's, or internal/sync's where Go 1.24 moved the Mutex.
func TestSyncFactsMatchDWARF(t *testing.T) {
	forEachReleaseEveryUnit(t, func(t *testing.T, d *runtimelayout.Debug) {
		for _, c := range []struct {
			names []string
			fact  int64
		}{
			{[]string{"sync.mutexLocked", "internal/sync.mutexLocked"}, runtimelayout.MutexLocked},
			{[]string{"sync.mutexStarving", "internal/sync.mutexStarving"}, runtimelayout.MutexStarving},
			{[]string{"sync.rwmutexMaxReaders"}, runtimelayout.RWMutexMaxReaders},
		} {
			found := false
			for _, name := range c.names {
				if v, ok := d.Constant(name); ok {
					found = true
					if v != c.fact {
						t.Errorf("%s = %#x, gi assumes %#x", name, v, c.fact)
					}
				}
			}
			if !found {
				t.Errorf("none of %v in DWARF", c.names)
			}
		}
	})
}
