// Package report holds the documents gi prints as JSON: one typed model per
// output, built from what the library packages produce (inspect snapshots,
// the measured latencies) and serialised in one place.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
)

// Ps is the document `gi ps --json` prints.
type Ps struct {
	PID int `json:"pid"`
	// NSPid is the pid inside the process's own PID namespace.
	NSPid     int    `json:"ns_pid"`
	GoVersion string `json:"go_version"`
	PauseNS   int64  `json:"pause_ns"`
	// TakenUnixNS is when the process was stopped (0 for a core file).
	TakenUnixNS int64 `json:"taken_unix_ns,omitempty"`
	// Origin names the core file a listing was read from (inspect.Snapshot.Origin).
	Origin   string   `json:"origin,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// TraceWindow is set by `gi ps --trace`.
	TraceWindow *measure.Window `json:"trace_window,omitempty"`
	// Leaks is set by `gi ps --leaks`.
	Leaks *Leaks `json:"leaks,omitempty"`
	// Deadlocks are the cycles of goroutines each waiting for a lock the
	// next holds (each member's deferred unlock pending).
	Deadlocks  []Deadlock   `json:"deadlocks,omitempty"`
	Goroutines []*Goroutine `json:"goroutines"`
}

// Leaks is what `gi ps --leaks` decided: how, at what cost, and the
// leaked goroutines by creation site.
type Leaks struct {
	// Mode says how pointers were found (leak.Result.Mode).
	Mode string `json:"mode"`
	// Leaked counts the leaked goroutines (each is marked "leaked"),
	// Candidates those blocked on channels and sync objects judged.
	Leaked     int `json:"leaked"`
	Candidates int `json:"candidates"`
	// Undecided says why reachability could not be decided: only the
	// goroutines leaked by definition are marked then.
	Undecided string `json:"undecided,omitempty"`
	// CaptureNS is the time spent copying the heap and the globals
	// (part of the pause unless Frozen); WalkNS the walk's time, after the stop; HeapBytes
	// the bytes of heap spans copied; MarkedObjects the objects found
	// reachable.
	CaptureNS     int64 `json:"capture_ns"`
	WalkNS        int64 `json:"walk_ns"`
	HeapBytes     int64 `json:"heap_bytes"`
	MarkedObjects int   `json:"marked_objects"`
	// PreCopyNS is how long the heap was copied before the stop, while
	// the process ran, RewrittenPages the pages it wrote since, read
	// again in the stop; InStop, when set, says why the heap was copied
	// in the stop instead.
	PreCopyNS      int64  `json:"precopy_ns"`
	RewrittenPages int    `json:"rewritten_pages"`
	InStop         string `json:"in_stop,omitempty"`
	// Frozen says everything was read from a copy the process made of
	// itself in the stop, after it resumed (CaptureNS is then not part
	// of the pause); ReapPauseNS is how long the process was stopped
	// again to reap the copy.
	Frozen      bool  `json:"frozen,omitempty"`
	ReapPauseNS int64 `json:"reap_pause_ns,omitempty"`
	// Sites are the leaked goroutines by the go statement that created
	// them, most first.
	Sites []LeakSite `json:"sites"`
}

// LeakSite is a go statement and how many of the goroutines it
// created are leaked.
type LeakSite struct {
	Function string   `json:"function"`
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Count    int      `json:"count"`
	Goids    []uint64 `json:"goids"`
}

// Goroutine is one goroutine in a Ps document.
type Goroutine struct {
	Goid uint64 `json:"goid"`
	// Addr is the runtime.g's address; SP the stack pointer its stack
	// was unwound from; WaitSince the runtime's clock when its wait
	// began (0: not stamped yet); Transitions the times it stopped
	// running, modulo 256: what tells a goroutine that has not moved
	// between two listings (gi ps --since).
	Addr           string            `json:"addr"`
	SP             uint64            `json:"sp"`
	WaitSince      int64             `json:"wait_since"`
	Transitions    uint8             `json:"transitions"`
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
	// WaitingOn lists the objects a blocked goroutine waits on (several
	// for a select).
	WaitingOn []WaitObject `json:"waiting_on,omitempty"`
	// Leaked is set by `gi ps --leaks` on a goroutine nothing that can
	// run will ever wake, LeakedWhy says why.
	Leaked    bool   `json:"leaked,omitempty"`
	LeakedWhy string `json:"leaked_why,omitempty"`
	// Deadlocked is set on a member of a deadlock (Ps.Deadlocks).
	Deadlocked bool `json:"deadlocked,omitempty"`
	// Trace is set by `gi ps --trace`: the latency of the goroutine's
	// measured function.
	Trace *measure.Latency `json:"trace,omitempty"`
}

// WaitObject is one object a goroutine waits on.
type WaitObject struct {
	// Kind is chan, mutex, rwmutex, waitgroup, cond, sema, timer or fd.
	Kind string `json:"kind"`
	// Addr is the object's address as the target prints it with %p.
	Addr string `json:"addr"`
	Name string `json:"name,omitempty"`
	Type string `json:"type,omitempty"`
	// Dir is send or recv on a channel, read or write on a RWMutex.
	Dir string `json:"dir,omitempty"`
	// Channels.
	Len       *uint64 `json:"len,omitempty"`
	Cap       *uint64 `json:"cap,omitempty"`
	Closed    *bool   `json:"closed,omitempty"`
	Receivers *int    `json:"receivers,omitempty"`
	Senders   *int    `json:"senders,omitempty"`
	// Sync objects.
	Locked   *bool  `json:"locked,omitempty"`
	Starving *bool  `json:"starving,omitempty"`
	Readers  *int32 `json:"readers,omitempty"`
	Counter  *int32 `json:"counter,omitempty"`
	Waiters  *int   `json:"waiters,omitempty"`
	// Holders are the goroutines that hold a mutex or RWMutex by a
	// deferred unlock pending in one of their frames.
	Holders []LockHolder `json:"holders,omitempty"`
	// Suspects, where no holder can be seen, are the goroutines stopped
	// between a Lock and an Unlock of a global mutex in their code (no
	// defer): a guess.
	Suspects []LockHolder `json:"suspects,omitempty"`
	// Descriptors: the number, and a socket's addresses or a file's path;
	// Syscall names the system call a goroutine is blocked in on it.
	FD      *int   `json:"fd,omitempty"`
	Syscall string `json:"syscall,omitempty"`
	Local   string `json:"local,omitempty"`
	Remote  string `json:"remote,omitempty"`
	Path    string `json:"path,omitempty"`
	// WakeInNS is, for a sleep, the time until it ends.
	WakeInNS *int64 `json:"wake_in_ns,omitempty"`
	// Unknown says what could not be learnt.
	Unknown string `json:"unknown,omitempty"`
	// Unreachable is set by `gi ps --leaks` on an object no goroutine
	// that can run reaches.
	Unreachable bool `json:"unreachable,omitempty"`
}

// Deadlock is a cycle of goroutines, each waiting for a lock the next
// holds (the last's held by the first).
type Deadlock struct {
	Members []DeadlockMember `json:"members"`
}

// DeadlockMember is one goroutine of a deadlock: where it waits, and for
// which lock.
type DeadlockMember struct {
	Goid     uint64 `json:"goid"`
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	WaitsFor string `json:"waits_for"`
}

// NewDeadlocks converts a snapshot's deadlocks.
func NewDeadlocks(ds []inspect.Deadlock) []Deadlock {
	var out []Deadlock
	for _, d := range ds {
		var r Deadlock
		for _, m := range d.Members {
			r.Members = append(r.Members, DeadlockMember{Goid: m.Goid, Function: m.Function, File: m.File, Line: m.Line, WaitsFor: m.WaitsFor})
		}
		out = append(out, r)
	}
	return out
}

// LockHolder is a goroutine that holds a lock, and the defer statement
// whose pending unlock says so.
type LockHolder struct {
	Goid     uint64 `json:"goid"`
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	// Read says it holds a RWMutex for reading.
	Read bool `json:"read,omitempty"`
}

// NewWaitObject converts an inspect.WaitObject.
func NewWaitObject(o inspect.WaitObject) WaitObject {
	w := WaitObject{Kind: o.Kind, Addr: fmt.Sprintf("%#x", o.Addr), Name: o.Name, Type: o.Type, Dir: o.Dir, Unknown: o.Unknown, Unreachable: o.Unreachable}
	if c := o.Chan; c != nil {
		w.Len, w.Cap, w.Closed, w.Receivers, w.Senders = &c.Len, &c.Cap, &c.Closed, &c.Receivers, &c.Senders
	}
	if s := o.Sync; s != nil {
		w.Waiters = &s.Waiters
		for _, h := range s.Holders {
			w.Holders = append(w.Holders, LockHolder{Goid: h.Goid, Function: h.Function, File: h.File, Line: h.Line, Read: h.Read})
		}
		for _, h := range s.Suspects {
			w.Suspects = append(w.Suspects, LockHolder{Goid: h.Goid, Function: h.Function, File: h.File, Line: h.Line})
		}
		switch o.Kind {
		case "mutex":
			w.Locked, w.Starving = &s.Locked, &s.Starving
		case "rwmutex":
			w.Locked, w.Readers = &s.Locked, &s.Readers
		case "waitgroup":
			w.Counter = &s.Counter
		}
	}
	if d := o.FD; d != nil {
		w.FD, w.Local, w.Remote, w.Path, w.Syscall = &d.FD, d.Local, d.Remote, d.Path, o.Syscall
	}
	if o.Kind == "timer" && o.Unknown == "" {
		w.WakeInNS = &o.WakeIn
	}
	return w
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
	PID         int             `json:"pid"`
	GoVersion   string          `json:"go_version"`
	PauseNS     int64           `json:"pause_ns"`
	Origin      string          `json:"origin,omitempty"`
	TraceWindow *measure.Window `json:"trace_window,omitempty"`
	Groups      []*Group        `json:"groups"`
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
func NewPs(snap *inspect.Snapshot, gs []*inspect.Goroutine, allFrames bool, res *measure.Result) *Ps {
	out := &Ps{
		PID:       snap.PID,
		NSPid:     snap.NSPid,
		GoVersion: snap.GoVersion,
		PauseNS:   snap.Pause.Nanoseconds(),
		Origin:    snap.Origin,
		Warnings:  snap.Warnings,
		TakenUnixNS: func() int64 {
			if snap.Taken.IsZero() {
				return 0
			}
			return snap.Taken.UnixNano()
		}(),
		Goroutines: make([]*Goroutine, 0, len(gs)),
		Deadlocks:  NewDeadlocks(snap.Deadlocks),
	}
	if res != nil {
		out.TraceWindow = &res.Window
	}
	shared := newSharer()
	for _, g := range gs {
		jg := shared.goroutine(g, allFrames)
		if res != nil {
			jg.Trace = res.ByGoid[g.ID]
		}
		out.Goroutines = append(out.Goroutines, jg)
	}
	return out
}

// NewPsGroups builds the document for groups of snap's goroutines, with the
// group latencies of res when not nil.
func NewPsGroups(snap *inspect.Snapshot, groups []*inspect.Group, allFrames bool, res *measure.Result) *PsGroups {
	out := &PsGroups{PID: snap.PID, GoVersion: snap.GoVersion, PauseNS: snap.Pause.Nanoseconds(), Origin: snap.Origin}
	if res != nil {
		out.TraceWindow = &res.Window
	}
	for _, gr := range groups {
		rep := gr.Representative()
		jg := &Group{Count: len(gr.Goroutines), State: gr.State, MinWaitNS: gr.MinWait.Nanoseconds(), MaxWaitNS: gr.MaxWait.Nanoseconds(), Goroutine: newSharer().goroutine(rep, allFrames)}
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

// sharer builds the document's goroutines, sharing what inspect shares
// between goroutines (frames, creators, what they wait on) instead of
// copying it for each: at 100k goroutines parked in one place the copies
// were most of the document's memory. Nothing shared is written after.
type sharer struct {
	frames   map[sharedList[inspect.Frame]][]Frame
	creators map[*inspect.Frame]*CreatedBy
	waits    map[sharedList[inspect.WaitObject]][]WaitObject
	noLabels map[string]string
}

// sharedList identifies a list inspect may share between goroutines.
type sharedList[T any] struct {
	first *T
	n     int
}

func newSharer() *sharer {
	return &sharer{frames: map[sharedList[inspect.Frame]][]Frame{}, creators: map[*inspect.Frame]*CreatedBy{},
		waits: map[sharedList[inspect.WaitObject]][]WaitObject{}, noLabels: map[string]string{}}
}

func (sh *sharer) goroutine(g *inspect.Goroutine, allFrames bool) *Goroutine {
	jg := &Goroutine{
		Goid:           g.ID,
		Addr:           fmt.Sprintf("%#x", g.Addr),
		SP:             g.SP,
		WaitSince:      g.WaitSince,
		Transitions:    g.Transitions,
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
		Leaked:         g.Leaked || g.Status == "leaked",
		Deadlocked:     g.Deadlocked,
		LeakedWhy:      g.LeakedWhy,
	}
	if jg.Labels == nil {
		jg.Labels = sh.noLabels
	}
	if g.WaitKnown {
		jg.WaitNS = g.Wait.Nanoseconds()
	}
	if loc, ok := g.Location(); ok {
		jg.Function, jg.File, jg.Line = loc.Function, loc.File, loc.Line
	}
	if c := g.CreatedBy; c != nil {
		// The parent's id differs between goroutines of one creator.
		created, ok := sh.creators[c]
		if !ok || created.Goid != g.ParentID {
			created = &CreatedBy{Function: c.Function, File: c.File, Line: c.Line, Goid: g.ParentID}
			sh.creators[c] = created
		}
		jg.CreatedBy = created
	}
	if len(g.WaitingOn) > 0 {
		key := sharedList[inspect.WaitObject]{&g.WaitingOn[0], len(g.WaitingOn)}
		waits, ok := sh.waits[key]
		if !ok {
			for _, o := range g.WaitingOn {
				waits = append(waits, NewWaitObject(o))
			}
			sh.waits[key] = waits
		}
		jg.WaitingOn = waits
	}
	jg.Frames = []Frame{}
	if len(g.Frames) > 0 {
		key := sharedList[inspect.Frame]{&g.Frames[0], len(g.Frames)}
		frames, ok := sh.frames[key]
		if !ok {
			frames = []Frame{}
			for _, f := range g.Frames {
				if f.Elided && !allFrames {
					continue
				}
				frames = append(frames, Frame{Function: f.Function, File: f.File, Line: f.Line, PC: f.PC, Inlined: f.Inlined})
			}
			sh.frames[key] = frames
		}
		jg.Frames = frames
	}
	return jg
}

// Write writes doc as one indented JSON document. A Ps document is
// streamed goroutine by goroutine (WritePs).
func Write(w io.Writer, doc any) error {
	if ps, ok := doc.(*Ps); ok {
		return WritePs(w, ps)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// WritePs writes a Ps document byte for byte as Write's encoder would,
// but one goroutine at a time, each by a hand-written encoder: at 100k
// goroutines encoding/json's reflection and its re-indenting pass cost
// more than the snapshot.
func WritePs(w io.Writer, doc *Ps) error {
	head := *doc
	head.Goroutines = []*Goroutine{}
	b, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return fmt.Errorf("encode gi ps document: %w", err)
	}
	// The empty list is the document's last field: "[]\n}".
	prefix, ok := bytes.CutSuffix(b, []byte("[]\n}"))
	if !ok {
		return fmt.Errorf("encode gi ps document: goroutines is not the last field")
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.Write(prefix)
	if len(doc.Goroutines) == 0 {
		bw.WriteString("[]\n}\n")
		return bw.Flush()
	}
	bw.WriteString("[\n")
	enc := &indented{prefix: "    "}
	for i, g := range doc.Goroutines {
		enc.b = enc.b[:0]
		enc.goroutine(g)
		bw.WriteString("    ")
		bw.Write(enc.b)
		if i < len(doc.Goroutines)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("  ]\n}\n")
	return bw.Flush()
}

// Objects is the document `gi ps --objects --json` prints: the objects
// goroutines wait on, most waiters first.
type Objects struct {
	PID     int             `json:"pid"`
	PauseNS int64           `json:"pause_ns"`
	Origin  string          `json:"origin,omitempty"`
	Objects []*WaitedObject `json:"objects"`
	// Blocked of Goroutines (system ones aside) are waiting: all of them
	// when the program can make no progress on its own.
	Blocked    int      `json:"blocked"`
	Goroutines int      `json:"goroutines"`
	Warnings   []string `json:"warnings,omitempty"`
	// Deadlocks are the cycles of goroutines each waiting for a lock the
	// next holds; Graph is the wait-for graph (goroutines, folded waiters
	// and objects; waits-on and held-by edges).
	Deadlocks []Deadlock `json:"deadlocks,omitempty"`
	Graph     WaitGraph  `json:"graph"`
}

// WaitGraph is the wait-for graph: goroutines (folded by where they wait,
// but for holders and deadlocked ones), the objects they wait on, and
// who holds them; MaxGraphObjects objects at most, the rest cut and
// counted.
type WaitGraph struct {
	Nodes         []GraphNode `json:"nodes"`
	Edges         []GraphEdge `json:"edges"`
	CutObjects    int         `json:"cut_objects,omitempty"`
	CutGoroutines int         `json:"cut_goroutines,omitempty"`
}

// GraphNode is a goroutine ("g29"), a folded group of waiters ("w3") or
// an object ("o0xc000123000").
type GraphNode struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`
	Label string   `json:"label"`
	Goids []uint64 `json:"goids,omitempty"`
	// Count is how many goroutines a group folds.
	Count      int  `json:"count,omitempty"`
	Deadlocked bool `json:"deadlocked,omitempty"`
}

