package elfbin

import (
	"debug/elf"
	"errors"
	"fmt"
	"slices"

	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
)

// moduleLayouts returns the moduledata layouts to try: the generated
// table's for the binary's Go release or, for a release the table does not
// know, every distinct one in the table that can be checked by its
// epclntab, newest first.
func (b *Binary) moduleLayouts(h *pclntab.Header) []runtimelayout.ModuleLayout {
	if h.Go118() {
		// Go 1.18 and 1.19, older than the table: no covctrs, ecovctrs.
		return []runtimelayout.ModuleLayout{{Text: 22 * 8, GoFunc: 38 * 8, EPclntab: runtimelayout.Missing}}
	}
	if v, err := runtimelayout.TableLayout(b.GoVersion, b.Arch); err == nil {
		return []runtimelayout.ModuleLayout{v.Layout.Module}
	}
	var out []runtimelayout.ModuleLayout
	generated := runtimelayout.GeneratedLayouts()
	for i := len(generated) - 1; i >= 0; i-- {
		ml := generated[i].Layout.Module
		if ml.EPclntab > 0 && !slices.Contains(out, ml) {
			out = append(out, ml)
		}
	}
	return out
}

// moduleInfo holds the moduledata fields the decoder needs.
type moduleInfo struct {
	addr   uint64
	text   uint64
	gofunc uint64
}

func (b *Binary) loadLineTable() (*pclntab.LineTable, error) {
	data, addr, err := b.findPclntab()
	if err != nil {
		return nil, err
	}
	h, err := pclntab.ParseHeader(data, b.order)
	if err != nil {
		return nil, fmt.Errorf("read pclntab header at %#x: %w", addr, err)
	}
	md, mdErr := b.findModuledata(addr, h, uint64(len(data)))

	var m pclntab.Module
	switch {
	case mdErr == nil:
		m.TextStart, m.Addr = md.text, md.addr
	case h.TextStart() != 0:
		m.TextStart = h.TextStart()
	default:
		if s, ok := b.Symbol("runtime.text"); ok {
			m.TextStart = s.Addr
		} else if s := b.File.Section(".text"); s != nil {
			m.TextStart = s.Addr
		} else {
			return nil, fmt.Errorf("locate text start: %w", mdErr)
		}
	}

	// go:func.*, the base of funcdata offsets (inline trees).
	if mdErr == nil {
		m.GoFunc = md.gofunc
	}
	for _, name := range []string{"go:func.*", "go.func.*"} { // 1.20+, 1.18-1.19
		if m.GoFunc != 0 {
			break
		}
		if s, ok := b.Symbol(name); ok {
			m.GoFunc = s.Addr
		}
	}
	if m.GoFunc == 0 {
		if mdErr == nil {
			mdErr = errors.New("moduledata.gofunc is 0")
		}
		m.GoFuncErr = fmt.Errorf("inline tree unavailable: cannot locate go:func.*: %w", mdErr)
	} else if m.GoFuncData, err = b.readToSegmentEnd(m.GoFunc); err != nil {
		m.GoFuncErr = fmt.Errorf("inline tree unavailable: read go:func.* at %#x: %w", m.GoFunc, err)
	}
	t, err := pclntab.Decode(data, b.order, h, m)
	if err != nil {
		return nil, fmt.Errorf("read pclntab at %#x: %w", addr, err)
	}
	return t, nil
}

// findModuledata locates runtime.firstmoduledata by its first field, the
// address of the pcHeader, and checks it against the header's tables. The
// offsets of moduledata's text, gofunc and epclntab fields come from the
// generated table of the binary's Go release (they moved in Go 1.27). A
// layout counts only if its text falls in executable code, its gofunc in
// file-backed data and, where moduledata has it, its epclntab at the end of
// the pclntab. A release outside the table is tried only with the layouts
// that have epclntab: without that check a wrong layout could pass.
func (b *Binary) findModuledata(pcln uint64, h *pclntab.Header, pclnLen uint64) (moduleInfo, error) {
	const ptr = 8
	layouts := b.moduleLayouts(h)
	size := uint64(18 * ptr) // the words checked below
	for _, ml := range layouts {
		size = max(size, uint64(max(ml.Text, ml.GoFunc, ml.EPclntab)+ptr)) // Missing is -1
	}
	check := func(r region, addr uint64) (moduleInfo, bool) {
		if !r.holds(addr, size) {
			return moduleInfo{}, false
		}
		w := func(off int64) uint64 { return b.pointerAt(r.data, r.addr, addr+uint64(off)) }
		n := func(i int) uint64 { return b.order.Uint64(r.data[addr-r.addr+uint64(i*ptr):]) }
		if w(0) != pcln || w(1*ptr) != pcln+h.TableOffset(0) || w(13*ptr) != pcln+h.TableOffset(4) ||
			w(16*ptr) != pcln+h.TableOffset(4) || n(17) != h.NFunc()+1 {
			return moduleInfo{}, false
		}
		for _, ml := range layouts {
			text, gofunc := w(ml.Text), w(ml.GoFunc)
			if ml.EPclntab != runtimelayout.Missing {
				if end := w(ml.EPclntab); end <= pcln+h.TableOffset(4) || end > pcln+pclnLen {
					continue
				}
			}
			if seg := b.segment(text); seg == nil || seg.Flags&elf.PF_X == 0 {
				continue
			}
			if seg := b.segment(gofunc); seg == nil || gofunc >= seg.Vaddr+seg.Filesz {
				continue
			}
			return moduleInfo{addr: addr, text: text, gofunc: gofunc}, true
		}
		return moduleInfo{}, false
	}
	regions, err := b.moduleCandidates()
	if err != nil {
		return moduleInfo{}, fmt.Errorf("locate moduledata: %w", err)
	}
	var want [8]byte
	b.order.PutUint64(want[:], pcln)
	for _, r := range regions {
		for off := int((ptr - r.addr%ptr) % ptr); off+ptr <= len(r.data); off += ptr {
			if r.data[off] == want[0] && string(r.data[off:off+ptr]) == string(want[:]) {
				if md, ok := check(r, r.addr+uint64(off)); ok {
					return md, nil
				}
			}
		}
	}
	if b.PIE {
		// Relocated data whose file contents were left zero by the linker.
		for addr, addend := range b.relocations() {
			if addend != pcln {
				continue
			}
			for _, r := range regions {
				if md, ok := check(r, addr); ok {
					return md, nil
				}
			}
		}
	}
	if s, ok := b.Symbol("runtime.firstmoduledata"); ok {
		data, err := b.read(s.Addr, size)
		if err == nil {
			if md, ok := check(region{s.Addr, data}, s.Addr); ok {
				return md, nil
			}
		}
	}
	return moduleInfo{}, errors.New("runtime.firstmoduledata not found")
}

// holds reports whether [addr, addr+size) lies inside the region, without
// overflowing on addresses taken from corrupt relocations.
func (r region) holds(addr, size uint64) bool {
	if addr < r.addr {
		return false
	}
	off := addr - r.addr
	return off <= uint64(len(r.data)) && size <= uint64(len(r.data))-off
}
