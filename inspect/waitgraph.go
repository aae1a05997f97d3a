package inspect

import (
	"fmt"
	"sort"
	"strconv"
)

// The wait-for graph: goroutines and the objects they wait on, and the
// goroutines that hold those objects (holders.go). A goroutine that holds
// something or is in a deadlock is a node of its own; the other waiters
// of an object are folded by where they wait, so that 100k goroutines
// parked on one channel are one node. The objects with most waiters come
// first, MaxGraphObjects at most (those a deadlock involves first, then
// those a holder does), the rest cut and counted.

// MaxGraphObjects bounds the objects a wait-for graph holds.
const MaxGraphObjects = 200

// GraphNode is a node of the wait-for graph.
type GraphNode struct {
	// ID names the node in the graph: "g29" for a goroutine, "w3" for a
	// folded group of waiters, "o0xc000123000" for an object.
	ID string
	// Kind is "goroutine", "waiters" (goroutines folded) or "object".
	Kind string
	// Label says what it is: "goroutine 29 main.load demo/main.go:77",
	// "200 goroutines at main.worker", "mutex main.cacheMu (locked,
	// 3 waiters)".
	Label string
	// Goids are a goroutine's id, or a group's (the first 20).
	Goids []uint64
	// Count is how many goroutines a group folds.
	Count int
	// Deadlocked marks a goroutine in a deadlock.
	Deadlocked bool
}

// GraphEdge is an edge of the wait-for graph: From waits on To (a
// goroutine or group on an object: "waits-on"), or From is held by To (an
// object by a goroutine: "held-by").
type GraphEdge struct {
	From string
	To   string
	Kind string
	// Cycle marks an edge of a deadlock's cycle.
	Cycle bool
}

// WaitGraph is the wait-for graph of a snapshot.
type WaitGraph struct {
	Nodes []GraphNode
	Edges []GraphEdge
	// CutObjects counts the objects left out past MaxGraphObjects, and
	// CutGoroutines the goroutines that waited on them only.
	CutObjects    int
	CutGoroutines int
}

// maxGroupGoids bounds the ids a folded group lists.
const maxGroupGoids = 20

