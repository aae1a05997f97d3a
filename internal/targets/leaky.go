package targets

import (
	"strconv"
	"strings"
	"testing"
)

// LeakyTruth is what testdata/leaky printed of the goroutines it parked:
// by goroutine id, the class of each it leaked and of each it kept.
type LeakyTruth struct {
	Leaked, Kept map[uint64]string
}

// ReadLeakyTruth reads p's "G <goid> <class> leaked|kept" lines, failing
// the test on a malformed one or when either kind is missing.
func ReadLeakyTruth(tb testing.TB, p *Process) LeakyTruth {
	tb.Helper()
	gt := LeakyTruth{Leaked: map[uint64]string{}, Kept: map[uint64]string{}}
	for _, line := range p.Lines() {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "G" {
			continue
		}
		id, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			tb.Fatalf("target line %q", line)
		}
		if f[3] == "leaked" {
			gt.Leaked[id] = f[2]
		} else {
			gt.Kept[id] = f[2]
		}
	}
	if len(gt.Leaked) == 0 || len(gt.Kept) == 0 {
		tb.Fatalf("the target reported %d leaked and %d kept goroutines", len(gt.Leaked), len(gt.Kept))
	}
	return gt
}
