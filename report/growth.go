package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/gi-debug/gi/inspect"
)

// Growth is the document `gi ps --watch --json` prints at each interval
// (one line each) and `gi ps --since FILE --json` once: how the
// goroutines grew since the first snapshot.
type Growth struct {
	PID int `json:"pid"`
	// SinceNS is the time since the first snapshot; Before and After
	// count the goroutines (system ones aside) then and now, Unmoved
	// those that have not moved since.
	SinceNS int64 `json:"since_ns"`
	Before  int   `json:"before"`
	After   int   `json:"after"`
	Unmoved int   `json:"unmoved"`
	// Sites are the go statements goroutines were created at, most
	// grown first; Stacks the states and stacks they are in.
	Sites  []SiteGrowth  `json:"sites"`
	Stacks []StackGrowth `json:"stacks"`
	// UnmovedGoids are the goroutines that have not moved, at most 1000.
	UnmovedGoids []uint64 `json:"unmoved_goids"`
}

// SiteGrowth is one go statement's goroutines then and now.
type SiteGrowth = GroupGrowth

// StackGrowth is one state and stack's goroutines then and now.
type StackGrowth struct {
	State string `json:"state"`
	GroupGrowth
	Goid uint64 `json:"goid"`
}

// GroupGrowth is a group's place (its go statement, or its stack's
// innermost frame) and its goroutines then and now, with the rate.
type GroupGrowth struct {
	Function string  `json:"function"`
	File     string  `json:"file"`
	Line     int     `json:"line"`
	Before   int     `json:"before"`
	After    int     `json:"after"`
	Unmoved  int     `json:"unmoved"`
	PerSec   float64 `json:"per_sec"`
}

// maxUnmovedGoids bounds the goroutine ids a Growth document lists.
const maxUnmovedGoids = 1000

// NewGrowth builds the document of g, a growth of process pid's
// goroutines, its sites and stacks up to limit each (0: all).
func NewGrowth(pid int, g *inspect.Growth, limit int) *Growth {
	out := &Growth{PID: pid, SinceNS: g.Interval.Nanoseconds(), Before: g.Before, After: g.After, Unmoved: len(g.Unmoved),
		Sites: []SiteGrowth{}, Stacks: []StackGrowth{}, UnmovedGoids: []uint64{}}
	rate := func(delta int) float64 {
		if g.Interval <= 0 {
			return 0
		}
		return float64(delta) / g.Interval.Seconds()
	}
	for i, s := range g.Sites {
		if limit > 0 && i == limit {
			break
		}
		out.Sites = append(out.Sites, SiteGrowth{Function: s.Function, File: s.File, Line: s.Line,
			Before: s.Before, After: s.After, Unmoved: s.Unmoved, PerSec: rate(s.Delta())})
	}
	for i, s := range g.Stacks {
		if limit > 0 && i == limit {
			break
		}
		r := s.Representative
		st := StackGrowth{State: r.State, Goid: r.ID,
			GroupGrowth: GroupGrowth{Before: s.Before, After: s.After, Unmoved: s.Unmoved, PerSec: rate(s.Delta())}}
		if loc, ok := r.Location(); ok {
			st.Function, st.File, st.Line = loc.Function, loc.File, loc.Line
		}
		out.Stacks = append(out.Stacks, st)
	}
	for i, u := range g.Unmoved {
		if i == maxUnmovedGoids {
			break
		}
		out.UnmovedGoids = append(out.UnmovedGoids, u.ID)
	}
	return out
}

// WriteLine writes doc as one line of JSON (gi ps --watch --json: a line
// per interval).
func WriteLine(w io.Writer, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode document: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
