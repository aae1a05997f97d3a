// Package report holds the documents gi prints as JSON: one typed model per
// output, built from what the library packages produce (inspect snapshots,
// the link's latencies) and serialised in one place.
package report

import (
	"encoding/json"
	"io"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/link"
)

// Ps is the document `gi ps --json` prints.
type Ps struct {
	PID int `json:"pid"`
	// NSPid is the pid inside the process's own PID namespace.
	NSPid     int      `json:"ns_pid"`
	GoVersion string   `json:"go_version"`
	PauseNS   int64    `json:"pause_ns"`
	Warnings  []string `json:"warnings,omitempty"`
	// TraceWindow is set by `gi ps --trace`.
	TraceWindow *link.Window `json:"trace_window,omitempty"`
	Goroutines  []*Goroutine `json:"goroutines"`
}

// Goroutine is one goroutine in a Ps document.
type Goroutine struct {
	Goid           uint64            `json:"goid"`
	State          string            `json:"state"`
	WaitReason     string            `json:"wait_reason"`
	WaitNS         int64             `json:"wait_ns"`
	Function       string            `json:"function"`
	File           string            `json:"file"`
	Line           int               `json:"line"`
	StartFunction  string            `json:"start_function"`
	CreatedBy      *CreatedBy        `json:"created_by"`
	Labels         map[string]string `json:"labels"`
	ThreadID       int               `json:"thread_id"`
	HostThreadID   int               `json:"host_thread_id,omitempty"`
	LockedToThread bool              `json:"locked_to_thread"`
	System         bool              `json:"system"`
	Frames         []Frame           `json:"frames"`
	Truncated      bool              `json:"truncated,omitempty"`
	Problem        string            `json:"problem,omitempty"`
	// Trace is set by `gi ps --trace`: the latency of the goroutine's
	// measured function.
	Trace *link.Latency `json:"trace,omitempty"`
}

// CreatedBy names the go statement that created a goroutine.
type CreatedBy struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Goid     uint64 `json:"goid"`
}

// Frame is one frame of a Goroutine.
type Frame struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	PC       uint64 `json:"pc"`
	Inlined  bool   `json:"inlined"`
}

// PsGroups is the document `gi ps --group --json` prints.
type PsGroups struct {
	PID         int          `json:"pid"`
	GoVersion   string       `json:"go_version"`
	PauseNS     int64        `json:"pause_ns"`
	TraceWindow *link.Window `json:"trace_window,omitempty"`
	Groups      []*Group     `json:"groups"`
}

// Group is one entry of a PsGroups document: goroutines with the same
// state and stack, shown through a representative.
type Group struct {
	Count     int        `json:"count"`
	State     string     `json:"state"`
	MinWaitNS int64      `json:"min_wait_ns"`
	MaxWaitNS int64      `json:"max_wait_ns"`
	Goids     []uint64   `json:"goids"`
	Goroutine *Goroutine `json:"goroutine"`
	// Stuck counts the members that sat in one call for the whole --trace window.
	Stuck int `json:"stuck,omitempty"`
}

// NewPs builds the document for goroutines gs of snap. allFrames keeps the
// frames the runtime's own dump elides; res, if not nil, adds the latencies
// of a `gi ps --trace` window.
func NewPs(snap *inspect.Snapshot, gs []*inspect.Goroutine, allFrames bool, res *link.Result) *Ps {
	out := &Ps{
		PID:        snap.PID,
		NSPid:      snap.NSPid,
		GoVersion:  snap.GoVersion,
		PauseNS:    snap.Pause.Nanoseconds(),
		Warnings:   snap.Warnings,
		Goroutines: make([]*Goroutine, 0, len(gs)),
	}
	if res != nil {
		out.TraceWindow = &res.Window
	}
	for _, g := range gs {
		jg := newGoroutine(g, allFrames)
		if res != nil {
			jg.Trace = res.ByGoid[g.ID]
		}
		out.Goroutines = append(out.Goroutines, jg)
	}
	return out
}

// NewPsGroups builds the document for groups of snap's goroutines, with the
// group latencies of res when not nil.
func NewPsGroups(snap *inspect.Snapshot, groups []*inspect.Group, allFrames bool, res *link.Result) *PsGroups {
	out := &PsGroups{PID: snap.PID, GoVersion: snap.GoVersion, PauseNS: snap.Pause.Nanoseconds()}
	if res != nil {
		out.TraceWindow = &res.Window
	}
	for _, gr := range groups {
		rep := gr.Representative()
		jg := &Group{Count: len(gr.Goroutines), State: gr.State, MinWaitNS: gr.MinWait.Nanoseconds(), MaxWaitNS: gr.MaxWait.Nanoseconds(), Goroutine: newGoroutine(rep, allFrames)}
		for _, g := range gr.Goroutines {
			jg.Goids = append(jg.Goids, g.ID)
		}
		if res != nil {
			if l, stuck, ok := res.GroupLatency(rep, gr.Goroutines); ok {
				jg.Goroutine.Trace, jg.Stuck = &l, stuck
			}
		}
		out.Groups = append(out.Groups, jg)
	}
	return out
}

func newGoroutine(g *inspect.Goroutine, allFrames bool) *Goroutine {
	jg := &Goroutine{
		Goid:           g.ID,
		State:          g.Status,
		WaitReason:     g.WaitReason,
		StartFunction:  g.StartFunction,
		Labels:         g.Labels,
		ThreadID:       g.ThreadID,
		HostThreadID:   g.HostThreadID,
		LockedToThread: g.LockedToThread,
		System:         g.System,
		Truncated:      g.Truncated,
		Problem:        g.Problem,
		Frames:         []Frame{},
	}
	if jg.Labels == nil {
		jg.Labels = map[string]string{}
	}
	if g.WaitKnown {
		jg.WaitNS = g.Wait.Nanoseconds()
	}
	if loc, ok := g.Location(); ok {
		jg.Function, jg.File, jg.Line = loc.Function, loc.File, loc.Line
	}
	if c := g.CreatedBy; c != nil {
		jg.CreatedBy = &CreatedBy{Function: c.Function, File: c.File, Line: c.Line, Goid: g.ParentID}
	}
	for _, f := range g.Frames {
		if f.Elided && !allFrames {
			continue
		}
		jg.Frames = append(jg.Frames, Frame{Function: f.Function, File: f.File, Line: f.Line, PC: f.PC, Inlined: f.Inlined})
	}
	return jg
}

// Write writes doc as one indented JSON document.
func Write(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
