package trace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gi-debug/gi/dwarfx"
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
	File    string
	Line    int
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
// are listed in Untraceable with the reason.
func Select(bin *dwarfx.Binary, include, exclude []Pattern) (*Selection, error) {
	sel := &Selection{}
	seen := map[string]bool{}
	for _, f := range bin.Lines.Funcs() {
		if seen[f.Name] || !matchAny(include, f.Name) || matchAny(exclude, f.Name) {
			continue
		}
		seen[f.Name] = true
		if reason := refuse(f); reason != "" {
			sel.Untraceable = append(sel.Untraceable, Untraceable{f.Name, reason})
			continue
		}
		code := make([]byte, f.End-f.Entry)
		if _, err := bin.ReadAt(code, f.Entry); err != nil {
			sel.Untraceable = append(sel.Untraceable, Untraceable{f.Name, fmt.Sprintf("read code: %v", err)})
			continue
		}
		sites, err := dwarfx.FindProbeSites(bin.File.Machine, code, f.Entry)
		if err != nil {
			reason := err.Error()
			if errors.Is(err, dwarfx.ErrNoReturn) {
				reason = "no RET instruction (never returns, or ends in a tail jump): return probes impossible"
			}
			sel.Untraceable = append(sel.Untraceable, Untraceable{f.Name, reason})
			continue
		}
		fn := &Function{Index: len(sel.Functions), Name: f.Name, Entry: f.Entry, End: f.End, EntrySite: sites.Entry, Returns: sites.Returns}
		if file, line, err := bin.Lines.FileLine(f, f.Entry); err == nil {
			fn.File, fn.Line = file, line
		}
		sel.Functions = append(sel.Functions, fn)
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

func matchAny(ps []Pattern, name string) bool {
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// funcFlagAsm is abi.FuncFlagAsm: the function is written in assembly.
const funcFlagAsm = 1 << 2

// refuse says why a function must not be probed, or "".
func refuse(f *dwarfx.Func) string {
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
