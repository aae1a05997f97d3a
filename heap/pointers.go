package heap

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// Pointers says which words of a heap's objects hold pointers, by the
// runtime's own pointer maps (runtimelayout.HeapBitsLayout), read
// beside the heap's contents (ReadPointers): a walk that follows those
// words only sees the heap as the garbage collector does, not the stale
// addresses its objects keep as integers or in words it no longer
// reads. Where a map is unknown or unreadable — for the whole heap, a
// span or one object — Object says why, and the walk scans what it
// covers conservatively.
type Pointers struct {
	h     *Heap
	c     *Contents
	bits  *runtimelayout.HeapBitsLayout
	spans []spanMask
	types map[uint64]*typeMask
	// format names the maps read; unknown, when set, why none was.
	format, unknown string
	// mem, opts and maxSize serve the reads of types, in ReadPointers.
	mem     Reader
	opts    PointerOptions
	maxSize uint64
	steps   int
}

// spanMask is how one span's objects are mapped.
type spanMask struct {
	// bits has a bit per word of the span from its start: its copy of
	// the arena bitmap, or the bits in the span's own end (a view of the
	// contents).
	bits []byte
	// large is a large object's type (mspan.largeType).
	large *typeMask
	// header says each object starts with a malloc header: a pointer
	// to its type.
	header bool
	// why, when set, says why the span's objects are not mapped.
	why string
}

// typeMask is a type's pointer mask: a bit per word of its first
// ptrBytes bytes, repeated every size bytes over an object.
type typeMask struct {
	size, ptrBytes uint64
	mask           []byte
	why            string // set: unknown, why
}

// PointerOptions say what ReadPointers needs beside the layout.
type PointerOptions struct {
	// Bias is the executable's load bias; ExeLo and ExeHi bound its
	// mapping (bias applied): no mask built on demand is there, so a
	// mask address there is the runtime's inProgress marker.
	Bias, ExeLo, ExeHi uint64
	// Types bounds the type descriptors read (0: 1<<16), Steps the
	// words of the masks built on demand from types (0: 1<<26).
	Types, Steps int
}

// Reasons an object's pointer map is unknown.
const (
	whyFree   = "a free slot whose header names no type an allocated object has"
	whyNoType = "no malloc header (an object being allocated)"
)

// ReadPointers reads, through mem, the pointer maps of the objects of
// c's spans that may hold pointers: for the arena bitmap of Go 1.20,
// 1.21 (and 1.22 built with noallocheaders) the bitmap's words that
// cover each span; for Go 1.22+ the type descriptors the malloc
// headers and large spans point to, and their masks (those Go 1.24+
// builds on demand, built here from the types when the runtime has not
// yet). Call it where the heap was read, before the process moves on.
// It never fails: what it cannot read is scanned conservatively, and
// Object and Unknown say why.
func ReadPointers(mem Reader, c *Contents, l *runtimelayout.HeapLayout, opts PointerOptions) *Pointers {
	if opts.Types == 0 {
		opts.Types = 1 << 16
	}
	if opts.Steps == 0 {
		opts.Steps = 1 << 26
	}
	h := c.heap
	p := &Pointers{h: h, c: c, bits: &l.Bits, spans: make([]spanMask, len(h.Spans)), types: map[uint64]*typeMask{}, mem: mem, opts: opts, steps: opts.Steps}
	for i := range h.Spans {
		if s := &h.Spans[i]; !s.Noscan {
			p.maxSize = max(p.maxSize, s.ElemSize)
		}
	}
	b := &l.Bits
	switch {
	case b.Reason != "":
		p.unknown = "the layout of the runtime's pointer maps is unknown: " + b.Reason
	case b.ArenaFormat && b.ArenaBitmap == runtimelayout.Missing:
		p.unknown = "where heapArena keeps its bitmap is unknown (a stripped binary built with GOEXPERIMENT=noallocheaders)"
	case b.ArenaFormat:
		p.format = "the runtime's heap bitmap"
		p.readArenaBitmaps()
	case b.SpanLargeType == runtimelayout.Missing || b.MinSizeForMallocHeader <= 0 || b.MallocHeaderSize <= 0:
		p.unknown = "the runtime keeps neither an arena bitmap nor malloc headers gi knows"
	default:
		p.format = "the runtime's heap bits, malloc headers and types"
		p.readHeaders()
	}
	p.mem = nil
	return p
}

// Format names the pointer maps read ("" if none).
func (p *Pointers) Format() string { return p.format }

