package trace

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the rank-ceil(q*n) value of sorted, as Quantile defines it.
func exactQuantile(sorted []uint64, q float64) uint64 {
	rank := int(q*float64(len(sorted)) + 0.999999999)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var h Histogram
	vals := make([]uint64, 0, 20000)
	for i := 0; i < 20000; i++ {
		// Log-uniform from 1ns to about 10s, plus some exact small values.
		v := uint64(1) << uint(rng.Intn(34))
		v += uint64(rng.Int63n(int64(v)))
		if i%100 == 0 {
			v = uint64(i % 16)
		}
		vals = append(vals, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(vals)
	if h.Count() != uint64(len(vals)) {
		t.Errorf("count %d, want %d", h.Count(), len(vals))
	}
	if uint64(h.Min()) != vals[0] || uint64(h.Max()) != vals[len(vals)-1] {
		t.Errorf("min %d max %d, want %d and %d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
	var sum uint64
	for _, v := range vals {
		sum += v
	}
	if uint64(h.Total()) != sum {
		t.Errorf("total %d, want %d", h.Total(), sum)
	}
	for _, q := range []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1} {
		want := exactQuantile(vals, q)
		got := uint64(h.Quantile(q))
		// The bucket's upper bound: never below the exact value, at most
		// 1/16 of it above.
		if got < want || got > want+want/16 {
			t.Errorf("p%g = %d, exact %d (allowed [%d, %d])", q*100, got, want, want, want+want/16)
		}
	}
	if h.Quantile(1) != h.Max() {
		t.Errorf("p100 %v != max %v", h.Quantile(1), h.Max())
	}
}

func TestHistogramSmallAndEdge(t *testing.T) {
	var h Histogram
	if h.Count() != 0 || h.Quantile(0.5) != 0 || h.Min() != 0 || h.Max() != 0 {
		t.Errorf("empty histogram: count %d p50 %v min %v max %v", h.Count(), h.Quantile(0.5), h.Min(), h.Max())
	}
	// Values below 16 have buckets of their own: quantiles are exact.
	for _, v := range []time.Duration{7, 3, 15, 0, 9} {
		h.Record(v)
	}
	h.Record(-5) // a negative duration counts as 0
	for q, want := range map[float64]time.Duration{0: 0, 0.34: 3, 0.5: 3, 0.6: 7, 0.8: 9, 1: 15} {
		if got := h.Quantile(q); got != want {
			t.Errorf("p%g = %v, want %v", q*100, got, want)
		}
	}
	if h.Min() != 0 || h.Max() != 15 || h.Count() != 6 || h.Total() != 34 {
		t.Errorf("min %v max %v count %d total %v", h.Min(), h.Max(), h.Count(), h.Total())
	}

	// One value: every quantile is that value (clamped to min and max,
	// not the bucket's bound).
	var one Histogram
	one.Record(1234567 * time.Nanosecond)
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if got := one.Quantile(q); got != 1234567 {
			t.Errorf("single value: p%g = %v", q*100, got)
		}
	}
	// The largest durations land in the last buckets without overflow.
	var big Histogram
	big.Record(time.Duration(1<<63 - 1))
	big.Record(time.Hour)
	if big.Max() != time.Duration(1<<63-1) || big.Quantile(0.5) < time.Hour || big.Quantile(0.5) > time.Hour+time.Hour/16 {
		t.Errorf("huge values: max %v p50 %v", big.Max(), big.Quantile(0.5))
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value is at most its bucket's upper bound, and above the
	// previous bucket's: buckets tile the axis without gaps or overlap.
	for _, v := range []uint64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 1 << 20, 1<<20 + 1, 1<<40 - 1, 1 << 62, 1<<64 - 1} {
		b := bucketOf(v)
		if up := bucketUpper(b); v > up {
			t.Errorf("value %d in bucket %d whose upper bound is %d", v, b, up)
		}
		if b > 0 && bucketUpper(b-1) >= v {
			t.Errorf("value %d in bucket %d, but bucket %d already reaches %d", v, b, b-1, bucketUpper(b-1))
		}
		if b >= len(Histogram{}.counts) {
			t.Errorf("value %d: bucket %d out of range", v, b)
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i) * time.Microsecond
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
		all.Record(d)
	}
	var empty Histogram
	a.Merge(&empty)
	a.Merge(&b)
	if a.Count() != 1000 || a.Min() != time.Microsecond || a.Max() != time.Millisecond || a.Total() != all.Total() {
		t.Errorf("merged: count %d min %v max %v total %v (want total %v)", a.Count(), a.Min(), a.Max(), a.Total(), all.Total())
	}
	for _, q := range []float64{0.1, 0.5, 0.9, 0.99} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("p%g merged %v, recorded together %v", q*100, a.Quantile(q), all.Quantile(q))
		}
	}
	if got := a.Quantile(0.5); got < 500*time.Microsecond || got > 500*time.Microsecond+500*time.Microsecond/16 {
		t.Errorf("p50 of 1..1000µs = %v", got)
	}
	// Merging into an empty histogram takes the other's min.
	var into Histogram
	into.Merge(&b)
	if into.Min() != time.Microsecond || into.Count() != b.Count() {
		t.Errorf("merge into empty: min %v count %d", into.Min(), into.Count())
	}
}
