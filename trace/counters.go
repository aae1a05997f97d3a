package trace

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/gi-debug/gi/bpf"
)

// What the overhead budget reads per function, at the scale of every
// function of a big binary (Caddy: 59,000 functions, 165,000 probes). The
// counting before a trace used to look up each function's probes in the
// whole probe table (quadratic: 10 s of CPU for '*') and read each probe's
// hit counter with a system call of its own, several times; a function's
// cost is now found from its entry probe, and the counters are read a
// chunk of the map at a time.

// callCost estimates what one call of fn traced whole costs the process:
// the traps at its entry and at one RET, and two program runs (0 for a
// function without probes in the table).
func (s *Session) callCost(fn *Function) time.Duration {
	s.probesMu.RLock()
	defer s.probesMu.RUnlock()
	i, ok := s.entryProbe[fn]
	if !ok {
		return 0
	}
	return callCostAt(s.probes, i, s.meter.costs)
}

// callCostAt is callCost for the function whose entry probe is probes[i]:
// appendProbes puts a function's RET probes right after its entry probe,
// so the RET a call pays is the next probe, unless the entry probe
// reports the return too (a leaf whose entry is its RET) or the function
// has no RET probe (entry only).
func callCostAt(probes []probe, i int, costs ProbeCosts) time.Duration {
	p := probes[i]
	c := costs.of(p.class) + programEstimate
	if p.costKind == costEntryReturn {
		return c
	}
	if i+1 < len(probes) {
		if r := probes[i+1]; r.fn == p.fn && r.kind == bpf.KindReturn {
			c += costs.of(r.class) + programEstimate
		}
	}
	return c
}

// readHits returns the hits of probes idx, summed over CPUs.
func (s *Session) readHits(idx []int) ([]uint64, error) {
	out, err := readCounters(s.objs.Hits, idx)
	if err != nil {
		return nil, fmt.Errorf("probe hits: %w", err)
	}
	return out, nil
}

// Reading per-CPU counters in batches: a lookup is a system call, about
// 1.6 µs here with its allocations; a batch lookup copies a chunk of the
// map, keys from 0 on, in one, about 0.25 µs a key (the kernel's copy of
// each key and value to user memory). For every function of Caddy
// (59,000 entry probes among 165,000) a read takes 40 ms in batches
// against 95 ms key by key.
const (
	// batchSpan: idx are read in batches when the keys up to the
	// greatest of them number at most batchSpan times as many as idx.
	batchSpan = 4
	// batchMin: fewer keys than this are looked up one by one.
	batchMin = 16
	// batchBytes bounds a batch's values (keys times CPUs times 8).
	batchBytes = 1 << 20
)

// readInBatches reports whether counters idx, the greatest of them
// maxKey, are read in batches from key 0 rather than one by one.
func readInBatches(n, maxKey int) bool {
	return n >= batchMin && maxKey < batchSpan*n
}

// batchKeys is how many keys a batch reads with cpus values each.
func batchKeys(cpus int) int {
	return max(64, batchBytes/(8*max(1, cpus)))
}

// readCounters returns the values at keys idx of m, a per-CPU array of
// uint64 counters, summed over CPUs: in batches where that costs less
// than the system calls it saves (readInBatches), else, or where a batch
// fails (kernels before 5.6 lack batch lookups), key by key.
func readCounters(m *ebpf.Map, idx []int) ([]uint64, error) {
	out := make([]uint64, len(idx))
	if len(idx) == 0 {
		return out, nil
	}
	if maxKey := slices.Max(idx); readInBatches(len(idx), maxKey) {
		// On any failure (a kernel without batch lookups, before 5.6),
		// key by key, which says what is wrong if anything is.
		if sums, err := sumCountersUpTo(m, maxKey); err == nil {
			for i, k := range idx {
				out[i] = sums[k]
			}
			return out, nil
		}
	}
	for i, k := range idx {
		n, err := sumPerCPU(m, uint32(k))
		if err != nil {
			return nil, fmt.Errorf("counter %d: %w", k, err)
		}
		out[i] = n
	}
	return out, nil
}

// sumCountersUpTo returns the values of keys 0 to maxKey of m, a per-CPU
// array of uint64 counters, summed over CPUs, read in batches.
func sumCountersUpTo(m *ebpf.Map, maxKey int) ([]uint64, error) {
	if m.Type() != ebpf.PerCPUArray || m.ValueSize() != 8 || uint32(maxKey) >= m.MaxEntries() {
		return nil, fmt.Errorf("batch lookup of keys up to %d: map %v of %d-byte values, %d keys", maxKey, m.Type(), m.ValueSize(), m.MaxEntries())
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("possible CPUs: %w", err)
	}
	chunk := batchKeys(cpus)
	sums := make([]uint64, maxKey+1)
	keys := make([]uint32, min(chunk, len(sums)))
	values := make([]uint64, len(keys)*cpus)
	var cursor ebpf.MapBatchCursor
	for done := 0; done < len(sums); {
		want := min(len(keys), len(sums)-done)
		n, err := m.BatchLookup(&cursor, keys[:want], values[:want*cpus], nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, fmt.Errorf("batch lookup of keys from %d: %w", done, err)
		}
		for j := range n {
			k := int(keys[j])
			if k < done || k >= len(sums) {
				return nil, fmt.Errorf("batch lookup from key %d returned key %d", done, k)
			}
			var sum uint64
			for _, v := range values[j*cpus : (j+1)*cpus] {
				sum += v
			}
			sums[k] = sum
		}
		done += n
		if n == 0 || err != nil { // the map's end
			if done < len(sums) {
				return nil, fmt.Errorf("batch lookup ended at key %d of %d", done, len(sums))
			}
			break
		}
	}
	return sums, nil
}
