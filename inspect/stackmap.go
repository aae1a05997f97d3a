package inspect

import (
	"github.com/gi-debug/gi/pclntab"
)

// liveWords builds a StackCopy's map of the words the garbage collector
// scans, frame by frame, as runtime.scanframeworker does: the locals and
// arguments its pointer maps say are live, and the frame's stack objects
// (variables whose address is taken) whole. A frame interrupted at an
// arbitrary instruction (a running goroutine's innermost frame, the
// caller of an asynchronous preemption or of sigpanic) or one whose maps
// cannot be read is scanned whole (conservatively), as the runtime scans
// a preempted frame.
type liveWords struct {
	s      *symbolizer
	copy   *StackCopy
	arm64  bool
	whole  int // frames scanned whole
	frames int
}

func newLiveWords(s *symbolizer, c *StackCopy, arch string) *liveWords {
	c.Pointers = make([]uint64, (len(c.Bytes)/8+63)/64)
	return &liveWords{s: s, copy: c, arm64: arch == "arm64"}
}

// mark marks the words [lo, hi) of the target's stack.
func (l *liveWords) mark(lo, hi uint64) {
	c := l.copy
	lo = max(lo, c.SP)
	hi = min(hi, c.SP+uint64(len(c.Bytes)))
	for a := (lo + 7) &^ 7; a+8 <= hi; a += 8 {
		i := (a - c.SP) / 8
		c.Pointers[i/64] |= 1 << (i % 64)
	}
}

// frame marks the live words of f's frame [sp, fp) at pc (a return
// address, or an exact pc when trap).
func (l *liveWords) frame(f *pclntab.Func, pc, sp, fp uint64, whole bool) {
	l.frames++
	// The frame's varp and argp as the runtime derives them: below the
	// return address (amd64) and the saved frame pointer.
	varp := fp
	minFrame, argp := uint64(0), fp
	if l.arm64 {
		minFrame, argp = 16, fp+8
	} else {
		varp -= 8
	}
	if varp > sp {
		varp -= 8
	}
	args := uint64(0)
	if f.Args > 0 && f.Args != pclntab.ArgsSizeUnknown {
		args = uint64(f.Args)
	}
	if whole {
		l.whole++
		l.mark(sp, fp)
		l.mark(argp, argp+args)
		return
	}
	m := l.s.frameMaps(f, pc, varp-sp > minFrame)
	if m.err != nil {
		l.whole++
		l.mark(sp, fp)
		l.mark(argp, argp+args)
		return
	}
	locals, argMap, objs := m.locals, m.args, m.objects
	for i := 0; i < locals.N; i++ {
		if locals.Pointer(i) {
			w := varp - uint64(locals.N-i)*8
			l.mark(w, w+8)
		}
	}
	for i := 0; i < argMap.N; i++ {
		if argMap.Pointer(i) {
			w := argp + uint64(i)*8
			l.mark(w, w+8)
		}
	}
	for _, o := range objs {
		base := varp
		if o.Off >= 0 {
			base = argp
		}
		p := base + uint64(int64(o.Off))
		if p < sp || o.Size <= 0 {
			continue // not allocated in the frame yet
		}
		l.mark(p, p+uint64(o.Size))
	}
}

// frameMaps are a frame's pointer maps and stack objects at one pc.
type frameMaps struct {
	locals, args pclntab.Bitvector
	objects      []pclntab.StackObject
	err          error
}

// frameMaps returns f's maps at pc (a runtime address), decoded once per
// pc and locals question: every goroutine parked at one place shares them.
func (s *symbolizer) frameMaps(f *pclntab.Func, pc uint64, withLocals bool) *frameMaps {
	key := pc << 1
	if withLocals {
		key |= 1
	}
	if m, ok := s.maps[key]; ok {
		return m
	}
	m := &frameMaps{}
	m.locals, m.args, m.err = s.lines.StackMaps(f, pc-s.bias, withLocals)
	if m.err == nil {
		m.objects, m.err = s.lines.StackObjects(f)
	}
	if s.maps == nil {
		s.maps = map[uint64]*frameMaps{}
	}
	s.maps[key] = m
	return m
}
