package trace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/pclntab"
)

// Function is a traceable function and where its probes go.
type Function struct {
	Index int
	Name  string
	// Entry and End bound the function (link-time addresses).
	Entry, End uint64
	// EntrySite is where the entry probe goes: past the stack-check prologue.
	EntrySite uint64
	// Returns lists every RET instruction.
	Returns []uint64
	// EntryOnly marks a function without a RET (a worker loop, a function
	// that always panics or exits): only its entry is probed. Its calls
	// end when a panic or runtime.Goexit unwinds them, or are still
	// running when the trace ends.
	EntryOnly bool
	// Sampled marks a function traced in sampling windows, to keep the
	// overhead within Options.MaxOverhead: its calls are reported whole
	// when they begin in a window, not at all otherwise.
	Sampled bool
	File    string
	Line    int
	// Args and Results say what the entry and return probes capture of
	// the arguments and results (nil: nothing; see Options.Args).
	Args, Results *funcargs.Capture
	// where is the --where filter on the function's calls.
	where Where
	// entryStep is what the entry site's instruction does before a probe
	// there can read float registers (planArgs sets it).
	entryStep SiteStep
}

// Untraceable is a function a pattern matched that cannot be probed, and why.
type Untraceable struct {
	Name   string
	Reason string
}

// Selection is the result of matching patterns against a binary.
type Selection struct {
	Functions   []*Function
	Untraceable []Untraceable
}

// ErrNoMatch is returned when the patterns match no function at all.
var ErrNoMatch = errors.New("pattern matches no function")

// Select finds the functions of bin matching any of include and none of
// exclude, and computes their probe sites. Functions that cannot be probed
// are listed in Untraceable with the reason. A function without a RET is
// selected with EntryOnly set.
func Select(bin *elfbin.Binary, include, exclude []Pattern) (*Selection, error) {
	return NewSites(bin).Select(include, exclude)
}