// Unknown says why no pointer map was read ("" if they were).
func (p *Pointers) Unknown() string { return p.unknown }

// readArenaBitmaps copies, for each span copied, the words of its
// arena's bitmap that cover it, in one batch.
func (p *Pointers) readArenaBitmaps() {
	h, off := p.h, uint64(p.bits.ArenaBitmap)
	if h.arenaBytes == 0 || h.arenaBytes%(64*8) != 0 || h.PageSize%(64*8) != 0 {
		p.format, p.unknown = "", "the arenas' size is not a multiple of a bitmap word's"
		return
	}
	var ranges []proc.Range
	type spanBits struct{ k, at, n int }
	var spans []spanBits
	total := 0
	for k := range h.Spans {
		s := &h.Spans[k]
		if s.Noscan || p.c.data[k] == nil {
			continue
		}
		// A large span may cross arenas: a range of each's bitmap.
		var mine []proc.Range
		for a, end := s.Start, s.Start+s.Pages*h.PageSize; a < end; {
			base := a - a%h.arenaBytes
			ha, ok := h.arenas[base]
			if !ok {
				p.spans[k].why = fmt.Sprintf("no heapArena holds %#x", a)
				break
			}
			stop := min(end, base+h.arenaBytes)
			mine = append(mine, proc.Range{Addr: ha + off + (a-base)/64, Len: int((stop - a) / 64)})
			a = stop
		}
		if p.spans[k].why != "" {
			continue
		}
		n := int(s.Pages * h.PageSize / 64)
		spans = append(spans, spanBits{k, total, n})
		ranges = append(ranges, mine...)
		total += n
	}
	buf := make([]byte, total)
	if err := p.mem.ReadBatch(ranges, buf); err != nil {
		var be *proc.BatchError
		if !errors.As(err, &be) {
			p.format, p.unknown = "", fmt.Sprintf("read the heap bitmap: %v", err)
			return
		}
		// The spans whose ranges failed: by where the ranges land.
		at := 0
		failed := map[int]bool{}
		for _, i := range be.Failed {
			failed[i] = true
		}
		bad := map[int]bool{}
		for i, r := range ranges {
			if failed[i] {
				bad[at] = true
			}
			at += r.Len
		}
		for _, sb := range spans {
			for a := range bad {
				if a >= sb.at && a < sb.at+sb.n {
					p.spans[sb.k].why = "its part of the heap bitmap could not be read"
				}
			}
		}
	}
	for _, sb := range spans {
		if p.spans[sb.k].why == "" {
			p.spans[sb.k].bits = buf[sb.at : sb.at+sb.n : sb.at+sb.n]
		}
	}
}

// readHeaders maps each span copied (Go 1.22+): small objects by the
// bits at the span's end, larger ones by their malloc header's type,
// a large object by its span's type, whose descriptors it reads.
func (p *Pointers) readHeaders() {
	h, b := p.h, p.bits
	// The in-span bitmap: a bit per word of the page, at its end
	// (runtime.heapBitsSlice: pageSize/ptrSize/8 bytes), before the
	// Green Tea collector's inline mark bits where it has them.
	bitmapLen := h.PageSize / 8 / 8
	for k := range h.Spans {
		s, m, d := &h.Spans[k], &p.spans[k], p.c.data[k]
		if s.Noscan || d == nil {
			continue
		}
		switch {
		case s.Class != 0 && s.ElemSize <= uint64(b.MinSizeForMallocHeader):
			end := h.PageSize
			if b.GreenTea && s.ElemSize >= 16 { // runtime.gcUsesSpanInlineMarkBits
				if b.InlineMarkBits <= 0 {
					m.why = "the size of the Green Tea collector's inline mark bits is unknown"
					continue
				}
				end -= uint64(b.InlineMarkBits)
			}
			if s.Pages != 1 || end < bitmapLen || uint64(s.NElems)*s.ElemSize > end-bitmapLen || uint64(len(d)) < end {
				m.why = fmt.Sprintf("a span of %d pages of %d slots of %d bytes has no room for its bits", s.Pages, s.NElems, s.ElemSize)
				continue
			}
			m.bits = d[end-bitmapLen : end : end]
		case s.Class != 0:
			m.header = true
			for i := 0; i < s.NElems; i++ {
				if t := le.Uint64(d[uint64(i)*s.ElemSize:]); t != 0 && s.Allocated(i) {
					p.typeAt(t)
				}
			}
		case s.largeType == 0:
			m.why = "its type is not set (mspan.largeType: the object is being allocated)"
		default:
			m.large = p.typeAt(s.largeType)
		}
	}
}

