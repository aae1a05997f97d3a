package inspect

import (
	"slices"

	"golang.org/x/arch/x86/x86asm"

	"github.com/gi-debug/gi/pclntab"
)

// Suspected holders. A lock taken without defer leaves no record of its
// holder in the goroutine: only the code says it. A frame stopped
// between a Lock of a global mutex and an Unlock of it, in its
// function's code order, suggests its goroutine holds it. This is a guess
// (the code between may branch around either), so gi names such a
// goroutine as suspected, and only where no holder is known. The sites
// are found in amd64 code: the inlined fast paths (LOCK CMPXCHG, LOCK
// XADD on the mutex's RIP-relative address) and the calls of the slow
// paths and of the methods with the mutex's address loaded into AX (the
// register ABI's first argument) just before.

// plainSite is where a function's code locks or unlocks a global mutex.
type plainSite struct {
	addr     uint64 // the mutex's link-time address
	off, end uint64 // the instruction's offsets from the function's entry: its first byte, and past its last
	unlock   bool
}

// maxPlainCode bounds the code of one function decoded for its sites.
const maxPlainCode = 1 << 16

// lockByName says whether a function of package sync takes a mutex for
// writing.
func lockByName(name string) bool {
	switch name {
	case "sync.(*Mutex).Lock", "sync.(*Mutex).lockSlow", "internal/sync.(*Mutex).Lock", "internal/sync.(*Mutex).lockSlow",
		"sync.(*RWMutex).Lock":
		return true
	}
	return false
}

// plainSites returns the sites where f's code locks or unlocks a global
// mutex directly, in code order; cached by entry. None on arm64.
func (t *Target) plainSites(f *pclntab.Func) []plainSite {
	s := t.sym
	if sites, ok := s.plain[f.Entry]; ok {
		return sites
	}
	var sites []plainSite
	if t.Binary.Arch == "amd64" && f.End > f.Entry && f.End-f.Entry <= maxPlainCode {
		code := make([]byte, f.End-f.Entry)
		if n, err := t.Binary.ReadAt(code, f.Entry); err == nil && n == len(code) {
			sites = t.decodePlainSites(code, f.Entry)
		}
	}
	if s.plain == nil {
		s.plain = map[uint64][]plainSite{}
	}
	s.plain[f.Entry] = sites
	return sites
}

// decodePlainSites decodes amd64 code starting at link-time address
// entry for its plainSites.
func (t *Target) decodePlainSites(code []byte, entry uint64) []plainSite {
	var sites []plainSite
	// The global whose address was last loaded into AX, and how many
	// instructions ago.
	var axAddr uint64
	axAge := 1 << 30
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			off++
			continue
		}
		next := entry + uint64(off+inst.Len)
		ripTarget := func(a x86asm.Arg) (uint64, bool) {
			m, ok := a.(x86asm.Mem)
			if !ok || m.Base != x86asm.RIP || m.Index != 0 {
				return 0, false
			}
			return uint64(int64(next) + m.Disp), true
		}
		locked := slices.ContainsFunc(inst.Prefix[:], func(p x86asm.Prefix) bool { return p&0xff == x86asm.PrefixLOCK })
		axAge++
		switch {
		case inst.Op == x86asm.LEA && inst.Args[0] == x86asm.RAX:
			if a, ok := ripTarget(inst.Args[1]); ok {
				axAddr, axAge = a, 0
			}
		case locked && (inst.Op == x86asm.CMPXCHG || inst.Op == x86asm.XADD):
			if a, ok := ripTarget(inst.Args[0]); ok {
				sites = append(sites, plainSite{addr: a, off: uint64(off), end: uint64(off + inst.Len), unlock: inst.Op == x86asm.XADD})
			}
		case inst.Op == x86asm.CALL:
			rel, ok := inst.Args[0].(x86asm.Rel)
			if !ok || axAge > 4 {
				break
			}
			target := uint64(int64(next) + int64(rel))
			if callee := t.sym.lines.FuncForPC(target); callee != nil && callee.Entry == target {
				switch {
				case lockByName(callee.Name):
					sites = append(sites, plainSite{addr: axAddr, off: uint64(off), end: uint64(off + inst.Len)})
				case unlockKindByName(callee.Name) == unlockWrite:
					sites = append(sites, plainSite{addr: axAddr, off: uint64(off), end: uint64(off + inst.Len), unlock: true})
				}
			}
		}
		if inst.Op != x86asm.LEA && len(inst.Args) > 0 && (inst.Args[0] == x86asm.RAX || inst.Args[0] == x86asm.EAX) || inst.Op == x86asm.CALL {
			axAge = max(axAge, 5) // AX overwritten, or clobbered by a call
		}
		off += inst.Len
	}
	return sites
}

