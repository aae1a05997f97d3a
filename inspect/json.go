package inspect

import (
	"encoding/json"
	"io"
)

// JSONSnapshot is the document `gi ps --json` prints.
type JSONSnapshot struct {
	PID int `json:"pid"`
	// NSPid is the pid inside the process's own PID namespace.
	NSPid     int      `json:"ns_pid"`
	GoVersion string   `json:"go_version"`
	PauseNS   int64    `json:"pause_ns"`
	Warnings  []string `json:"warnings,omitempty"`
	// TraceWindow is filled by `gi ps --trace`.
	TraceWindow any              `json:"trace_window,omitempty"`
	Goroutines  []*JSONGoroutine `json:"goroutines"`
}

// JSONGoroutine is one goroutine in a JSONSnapshot.
type JSONGoroutine struct {
	Goid           uint64            `json:"goid"`
	State          string            `json:"state"`
	WaitReason     string            `json:"wait_reason"`
	WaitNS         int64             `json:"wait_ns"`
	Function       string            `json:"function"`
	File           string            `json:"file"`
	Line           int               `json:"line"`
	StartFunction  string            `json:"start_function"`
	CreatedBy      *JSONCreatedBy    `json:"created_by"`
	Labels         map[string]string `json:"labels"`
	ThreadID       int               `json:"thread_id"`
	HostThreadID   int               `json:"host_thread_id,omitempty"`
	LockedToThread bool              `json:"locked_to_thread"`
	System         bool              `json:"system"`
	Frames         []JSONFrame       `json:"frames"`
	Truncated      bool              `json:"truncated,omitempty"`
	Problem        string            `json:"problem,omitempty"`
	// Trace is filled by `gi ps --trace` (see the trace package).
	Trace any `json:"trace,omitempty"`
}

// JSONCreatedBy names the go statement that created a goroutine.
type JSONCreatedBy struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Goid     uint64 `json:"goid"`
}

// JSONFrame is one frame of a JSONGoroutine.
type JSONFrame struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	PC       uint64 `json:"pc"`
	Inlined  bool   `json:"inlined"`
}

// ToJSON converts goroutines to their JSON form. allFrames keeps the frames
// the runtime's own dump elides.
func ToJSON(snap *Snapshot, gs []*Goroutine, allFrames bool) *JSONSnapshot {
	out := &JSONSnapshot{
		PID:        snap.PID,
		NSPid:      snap.NSPid,
		GoVersion:  snap.GoVersion,
		PauseNS:    snap.Pause.Nanoseconds(),
		Warnings:   snap.Warnings,
		Goroutines: make([]*JSONGoroutine, 0, len(gs)),
	}
	for _, g := range gs {
		jg := &JSONGoroutine{
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
			Frames:         []JSONFrame{},
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
			jg.CreatedBy = &JSONCreatedBy{Function: c.Function, File: c.File, Line: c.Line, Goid: g.ParentID}
		}
		for _, f := range g.Frames {
			if f.Elided && !allFrames {
				continue
			}
			jg.Frames = append(jg.Frames, JSONFrame{Function: f.Function, File: f.File, Line: f.Line, PC: f.PC, Inlined: f.Inlined})
		}
		out.Goroutines = append(out.Goroutines, jg)
	}
	return out
}

// WriteJSON writes doc as one indented JSON document.
func WriteJSON(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