// typeAt returns the mask of the type descriptor at addr, read once.
func (p *Pointers) typeAt(addr uint64) *typeMask {
	if t, ok := p.types[addr]; ok {
		return t
	}
	t := &typeMask{}
	if len(p.types) >= p.opts.Types {
		t.why = fmt.Sprintf("more than the bound of %d types", p.opts.Types)
	} else if err := p.readType(addr, t); err != nil {
		t.why = fmt.Sprintf("type %#x: %v", addr, err)
	}
	p.types[addr] = t
	return t
}

// typeHeader is what a type descriptor says of its pointers.
type typeHeader struct {
	size, ptrBytes, gcdata uint64
	tflag, kind            uint8
}

// header reads the type descriptor at addr.
func (p *Pointers) header(addr uint64) (typeHeader, error) {
	T := &p.bits.Type
	b := make([]byte, max(T.Size, T.SizeField+8, T.PtrBytes+8, T.GCData+8, T.TFlag+1, T.Kind+1))
	if _, err := p.mem.ReadAt(b, addr); err != nil {
		return typeHeader{}, err
	}
	t := typeHeader{size: le.Uint64(b[T.SizeField:]), ptrBytes: le.Uint64(b[T.PtrBytes:]), gcdata: le.Uint64(b[T.GCData:]), tflag: b[T.TFlag], kind: b[T.Kind]}
	if t.ptrBytes > t.size || t.ptrBytes%8 != 0 || (t.ptrBytes > 0 && t.size%8 != 0) {
		return t, fmt.Errorf("not a type: %d bytes, %d of them with pointers", t.size, t.ptrBytes)
	}
	return t, nil
}

// onDemand reports whether t's GCData points to where its mask's
// address is (Go 1.24+'s TFlagGCMaskOnDemand).
func (p *Pointers) onDemand(t typeHeader) bool {
	f := p.bits.TFlagGCMaskOnDemand
	return f > 0 && f < 256 && t.tflag&uint8(f) != 0
}

// readType reads the type descriptor at addr and its pointer mask into t.
func (p *Pointers) readType(addr uint64, t *typeMask) error {
	th, err := p.header(addr)
	if err != nil {
		return err
	}
	if th.ptrBytes == 0 || th.size > p.maxSize {
		return fmt.Errorf("a type of %d bytes, %d of them with pointers, in a span of objects of at most %d bytes with pointers", th.size, th.ptrBytes, p.maxSize)
	}
	if g := p.bits.KindGCProg; g > 0 && g < 256 && th.kind&uint8(g) != 0 {
		return errors.New("its mask is a GC program")
	}
	if p.bits.KindGCProg == runtimelayout.Missing && p.bits.TFlagGCMaskOnDemand == runtimelayout.Missing {
		// Each release has one or the other: which, and so what GCData
		// points to, is unknown.
		return errors.New("the type flags of the release are unknown")
	}
	t.size, t.ptrBytes = th.size, th.ptrBytes
	words := th.ptrBytes / 8
	t.mask = make([]byte, (words+7)/8)
	if !p.onDemand(th) {
		return p.readMask(th.gcdata, words, t.mask, 0)
	}
	var b [8]byte
	if _, err := p.mem.ReadAt(b[:], th.gcdata); err != nil {
		return fmt.Errorf("its mask's address: %w", err)
	}
	built := le.Uint64(b[:])
	inProgress := p.bits.InProgress != 0 && built == p.bits.InProgress+p.opts.Bias
	if built != 0 && !inProgress && (built < p.opts.ExeLo || built >= p.opts.ExeHi) {
		return p.readMask(built, words, t.mask, 0)
	}
	// Not built yet (allocation does not build it: the first scan
	// does), or being built: built here as runtime.buildGCMask does.
	return p.buildMask(addr, t.mask, 0, 0)
}

