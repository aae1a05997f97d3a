// Package measure relates a goroutine snapshot to a trace of the functions its
// goroutines are in: which frame of each goroutine is measured, so that the
// latency printed beside a goroutine is always that of a function on its
// stack, and the row names it.
package measure

import (
	"fmt"
	"strings"
	"time"

	"github.com/gi-debug/gi/inspect"
)

// Program says which functions belong to the program's own code and which
// can be traced.
type Program struct {
	// MainModule is the main module's path from the build info; functions
	// of package main and of packages under this path are the program's own.
	MainModule string
	// Untraceable says why a function cannot carry probes, "" when it can
	// (nil: every function can).
	Untraceable func(function string) string
}

// Own reports whether function belongs to the program's main module.
func (p Program) Own(function string) bool {
	pkg := inspect.PackageOf(function)
	if pkg == "main" {
		return true
	}
	m := p.MainModule
	return m != "" && m != "command-line-arguments" && (pkg == m || strings.HasPrefix(pkg, m+"/"))
}

func (p Program) traceable(function string) bool {
	return p.Untraceable == nil || p.Untraceable(function) == ""
}

// unmeasured returns, for a goroutine none of whose frames can be traced,
// the frame its row stands for (the innermost code frame of the program's
// own code, else the innermost code frame, else its location) and why it
// cannot be traced.
func (p Program) unmeasured(g *inspect.Goroutine) (inspect.Frame, string) {
	code := g.CodeFrames()
	for _, f := range code {
		if p.Own(f.Function) {
			return f, p.Untraceable(f.Function)
		}
	}
	if len(code) > 0 {
		return code[0], p.Untraceable(code[0].Function)
	}
	at, _ := g.Location()
	return at, "runtime internals are not traced"
}

// MeasuredFrames returns the frames of g whose functions are traced,
// innermost first: the measured frame, the innermost code frame of the
// program's own code (its main module) that can be traced, or else the
// innermost traceable code frame, never a runtime internal (its caller is
// taken instead), followed by up to depth-1 traceable code frames above it.
// Code frames are the goroutine's visible, non-inlined frames outside the
// runtime's plumbing: an inlined call has no code of its own to probe, so
// its physical function stands for it. Empty when no frame can be traced.
func (p Program) MeasuredFrames(g *inspect.Goroutine, depth int) []inspect.Frame {
	code := g.CodeFrames()
	first := -1
	for i, f := range code {
		if p.Own(f.Function) && p.traceable(f.Function) {
			first = i
			break
		}
	}
	if first < 0 {
		for i, f := range code {
			if p.traceable(f.Function) {
				first = i
				break
			}
		}
	}
	if first < 0 {
		return nil
	}
	out := []inspect.Frame{code[first]}
	for _, f := range code[first+1:] {
		if len(out) >= depth {
			break
		}
		if p.traceable(f.Function) {
			out = append(out, f)
		}
	}
	return out
}

// Group is goroutines in the same state whose measured function (or, where
// none of their frames can be traced, whose location) is the same: one row
// of gi top.
type Group struct {
	State string
	// Function is the measured function, "" when no frame can be traced.
	Function string
	// At is the measured frame of the first member, or its location when
	// nothing can be traced.
	At         inspect.Frame
	Goroutines []*inspect.Goroutine
	// MaxWait is the longest known wait among the members.
	MaxWait time.Duration
	// WaitingOn is what the members wait on when they all wait on the
	// same, else how many objects (inspect.GroupWaitingOn).
	WaitingOn string
}

// Group folds the non-system goroutines of gs by state and measured
// function, in the order they first appear.
func (p Program) Group(gs []*inspect.Goroutine) []*Group {
	return p.group(gs, false)
}

// GroupByObject folds them by the object they wait on instead (the first,
// for a select): every goroutine queued on one channel or mutex is one
// group whatever its function; goroutines that wait on nothing with an
// address (sleeps, unknown objects) are folded by state and function.
func (p Program) GroupByObject(gs []*inspect.Goroutine) []*Group {
	return p.group(gs, true)
}

func (p Program) group(gs []*inspect.Goroutine, byObject bool) []*Group {
	index := map[string]*Group{}
	var out []*Group
	for _, g := range gs {
		if g.System {
			continue
		}
		at, _ := g.Location()
		fn := ""
		if m := p.MeasuredFrames(g, 1); len(m) > 0 {
			at, fn = m[0], m[0].Function
		}
		key := g.State + "\x00" + at.Function
		if byObject && len(g.WaitingOn) > 0 && g.WaitingOn[0].Addr != 0 {
			o := g.WaitingOn[0]
			key = fmt.Sprintf("object\x00%s\x00%#x\x00%s", o.Kind, o.Addr, o.Unknown)
		}
		gr := index[key]
		if gr == nil {
			gr = &Group{State: g.State, Function: fn, At: at}
			index[key] = gr
			out = append(out, gr)
		}
		gr.Goroutines = append(gr.Goroutines, g)
		if g.WaitKnown && g.Wait > gr.MaxWait {
			gr.MaxWait = g.Wait
		}
	}
	for _, gr := range out {
		gr.WaitingOn, _ = inspect.GroupWaitingOn(gr.Goroutines)
	}
	return out
}
