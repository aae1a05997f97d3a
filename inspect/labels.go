package inspect

import (
	"encoding/binary"
	"fmt"

	"github.com/gi-debug/gi/runtimelayout"
)

// copyLabels reads the pprof labels of every goroutine that has some. The
// representation depends on the Go release (see runtimelayout.LabelsKind).
func (t *Target) copyLabels(gs []*rawG) error {
	var firstErr error
	for _, rg := range gs {
		p := rg.labelsAt
		if p == 0 {
			continue
		}
		labels, err := t.readLabels(p)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("goroutine %d: %w", rg.goid, err)
			}
			continue
		}
		rg.labels = labels
	}
	return firstErr
}

func (t *Target) readLabels(p uint64) (map[string]string, error) {
	switch t.Layout.Labels {
	case runtimelayout.LabelsList:
		return t.readLabelList(p)
	case runtimelayout.LabelsMap:
		return t.readLabelMap(p)
	}
	return nil, fmt.Errorf("unknown labels representation in %s", t.Binary.GoVersion)
}

// LabelsOf reads the pprof labels of the goroutine goid, whose runtime.g is
// at address g, without stopping the process. It fails if that g now holds
// another goroutine. Labels may change while the goroutine runs (pprof.Do),
// so the answer is as of the read.
func (t *Target) LabelsOf(g, goid uint64) (map[string]string, error) {
	if t.Layout.G.Labels == runtimelayout.Missing {
		return nil, nil
	}
	hi := max(t.Layout.G.Goid, t.Layout.G.Labels) + 8
	buf := make([]byte, hi)
	if _, err := t.Mem.ReadAt(buf, g); err != nil {
		return nil, fmt.Errorf("read g at %#x: %w", g, err)
	}
	if got := t.u64(buf, t.Layout.G.Goid); got != goid {
		return nil, fmt.Errorf("g at %#x now holds goroutine %d, not %d", g, got, goid)
	}
	p := t.u64(buf, t.Layout.G.Labels)
	if p == 0 {
		return nil, nil
	}
	return t.readLabels(p)
}

func (t *Target) readStringData(p, n uint64) (string, error) {
	if n == 0 {
		return "", nil
	}
	if n > maxStringLen {
		return "", fmt.Errorf("string at %#x has implausible length %d", p, n)
	}
	b := make([]byte, n)
	if _, err := t.Mem.ReadAt(b, p); err != nil {
		return "", fmt.Errorf("read string at %#x: %w", p, err)
	}
	return string(b), nil
}

// readLabelList reads Go ≥1.24 labels: a pointer to a struct whose first
// field is a []struct{key, value string}.
func (t *Target) readLabelList(p uint64) (map[string]string, error) {
	var hdr [24]byte
	if _, err := t.Mem.ReadAt(hdr[:], p); err != nil {
		return nil, fmt.Errorf("read label set at %#x: %w", p, err)
	}
	data := binary.LittleEndian.Uint64(hdr[0:])
	n := binary.LittleEndian.Uint64(hdr[8:])
	if n > maxLabels {
		return nil, fmt.Errorf("label set at %#x has implausible length %d", p, n)
	}
	if n == 0 {
		return nil, nil
	}
	buf := make([]byte, n*runtimelayout.PprofLabelSize)
	if _, err := t.Mem.ReadAt(buf, data); err != nil {
		return nil, fmt.Errorf("read labels at %#x: %w", data, err)
	}
	out := make(map[string]string, n)
	for i := uint64(0); i < n; i++ {
		e := buf[i*runtimelayout.PprofLabelSize:]
		k, err := t.readStringData(binary.LittleEndian.Uint64(e[runtimelayout.PprofLabelKey:]), binary.LittleEndian.Uint64(e[runtimelayout.PprofLabelKey+8:]))
		if err != nil {
			return nil, err
		}
		v, err := t.readStringData(binary.LittleEndian.Uint64(e[runtimelayout.PprofLabelValue:]), binary.LittleEndian.Uint64(e[runtimelayout.PprofLabelValue+8:]))
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// readLabelMap reads Go ≤1.23 labels: a pointer to a map[string]string
// variable, i.e. to a pointer to the classic hmap.
func (t *Target) readLabelMap(p uint64) (map[string]string, error) {
	h := t.Layout.Hmap
	hmap, err := t.readWord(p)
	if err != nil || hmap == 0 {
		return nil, err
	}
	hdr := make([]byte, 48)
	if _, err := t.Mem.ReadAt(hdr, hmap); err != nil {
		return nil, fmt.Errorf("read hmap at %#x: %w", hmap, err)
	}
	count := t.u64(hdr, h.Count)
	if count > maxLabels {
		return nil, fmt.Errorf("hmap at %#x has implausible count %d", hmap, count)
	}
	out := make(map[string]string, count)
	if count == 0 {
		return out, nil
	}
	b := hdr[h.B]
	if b > 16 {
		return nil, fmt.Errorf("hmap at %#x has implausible B %d", hmap, b)
	}
	buf := make([]byte, h.BucketSize)
	visited := 0
	readBuckets := func(base uint64, nb uint64) error {
		for i := uint64(0); i < nb; i++ {
			addr := base + i*uint64(h.BucketSize)
			for addr != 0 {
				if visited++; visited > maxMapBuckets {
					return fmt.Errorf("hmap at %#x: too many buckets", hmap)
				}
				if _, err := t.Mem.ReadAt(buf, addr); err != nil {
					return fmt.Errorf("read bucket at %#x: %w", addr, err)
				}
				for s := 0; s < runtimelayout.HmapBucketCount; s++ {
					if buf[h.TopHash+int64(s)] < runtimelayout.HmapMinTopHash { // empty or evacuated
						continue
					}
					k, err := t.readStringData(t.u64(buf, h.Keys+int64(s)*runtimelayout.StringSize), t.u64(buf, h.Keys+int64(s)*runtimelayout.StringSize+8))
					if err != nil {
						return err
					}
					v, err := t.readStringData(t.u64(buf, h.Elems+int64(s)*runtimelayout.StringSize), t.u64(buf, h.Elems+int64(s)*runtimelayout.StringSize+8))
					if err != nil {
						return err
					}
					out[k] = v
				}
				addr = t.u64(buf, h.Overflow)
			}
		}
		return nil
	}
	if err := readBuckets(t.u64(hdr, h.Buckets), 1<<b); err != nil {
		return nil, err
	}
	if old := t.u64(hdr, h.OldBuckets); old != 0 && b > 0 {
		if err := readBuckets(old, 1<<(b-1)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
