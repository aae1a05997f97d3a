package trace

import (
	"math"
	"math/bits"
	"time"
)

// subBucketBits is log2 of the linear sub-buckets per power of two: a
// recorded value lands in a bucket at most 1/16 (6.25%) wider than itself.
const subBucketBits = 4

// Histogram is a log-linear histogram of durations (like HdrHistogram):
// constant memory, constant-time Record, percentiles within 6.25%.
type Histogram struct {
	counts [64 << subBucketBits]uint64
	n      uint64
	min    uint64
	max    uint64
	sum    uint64
}

func bucketOf(v uint64) int {
	if v < 1<<subBucketBits {
		return int(v)
	}
	exp := bits.Len64(v) - 1 // v in [2^exp, 2^(exp+1))
	sub := (v >> (exp - subBucketBits)) & (1<<subBucketBits - 1)
	return (exp-subBucketBits+1)<<subBucketBits | int(sub)
}

// bucketUpper returns the largest value that lands in bucket b.
func bucketUpper(b int) uint64 {
	if b < 1<<subBucketBits {
		return uint64(b)
	}
	exp := b>>subBucketBits + subBucketBits - 1
	sub := uint64(b & (1<<subBucketBits - 1))
	lo := uint64(1)<<exp | sub<<(exp-subBucketBits)
	return lo + (uint64(1) << (exp - subBucketBits)) - 1
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// Count returns the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest recorded duration.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max returns the largest recorded duration.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Total returns the sum of recorded durations.
func (h *Histogram) Total() time.Duration { return time.Duration(h.sum) }

// Quantile returns the duration below which a fraction q of the recorded
// durations lie (the bucket's upper bound, clamped to [min, max]).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			v := bucketUpper(b)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// Merge adds other's counts into h.
func (h *Histogram) Merge(other *Histogram) {
	if other.n == 0 {
		return
	}
	for i, c := range other.counts {
		h.counts[i] += c
	}
	if h.n == 0 || other.min < h.min {
		h.min = other.min
	}
	if other.max > h.max {
		h.max = other.max
	}
	h.n += other.n
	h.sum += other.sum
}
