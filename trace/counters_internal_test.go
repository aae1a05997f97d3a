package trace

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/internal/targets"
)

// probeTable builds a probe table of n functions as appendProbes lays it
// out (an entry probe, then one probe per RET): a mix of functions with
// several RETs, leaves whose entry is their RET, and functions without a
// RET; every third entry is on a single-stepped instruction.
func probeTable(n int, r *rand.Rand) ([]probe, map[*Function]int, []*Function) {
	var probes []probe
	entries := map[*Function]int{}
	fns := make([]*Function, n)
	for i := range fns {
		fn := &Function{Name: "f"}
		fns[i] = fn
		entries[fn] = len(probes)
		class := classEmulated
		if i%3 == 0 {
			class = classStepped
		}
		switch k := r.IntN(10); {
		case k == 0: // the entry is the RET
			probes = append(probes, probe{fn: fn, kind: bpf.KindEntry, class: class, costKind: costEntryReturn})
		case k == 1: // no RET
			probes = append(probes, probe{fn: fn, kind: bpf.KindEntry, class: class, costKind: costEntry})
		default:
			probes = append(probes, probe{fn: fn, kind: bpf.KindEntry, class: class, costKind: costEntry})
			for range 1 + r.IntN(5) {
				probes = append(probes, probe{fn: fn, kind: bpf.KindReturn, class: classStepped, costKind: costReturn})
			}
		}
	}
	// Probes that are no function's, as open appends after the functions'.
	probes = append(probes, probe{kind: bpf.KindGoexit, class: classEmulated, costKind: costGoexit})
	return probes, entries, fns
}

// scanCallCost is what callCost did before it knew each function's entry
// probe: a scan of the whole table for the function's probes.
func scanCallCost(probes []probe, fn *Function, costs ProbeCosts) time.Duration {
	var c time.Duration
	for _, p := range probes {
		if p.fn != fn {
			continue
		}
		c += costs.of(p.class) + programEstimate
		if p.kind != bpf.KindEntry || p.costKind == costEntryReturn {
			break
		}
	}
	return c
}