// readMask reads words bits of the mask at addr into dst from bit at.
func (p *Pointers) readMask(addr, words uint64, dst []byte, at uint64) error {
	if p.steps -= int(words); p.steps < 0 {
		return fmt.Errorf("more than the bound of %d words of masks", p.opts.Steps)
	}
	src := make([]byte, (words+7)/8)
	if _, err := p.mem.ReadAt(src, addr); err != nil {
		return fmt.Errorf("its mask: %w", err)
	}
	if at%8 == 0 { // byte by byte, the bits past words left out
		for i := range src {
			v := src[i]
			if rest := words - 8*uint64(i); rest < 8 {
				v &= byte(1)<<rest - 1
			}
			if j := at/8 + uint64(i); j < uint64(len(dst)) {
				dst[j] |= v
			}
		}
		return nil
	}
	for i := uint64(0); i < words; i++ {
		if j := at + i; src[i/8]&(1<<(i%8)) != 0 && j/8 < uint64(len(dst)) {
			dst[j/8] |= 1 << (j % 8)
		}
	}
	return nil
}

// maxTypeNesting bounds the nesting of arrays and structs buildMask
// follows.
const maxTypeNesting = 64

// buildMask sets in dst, from bit at, the pointer words of the type at
// addr, from its own mask or, for a mask built on demand, its elements'
// or fields' (runtime.buildGCMask).
func (p *Pointers) buildMask(addr uint64, dst []byte, at uint64, depth int) error {
	if depth > maxTypeNesting {
		return errors.New("types nested too deep")
	}
	if p.steps--; p.steps < 0 {
		return fmt.Errorf("more than the bound of %d words of masks", p.opts.Steps)
	}
	th, err := p.header(addr)
	if err != nil {
		return err
	}
	if th.ptrBytes == 0 {
		return nil
	}
	if at+th.ptrBytes/8 > uint64(len(dst))*8 {
		return fmt.Errorf("a part of %d bytes past its whole", th.ptrBytes)
	}
	if !p.onDemand(th) {
		return p.readMask(th.gcdata, th.ptrBytes/8, dst, at)
	}
	T, b := &p.bits.Type, p.bits
	kind := int64(th.kind)
	if b.KindMask > 0 {
		kind &= b.KindMask
	}
	var w [24]byte
	word := func(a uint64, n int) ([]byte, error) {
		_, err := p.mem.ReadAt(w[:n], a)
		return w[:n], err
	}
	switch {
	case kind == b.KindArray && T.ArrayElem >= 0 && T.ArrayLen >= 0:
		e, err := word(addr+uint64(T.ArrayElem), 8)
		if err != nil {
			return err
		}
		elem := le.Uint64(e)
		n, err := word(addr+uint64(T.ArrayLen), 8)
		if err != nil {
			return err
		}
		count := le.Uint64(n)
		eh, err := p.header(elem)
		if err != nil {
			return err
		}
		if eh.size == 0 || eh.ptrBytes == 0 {
			return nil
		}
		if count > th.size/eh.size {
			return fmt.Errorf("an array of %d elements of %d bytes in %d bytes", count, eh.size, th.size)
		}
		// The element's mask once, then repeated.
		words := eh.ptrBytes / 8
		em := make([]byte, (words+7)/8)
		if err := p.buildMask(elem, em, 0, depth+1); err != nil {
			return err
		}
		for i := uint64(0); i < count; i++ {
			if p.steps -= int(words); p.steps < 0 {
				return fmt.Errorf("more than the bound of %d words of masks", p.opts.Steps)
			}
			base := at + i*eh.size/8
			if base+words > uint64(len(dst))*8 {
				return fmt.Errorf("an element past its array")
			}
			for j := uint64(0); j < words; j++ {
				if em[j/8]&(1<<(j%8)) != 0 {
					dst[(base+j)/8] |= 1 << ((base + j) % 8)
				}
			}
		}
		return nil
	case kind == b.KindStruct && T.StructFields >= 0 && T.FieldSize > 0:
		s, err := word(addr+uint64(T.StructFields), 16)
		if err != nil {
			return err
		}
		fields, n := le.Uint64(s), le.Uint64(s[8:])
		if n > th.size || n > 1<<16 {
			return fmt.Errorf("a struct of %d fields in %d bytes", n, th.size)
		}
		if p.steps -= int(n); p.steps < 0 {
			return fmt.Errorf("more than the bound of %d words of masks", p.opts.Steps)
		}
		fb := make([]byte, n*uint64(T.FieldSize))
		if _, err := p.mem.ReadAt(fb, fields); err != nil {
			return fmt.Errorf("its fields: %w", err)
		}
		for i := uint64(0); i < n; i++ {
			f := fb[i*uint64(T.FieldSize):]
			ft, off := le.Uint64(f[T.FieldType:]), le.Uint64(f[T.FieldOffset:])
			if off%8 != 0 || off >= th.size {
				continue // no pointer there: a pointer is aligned
			}
			if err := p.buildMask(ft, dst, at+off/8, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("a mask built on demand for a type of kind %d", kind)
}

// ObjectMask says which words of one object hold pointers (Pointers.Object).
type ObjectMask struct {
	// bits and first: word w is bit first+w of bits.
	bits  []byte
	first uint64
	// t and skip: words from skip on hold t's mask repeated.
	t    *typeMask
	skip uint64
}

// Pointer reports whether word w of the object (its slot's, from the
// slot's first byte) holds a pointer.
func (m *ObjectMask) Pointer(w uint64) bool {
	if m.t == nil {
		j := m.first + w
		return j/8 < uint64(len(m.bits)) && m.bits[j/8]&(1<<(j%8)) != 0
	}
	if w < m.skip {
		return false // the malloc header: a type, not a heap pointer
	}
	o := (w - m.skip) % (m.t.size / 8)
	return o < m.t.ptrBytes/8 && m.t.mask[o/8]&(1<<(o%8)) != 0
}

// Each calls fn with each word of the object's first n that holds a
// pointer, in order: what Pointer says of each, found a byte of the map
// at a time.
func (m *ObjectMask) Each(n uint64, fn func(w uint64)) {
	if m.t == nil {
		for w := uint64(0); w < n; {
			j := m.first + w
			if j/8 >= uint64(len(m.bits)) {
				return
			}
			b := m.bits[j/8] >> (j % 8)
			if b == 0 {
				w += 8 - j%8
				continue
			}
			w += uint64(bits.TrailingZeros8(b))
			if w < n {
				fn(w)
			}
			w++
		}
		return
	}
	size, ptrs := m.t.size/8, m.t.ptrBytes/8
	for base := m.skip; base < n; base += size {
		for i := uint64(0); i < ptrs; i += 8 {
			b := m.t.mask[i/8]
			for b != 0 {
				k := i + uint64(bits.TrailingZeros8(b))
				b &= b - 1
				if k >= ptrs || base+k >= n {
					break
				}
				fn(base + k)
			}
		}
	}
}

// Object returns the pointer map of slot i of span k (its index in the
// heap's Spans), or why it is unknown (the object is then to be scanned
// conservatively): a span or type that could not be read, an object
// being allocated. A slot the allocation bits say free has the map its
// bits or header hold: right for an object allocated since the bits were
// last set (a span caught in its sweep), and for one truly free, which
// the collector never scans, stale at worst; but a header of a free slot
// is followed only to a type an allocated object has (a free slot of a
// fresh span holds anything).
func (p *Pointers) Object(k, i int) (ObjectMask, string) {
	if p.unknown != "" {
		return ObjectMask{}, p.unknown
	}
	if k < 0 || k >= len(p.spans) {
		return ObjectMask{}, "not in the heap"
	}
	s, m := &p.h.Spans[k], &p.spans[k]
	switch {
	case m.why != "":
		return ObjectMask{}, m.why
	case i < 0 || i >= s.NElems:
		return ObjectMask{}, "not a slot of its span"
	case m.bits != nil:
		return ObjectMask{bits: m.bits, first: uint64(i) * s.ElemSize / 8}, ""
	case m.large != nil:
		if m.large.why != "" {
			return ObjectMask{}, m.large.why
		}
		if m.large.size > s.ElemSize {
			return ObjectMask{}, fmt.Sprintf("a type of %d bytes in an object of %d", m.large.size, s.ElemSize)
		}
		return ObjectMask{t: m.large}, ""
	case m.header:
		d := p.c.data[k]
		if d == nil {
			return ObjectMask{}, "not copied"
		}
		a := le.Uint64(d[uint64(i)*s.ElemSize:])
		if a == 0 {
			return ObjectMask{}, whyNoType
		}
		t := p.types[a]
		hdr := uint64(p.bits.MallocHeaderSize)
		switch {
		case t == nil && !s.Allocated(i):
			return ObjectMask{}, whyFree
		case t == nil:
			return ObjectMask{}, fmt.Sprintf("type %#x not read", a)
		case t.why != "":
			return ObjectMask{}, t.why
		case t.size+hdr > s.ElemSize:
			return ObjectMask{}, fmt.Sprintf("a type of %d bytes in an object of %d", t.size, s.ElemSize)
		}
		return ObjectMask{t: t, skip: hdr / 8}, ""
	}
	return ObjectMask{}, "no pointer map"
}