// GraphEdge is From waiting on To ("waits-on") or From held by To
// ("held-by"); Cycle marks an edge of a deadlock's cycle.
type GraphEdge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Cycle bool   `json:"cycle,omitempty"`
}

// NewWaitGraph converts a wait-for graph.
func NewWaitGraph(g *inspect.WaitGraph) WaitGraph {
	out := WaitGraph{Nodes: make([]GraphNode, 0, len(g.Nodes)), Edges: make([]GraphEdge, 0, len(g.Edges)), CutObjects: g.CutObjects, CutGoroutines: g.CutGoroutines}
	for _, n := range g.Nodes {
		out.Nodes = append(out.Nodes, GraphNode{ID: n.ID, Kind: n.Kind, Label: n.Label, Goids: n.Goids, Count: n.Count, Deadlocked: n.Deadlocked})
	}
	for _, e := range g.Edges {
		out.Edges = append(out.Edges, GraphEdge{From: e.From, To: e.To, Kind: e.Kind, Cycle: e.Cycle})
	}
	return out
}

// WaitedObject is one entry of Objects.
type WaitedObject struct {
	Object        WaitObject     `json:"object"`
	Waiters       int            `json:"waiters"`
	BySide        map[string]int `json:"by_side"`
	LongestWaitNS int64          `json:"longest_wait_ns"`
	Goids         []uint64       `json:"goids"`
	// Facts are plain facts that point at a bug ("no goroutine waits to send").
	Facts []string `json:"facts"`
}

// NewObjects builds the document for goroutines gs of snap.
func NewObjects(snap *inspect.Snapshot, gs []*inspect.Goroutine) *Objects {
	out := &Objects{PID: snap.PID, PauseNS: snap.Pause.Nanoseconds(), Origin: snap.Origin, Objects: []*WaitedObject{}, Warnings: snap.Warnings,
		Deadlocks: NewDeadlocks(snap.Deadlocks), Graph: NewWaitGraph(inspect.NewWaitGraph(snap, gs))}
	out.Blocked, out.Goroutines = inspect.AllBlocked(snap.Goroutines)
	for _, wo := range inspect.WaitedObjects(gs) {
		o := &WaitedObject{Object: NewWaitObject(wo.Object), Waiters: len(wo.Goroutines), BySide: map[string]int{},
			LongestWaitNS: wo.LongestWait.Nanoseconds(), Facts: wo.Facts()}
		for d, n := range wo.ByDir {
			if d != "" {
				o.BySide[d] = n
			}
		}
		if o.Facts == nil {
			o.Facts = []string{}
		}
		for _, g := range wo.Goroutines {
			o.Goids = append(o.Goids, g.ID)
		}
		out.Objects = append(out.Objects, o)
	}
	return out
}