// TestCallCostAt checks that a function's call cost, found from its entry
// probe, is what a scan of the whole table finds: the entry's trap, one
// RET's unless the entry reports the return or there is no RET, and a
// program run for each.
func TestCallCostAt(t *testing.T) {
	costs := ProbeCosts{Emulated: 400 * time.Nanosecond, Stepped: 14 * time.Microsecond}
	probes, entries, fns := probeTable(3000, rand.New(rand.NewPCG(1, 2)))
	s := &Session{probes: probes, entryProbe: entries}
	s.meter.costs = costs
	for _, fn := range fns {
		want := scanCallCost(probes, fn, costs)
		if got := callCostAt(probes, entries[fn], costs); got != want {
			t.Fatalf("function at probe %d: %v, the scan finds %v", entries[fn], got, want)
		}
		if got := s.callCost(fn); got != want {
			t.Fatalf("Session.callCost of the function at probe %d: %v, the scan finds %v", entries[fn], got, want)
		}
	}
	if got := s.callCost(&Function{Name: "untraced"}); got != 0 {
		t.Errorf("a function without probes costs %v", got)
	}
	// The three shapes, by hand.
	one := ProbeCosts{Emulated: time.Microsecond, Stepped: 10 * time.Microsecond}
	f := &Function{}
	for _, c := range []struct {
		name   string
		probes []probe
		want   time.Duration
	}{
		{"entry and RETs", []probe{{fn: f, kind: bpf.KindEntry, class: classEmulated}, {fn: f, kind: bpf.KindReturn, class: classStepped}, {fn: f, kind: bpf.KindReturn, class: classStepped}},
			one.Emulated + one.Stepped + 2*programEstimate},
		{"entry is the RET", []probe{{fn: f, kind: bpf.KindEntry, class: classStepped, costKind: costEntryReturn}, {fn: &Function{}, kind: bpf.KindReturn}},
			one.Stepped + programEstimate},
		{"no RET, another function next", []probe{{fn: f, kind: bpf.KindEntry, class: classEmulated}, {fn: &Function{}, kind: bpf.KindEntry}},
			one.Emulated + programEstimate},
		{"no RET, last", []probe{{fn: f, kind: bpf.KindEntry, class: classEmulated}},
			one.Emulated + programEstimate},
	} {
		if got := callCostAt(c.probes, 0, one); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkCallCosts measures the call costs of every function of a table
// the size of Caddy's (59,000 functions, about 165,000 probes), as the
// counting before a trace of '*' takes them, against the scan of the
// whole table it replaced, timed in the same run over one function in a
// hundred and scaled up (all of them took about 10 s).
func BenchmarkCallCosts(b *testing.B) {
	probes, entries, fns := probeTable(59000, rand.New(rand.NewPCG(1, 2)))
	s := &Session{probes: probes, entryProbe: entries}
	s.meter.costs = DefaultProbeCosts
	start := time.Now()
	for i := 0; i < len(fns); i += 100 {
		scanCallCost(probes, fns[i], s.meter.costs)
	}
	scan := time.Since(start) * 100
	start = time.Now()
	for b.Loop() {
		for _, fn := range fns {
			s.callCost(fn)
		}
	}
	each := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(scan.Seconds(), "scan-s")
	b.ReportMetric(float64(scan)/float64(each), "scan/now")
}

// TestReadInBatches checks when counters are read in batches: enough of
// them, dense enough among the keys before the greatest (every function's
// entry probes among all probes), and a batch's values bounded whatever
// the CPUs.
func TestReadInBatches(t *testing.T) {
	for _, c := range []struct {
		n, maxKey int
		want      bool
	}{
		{59203, 164936, true}, // '*' in Caddy: entry probes among all
		{4384, 13059, true},   // github.com/caddyserver/*
		{3, 2, false},         // a few functions
		{100, 100000, false},  // a few functions added late to a big table
		{batchMin, batchSpan*batchMin - 1, true},
		{batchMin, batchSpan * batchMin, false},
	} {
		if got := readInBatches(c.n, c.maxKey); got != c.want {
			t.Errorf("%d counters up to key %d: in batches %v, want %v", c.n, c.maxKey, got, c.want)
		}
	}
	for _, cpus := range []int{0, 1, 2, 64, 4096, 1 << 20} {
		k := batchKeys(cpus)
		if k < 64 || k > 64 && k*max(1, cpus)*8 > batchBytes {
			t.Errorf("%d CPUs: %d keys a batch", cpus, k)
		}
	}
}

// TestReadCounters checks that counters read in batches are those read
// key by key, on a per-CPU array the size of Caddy's probe table, for
// dense and sparse keys (the two paths) and keys at the map's end.
func TestReadCounters(t *testing.T) {
	targets.RequirePrivilege(t, "BPF maps")
	const entries = 165000
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: entries})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	want := func(k int) uint64 { return uint64(k)*uint64(cpus) + uint64(cpus*(cpus-1)/2) }
	keys := make([]uint32, entries)
	values := make([]uint64, entries*cpus)
	for k := range keys {
		keys[k] = uint32(k)
		for c := range cpus {
			values[k*cpus+c] = uint64(k) + uint64(c)
		}
	}
	if _, err := m.BatchUpdate(keys, values, nil); err != nil {
		t.Fatal(err)
	}
	check := func(name string, idx []int) {
		t.Helper()
		got, err := readCounters(m, idx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, k := range idx {
			if got[i] != want(k) {
				t.Fatalf("%s: key %d: %d, want %d", name, k, got[i], want(k))
			}
		}
	}
	var dense []int
	for k := 1; k < entries; k += 3 {
		dense = append(dense, k)
	}
	dense = append(dense, entries-1)
	if !readInBatches(len(dense), entries-1) {
		t.Fatal("the dense keys are not read in batches")
	}
	start := time.Now()
	check("dense", dense)
	t.Logf("%d counters up to key %d read in %v", len(dense), entries-1, time.Since(start))
	check("sparse", []int{7, 90000, 164999})
	check("none", nil)
	if sums, err := sumCountersUpTo(m, entries-1); err != nil || len(sums) != entries {
		t.Errorf("the whole map: %d sums, %v", len(sums), err)
	}
	if _, err := sumCountersUpTo(m, entries); err == nil {
		t.Error("a key past the map's end read")
	}
}