// NewWaitGraph builds the wait-for graph of gs, of snapshot snap.
func NewWaitGraph(snap *Snapshot, gs []*Goroutine) *WaitGraph {
	objs := WaitedObjects(gs)
	// Holders and deadlock members are nodes of their own.
	single := map[uint64]bool{}
	holdersOf := func(o WaitObject) []Holder {
		if o.Sync == nil {
			return nil
		}
		return o.Sync.Holders
	}
	for _, wo := range objs {
		for _, h := range holdersOf(wo.Object) {
			single[h.Goid] = true
		}
	}
	cycle := map[uint64]bool{}
	type link struct{ from, to uint64 } // goroutine or lock, goroutine or lock
	cycleEdge := map[link]bool{}        // waits-on: goid, lock; held-by: lock, goid
	for _, d := range snap.Deadlocks {
		for k, m := range d.Members {
			single[m.Goid], cycle[m.Goid] = true, true
			next := d.Members[(k+1)%len(d.Members)]
			cycleEdge[link{m.Goid, m.lock}], cycleEdge[link{m.lock, next.Goid}] = true, true
		}
	}
	// The objects kept, MaxGraphObjects at most: those a deadlock
	// involves first, then those with holders or holders among their
	// waiters, then by waiters.
	rank := func(wo *WaitedObject) int {
		for _, g := range wo.Goroutines {
			if cycle[g.ID] {
				return 0
			}
		}
		if len(holdersOf(wo.Object)) > 0 {
			return 1
		}
		for _, g := range wo.Goroutines {
			if single[g.ID] {
				return 1
			}
		}
		return 2
	}
	keep := make([]bool, len(objs))
	kept := 0
	for r := 0; r <= 2; r++ {
		for i, wo := range objs {
			if !keep[i] && kept < MaxGraphObjects && rank(wo) == r {
				keep[i], kept = true, kept+1
			}
		}
	}
	gr := &WaitGraph{Nodes: []GraphNode{}, Edges: []GraphEdge{}}
	byGoid := map[uint64]*Goroutine{}
	for _, g := range gs {
		byGoid[g.ID] = g
	}
	added := map[string]bool{}
	addNode := func(n GraphNode) {
		if !added[n.ID] {
			added[n.ID] = true
			gr.Nodes = append(gr.Nodes, n)
		}
	}
	goroutineNode := func(id uint64) string {
		n := GraphNode{ID: "g" + strconv.FormatUint(id, 10), Kind: "goroutine", Goids: []uint64{id}, Deadlocked: cycle[id]}
		n.Label = fmt.Sprintf("goroutine %d", id)
		if g := byGoid[id]; g != nil {
			if fr := g.waitFrame(); fr != nil {
				n.Label += fmt.Sprintf(" %s %s:%d", fr.Function, ShortPath(fr.File), fr.Line)
			}
		}
		addNode(n)
		return n.ID
	}
	objectID := func(i int, o WaitObject) string {
		if o.Addr != 0 {
			return fmt.Sprintf("o%#x", o.Addr)
		}
		return fmt.Sprintf("o%d", i)
	}
	ids := make([]string, len(objs))
	cut := map[*Goroutine]bool{}
	for i, wo := range objs {
		if !keep[i] {
			gr.CutObjects++
			for _, g := range wo.Goroutines {
				cut[g] = true
			}
			continue
		}
		ids[i] = objectID(i, wo.Object)
		addNode(GraphNode{ID: ids[i], Kind: "object", Label: wo.Object.String()})
	}
	groups := 0
	for i, wo := range objs {
		if !keep[i] {
			continue
		}
		// Waiters: single ones each, the rest folded by where they wait.
		type fold struct {
			where string
			gs    []*Goroutine
		}
		var folds []*fold
		byWhere := map[string]*fold{}
		for _, g := range wo.Goroutines {
			delete(cut, g)
			if single[g.ID] {
				from := goroutineNode(g.ID)
				gr.Edges = append(gr.Edges, GraphEdge{From: from, To: ids[i], Kind: "waits-on", Cycle: cycleEdge[link{g.ID, wo.Object.Addr}]})
				continue
			}
			where := "?"
			if fr := g.waitFrame(); fr != nil {
				where = fr.Function
			}
			f := byWhere[where]
			if f == nil {
				f = &fold{where: where}
				byWhere[where] = f
				folds = append(folds, f)
			}
			f.gs = append(f.gs, g)
		}
		for _, f := range folds {
			if len(f.gs) == 1 {
				from := goroutineNode(f.gs[0].ID)
				gr.Edges = append(gr.Edges, GraphEdge{From: from, To: ids[i], Kind: "waits-on"})
				continue
			}
			groups++
			n := GraphNode{ID: "w" + strconv.Itoa(groups), Kind: "waiters", Count: len(f.gs), Label: fmt.Sprintf("%d goroutines at %s", len(f.gs), f.where)}
			for _, g := range f.gs[:min(len(f.gs), maxGroupGoids)] {
				n.Goids = append(n.Goids, g.ID)
			}
			addNode(n)
			gr.Edges = append(gr.Edges, GraphEdge{From: n.ID, To: ids[i], Kind: "waits-on"})
		}
		for _, h := range holdersOf(wo.Object) {
			to := goroutineNode(h.Goid)
			gr.Edges = append(gr.Edges, GraphEdge{From: ids[i], To: to, Kind: "held-by", Cycle: cycleEdge[link{wo.Object.Addr, h.Goid}]})
		}
	}
	gr.CutGoroutines = len(cut)
	sort.SliceStable(gr.Nodes, func(i, j int) bool { return nodeRank(gr.Nodes[i]) < nodeRank(gr.Nodes[j]) })
	return gr
}

// nodeRank orders nodes: objects, goroutines, folded waiters.
func nodeRank(n GraphNode) int {
	switch n.Kind {
	case "object":
		return 0
	case "goroutine":
		return 1
	}
	return 2
}