// holdsAt says whether a frame stopped at offset off of a function with
// sites holds the mutex at addr by its code: the nearest site of it
// before off is a Lock, complete (a frame inside the call of a Lock or an
// Unlock is taking or releasing it, not holding it), and an Unlock of it
// comes after.
func holdsAt(sites []plainSite, addr, off uint64) bool {
	var nearest *plainSite
	unlockAfter := false
	for i := range sites {
		s := &sites[i]
		switch {
		case s.addr != addr:
		case s.end == off:
			return false // in that call
		case s.end < off:
			if nearest == nil || s.off > nearest.off {
				nearest = s
			}
		case s.unlock && s.off >= off:
			unlockAfter = true
		}
	}
	return nearest != nil && !nearest.unlock && unlockAfter
}

// findSuspects names, on each locked mutex the goroutines of gs wait on
// whose holder is not known, the goroutines with a frame stopped between
// a Lock and an Unlock of it in its function's code: suspects.
func (t *Target) findSuspects(gs []*Goroutine) {
	waited := map[uint64][]*WaitObject{}
	for _, g := range gs {
		for i := range g.WaitingOn {
			o := &g.WaitingOn[i]
			if (o.Kind == "mutex" || o.Kind == "rwmutex") && o.Sync != nil && o.Sync.Locked && len(o.Sync.Holders) == 0 && o.Addr != 0 {
				waited[o.Addr] = append(waited[o.Addr], o)
			}
		}
	}
	if len(waited) == 0 || t.Binary.Arch != "amd64" {
		return
	}
	bias := t.sym.bias
	suspects := map[uint64][]Holder{}
	for _, g := range gs {
		waits := map[uint64]bool{}
		for _, o := range g.WaitingOn {
			waits[o.Addr] = true
		}
		seen := map[uint64]bool{}
		for _, fr := range g.Frames {
			if fr.Inlined || fr.PC < bias || seen[fr.PC] {
				continue
			}
			seen[fr.PC] = true
			f := t.sym.lines.FuncForPC(fr.PC - bias)
			if f == nil || isLockPlumbing(f.Name) {
				continue
			}
			off := fr.PC - bias - f.Entry
			sites := t.plainSites(f)
			for _, site := range sites {
				m := site.addr + bias
				if site.unlock || site.end > off || waited[m] == nil || waits[m] || !holdsAt(sites, site.addr, off) {
					continue
				}
				if slices.ContainsFunc(suspects[m], func(h Holder) bool { return h.Goid == g.ID }) {
					continue
				}
				// The nearest Lock before: its line.
				for _, s := range sites {
					if s.addr == site.addr && !s.unlock && s.end <= off && s.off > site.off {
						site = s
					}
				}
				// The Lock's line in f itself: its outermost frame (the
				// fast path is inlined from package sync).
				h := Holder{Goid: g.ID, Function: f.Name, g: g}
				if frames, err := t.sym.lines.Frames(f, f.Entry+site.off); err == nil && len(frames) > 0 {
					h.File, h.Line = frames[len(frames)-1].File, frames[len(frames)-1].Line
				}
				suspects[m] = append(suspects[m], h)
			}
		}
	}
	for m, hs := range suspects {
		for _, o := range waited[m] {
			o.Sync.Suspects = hs
		}
	}
}
