package trace

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/proc"
)

// Symbols resolves addresses of the traced process(es) to functions and lines.
type Symbols struct {
	Lines *pclntab.LineTable

	loadBias func(pid int) (uint64, error)
	bias     map[uint32]uint64
	// args and typesBase name the dynamic types of captured interfaces.
	args      *funcargs.Reader
	typesBase uint64
	// users caches userFunctionAt by link-time address.
	users map[uint64]string
	bin   *elfbin.Binary
}

// NewSymbols returns a resolver for processes running bin.
func NewSymbols(bin *elfbin.Binary) *Symbols {
	return &Symbols{Lines: bin.Lines, bin: bin, loadBias: func(pid int) (uint64, error) { return proc.LoadBias(pid, bin) }, bias: map[uint32]uint64{}}
}

// Bias returns the load bias of process pid (0 unless PIE), read once.
func (s *Symbols) Bias(pid uint32) uint64 {
	b, ok := s.bias[pid]
	if !ok {
		b, _ = s.loadBias(int(pid)) // 0 for a process gone meanwhile
		s.bias[pid] = b
	}
	return b
}

// Values formats what a probe of process pid captured (payload) with c:
// arguments at an entry, results at a return. Nil when nothing was
// captured.
func (s *Symbols) Values(pid uint32, c *funcargs.Capture, payload []byte) []funcargs.Value {
	if c == nil || (payload == nil && len(c.Ops) > 0) {
		return nil
	}
	var types funcargs.TypeResolver
	if s.args != nil && s.typesBase != 0 {
		bias := s.Bias(pid)
		types = func(addr uint64) godwarf.Type {
			if addr < bias+s.typesBase {
				return nil
			}
			return s.args.RuntimeType(addr - bias - s.typesBase)
		}
	}
	return c.Decode(payload, types)
}

// Site describes a code address: function, offset from its entry, file and line.
type Site struct {
	Function string
	Offset   uint64
	File     string
	Line     int
}

// Resolve symbolizes a runtime pc of process pid. For a return address
// (call site), pass returnAddr true: the line is that of the CALL before it.
func (s *Symbols) Resolve(pid uint32, pc uint64, returnAddr bool) Site {
	return s.ResolveLink(pc-s.Bias(pid), returnAddr)
}

// ResolveLink symbolizes a link-time address.
func (s *Symbols) ResolveLink(addr uint64, returnAddr bool) Site {
	f := s.Lines.FuncForPC(addr)
	if f == nil {
		return Site{Function: fmt.Sprintf("%#x", addr)}
	}
	site := Site{Function: f.Name, Offset: addr - f.Entry}
	lookup := addr
	if returnAddr && lookup > f.Entry {
		lookup--
	}
	if frames, err := s.Lines.Frames(f, lookup); err == nil && len(frames) > 0 {
		// The innermost logical frame: where the call is in the source.
		site.File, site.Line = frames[0].File, frames[0].Line
		if len(frames) > 1 {
			site.Function = frames[0].Function
		}
	}
	return site
}

// Header describes a goroutine for the header of its trees.
type Header struct {
	Goid      uint64
	PID       uint32
	CreatedBy Site
	ParentID  uint64
	Labels    map[string]string
	// G is the address of the goroutine's runtime.g when it was first seen.
	G uint64
	// Known is false when nothing could be learnt about the creator.
	Known bool
}

// String renders "goroutine 18 (created by main.serve at main.go:42 in goroutine 7) {worker=w1}".
func (h Header) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "goroutine %d", h.Goid)
	if h.Known && h.CreatedBy.Function != "" {
		fmt.Fprintf(&b, " (created by %s at %s:%d", h.CreatedBy.Function, filepath.Base(h.CreatedBy.File), h.CreatedBy.Line)
		if h.ParentID != 0 {
			fmt.Fprintf(&b, " in goroutine %d", h.ParentID)
		}
		b.WriteString(")")
	}
	if len(h.Labels) > 0 {
		keys := make([]string, 0, len(h.Labels))
		for k := range h.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" {")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k + "=" + h.Labels[k])
		}
		b.WriteString("}")
	}
	return b.String()
}

// Caller returns the innermost function of the return addresses pcs of
// process pid (innermost first) that is not the runtime's, the sync
// packages' or an internal package's: where a goroutine was in its own
// code when it entered them; "" if none is.
func (s *Symbols) Caller(pid uint32, pcs []uint64) string {
	bias := s.Bias(pid)
	for _, pc := range pcs {
		if name := s.userFunctionAt(pc - bias); name != "" {
			return name
		}
	}
	return ""
}

// userFunctionAt returns the innermost function at return address addr
// (link-time) outside the system packages (systemFunction), "" if none.
func (s *Symbols) userFunctionAt(addr uint64) string {
	if name, ok := s.users[addr]; ok {
		return name
	}
	name := ""
	for _, n := range s.functionsAt(addr, nil) {
		if !systemFunction(n) {
			name = n
			break
		}
	}
	if s.users == nil {
		s.users = map[uint64]string{}
	}
	if len(s.users) < 1<<16 {
		s.users[addr] = name
	}
	return name
}

// systemFunction reports whether function name is the runtime's or a
// synchronisation package's, which a goroutine passes through to wake
// another.
func systemFunction(name string) bool {
	for _, p := range []string{"runtime.", "sync.", "sync/atomic.", "internal/", "time.", "iter."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Functions returns the functions of the return addresses pcs of process
// pid (innermost first), inlined ones included, innermost first.
func (s *Symbols) Functions(pid uint32, pcs []uint64) []string {
	bias := s.Bias(pid)
	var out []string
	for _, pc := range pcs {
		out = s.functionsAt(pc-bias, out)
	}
	return out
}

// functionsAt appends to out the functions at return address addr
// (link-time), inlined ones included, innermost first; none if addr is
// in no function.
func (s *Symbols) functionsAt(addr uint64, out []string) []string {
	f := s.Lines.FuncForPC(addr)
	if f == nil {
		return out
	}
	frames, err := s.Lines.Frames(f, addr-1)
	if err != nil || len(frames) == 0 {
		return append(out, f.Name)
	}
	for _, fr := range frames {
		out = append(out, fr.Function)
	}
	return out
}

// Global names the global variable holding runtime address addr of
// process pid ("main.cacheMu", "main.srv+16" inside one), "" if none does.
func (s *Symbols) Global(pid uint32, addr uint64) string {
	bias := s.Bias(pid)
	if s.bin == nil || addr < bias {
		return ""
	}
	return s.bin.GlobalName(addr - bias)
}