// matchFuncs returns the functions of bin matching any of include and none
// of exclude, each name once, in the function table's order.
func matchFuncs(bin *elfbin.Binary, include, exclude []Pattern) []*pclntab.Func {
	var out []*pclntab.Func
	seen := map[string]bool{}
	for _, f := range bin.Lines.Funcs() {
		if seen[f.Name] || !matchAny(include, f.Name) || matchAny(exclude, f.Name) {
			continue
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	return out
}

// maxRestartSequences bounds how many adjacent restartable sequences the
// entry site is moved past (one in every arm64 prologue seen).
const maxRestartSequences = 4

// pastRestartSequences moves an entry site out of a restartable instruction
// sequence (arm64: MOVD $frame, R27; SUB R27, RSP, R20 after the stack
// check of a frame between 4 and 64 KiB). A preemption signal is held back
// until the probed instruction's single-step is over and so lands right
// after it; inside such a sequence the runtime resumes the goroutine at
// the sequence's start, the probe fires again and one call is seen
// entered twice. The sequence only computes the frame's address into
// temporaries: past it, the arguments are where they were.
func pastRestartSequences(bin *elfbin.Binary, f *pclntab.Func, site uint64) (uint64, error) {
	for range maxRestartSequences {
		end, ok, err := bin.Lines.RestartSequence(f, site)
		if err != nil {
			return 0, fmt.Errorf("entry site: %w", err)
		}
		if !ok {
			return site, nil
		}
		if end >= f.End {
			return 0, fmt.Errorf("entry site %#x: in a restartable sequence up to the function's end", site)
		}
		site = end
	}
	return 0, fmt.Errorf("entry site %#x: more than %d restartable sequences in a row", site, maxRestartSequences)
}

// selectChunk is how many functions one decoding goroutine takes.
const selectChunk = 256

// selectMatched makes the selection of the matched functions, in their
// order, their probe sites decoded (on parallel goroutines) unless known.
// Each selected Function is the selection's own copy.
func (s *Sites) selectMatched(matched []*pclntab.Func, include []Pattern) (*Selection, error) {
	outcomes := s.outcomes(matched)
	sel := &Selection{}
	for i, o := range outcomes {
		if o.fn == nil {
			sel.Untraceable = append(sel.Untraceable, Untraceable{matched[i].Name, o.reason})
			continue
		}
		fn := *o.fn
		fn.Index = len(sel.Functions)
		sel.Functions = append(sel.Functions, &fn)
	}
	sort.Slice(sel.Untraceable, func(i, j int) bool { return sel.Untraceable[i].Name < sel.Untraceable[j].Name })
	if len(sel.Functions) == 0 && len(sel.Untraceable) == 0 {
		names := make([]string, len(include))
		for i, p := range include {
			names[i] = p.String()
		}
		return nil, fmt.Errorf("%w: %s", ErrNoMatch, strings.Join(names, " "))
	}
	return sel, nil
}

// probeFunction decodes f's probe sites: the function (its Index unset), or
// why it cannot be traced.
func probeFunction(bin *elfbin.Binary, f *pclntab.Func) (*Function, string) {
	if reason := refuse(f); reason != "" {
		return nil, reason
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := bin.ReadAt(code, f.Entry); err != nil {
		return nil, fmt.Sprintf("read code: %v", err)
	}
	sites, err := FindProbeSites(bin.File.Machine, code, f.Entry)
	entryOnly := errors.Is(err, ErrNoReturn) && sites.Entry != 0
	if err != nil && !entryOnly {
		return nil, err.Error()
	}
	if sites.Entry, err = pastRestartSequences(bin, f, sites.Entry); err != nil {
		return nil, err.Error()
	}
	fn := &Function{Name: f.Name, Entry: f.Entry, End: f.End, EntrySite: sites.Entry, Returns: sites.Returns, EntryOnly: entryOnly}
	if file, line, err := bin.Lines.FileLine(f, f.Entry); err == nil {
		fn.File, fn.Line = file, line
	}
	if entryOnly {
		if reason := refuseEntryOnly(bin, f, fn.File); reason != "" {
			return nil, reason
		}
	}
	return fn, ""
}

func matchAny(ps []Pattern, name string) bool {
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// refuseEntryOnly says why a function without a RET must not be traced at
// its entry alone, or "". Go code without a RET never returns; a compiler
// wrapper or C code (linked in by cgo, no Go line table) without one ends
// in a tail jump: it does return, through the RET of the function it jumps
// to, so its calls would never end and their frame would be taken for
// that function's.
func refuseEntryOnly(bin *elfbin.Binary, f *pclntab.Func, file string) string {
	switch {
	case f.FuncID == bin.Lines.WrapperFuncID() || file == "<autogenerated>":
		return "no RET instruction (a wrapper ending in a tail jump): return probes impossible"
	case file == "":
		return "no RET instruction and no Go line table (C code ending in a tail jump?): return probes impossible"
	}
	return ""
}

// funcFlagAsm is abi.FuncFlagAsm: the function is written in assembly.
const funcFlagAsm = 1 << 2

// refuse says why a function must not be probed, or "".
func refuse(f *pclntab.Func) string {
	switch {
	case f.Flag&funcFlagAsm != 0:
		return "assembly function: no register ABI, the goroutine cannot be identified"
	case strings.HasPrefix(f.Name, "runtime.") || strings.HasPrefix(f.Name, "internal/runtime/") ||
		strings.HasPrefix(f.Name, "runtime/internal/") || f.Name == "runtime":
		// The runtime runs on system stacks, inside signal handlers and
		// with preemption off: a probe there can fire with no goroutine,
		// and tracing it would trace the tracer's own machinery.
		return "runtime internals are not traced"
	case strings.HasPrefix(f.Name, "type:") || strings.HasPrefix(f.Name, "go:") || strings.HasPrefix(f.Name, "go."):
		return "compiler-generated helper"
	}
	return ""
}
