package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/inspect"
)

// maxListing bounds the bytes of a saved listing ReadPs reads.
const maxListing = 4 << 30

// ReadPs reads back a `gi ps --json` document saved earlier, as the
// snapshot gi ps --since compares with: the goroutines with their ids,
// g addresses, stack pointers, states, waits, frames and creators (what
// inspect.Compare reads), and when it was taken.
func ReadPs(r io.Reader) (*inspect.Snapshot, error) {
	var doc Ps
	dec := json.NewDecoder(io.LimitReader(r, maxListing))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a gi ps --json document: %w", err)
	}
	if doc.GoVersion == "" || doc.Goroutines == nil {
		return nil, errors.New("not a gi ps --json document: no go_version or goroutines")
	}
	if doc.TakenUnixNS == 0 {
		return nil, errors.New("the listing says no time it was taken (a core's, or an older gi's)")
	}
	snap := &inspect.Snapshot{PID: doc.PID, NSPid: doc.NSPid, GoVersion: doc.GoVersion, Origin: doc.Origin, Taken: time.Unix(0, doc.TakenUnixNS)}
	for i, jg := range doc.Goroutines {
		if jg == nil {
			return nil, fmt.Errorf("goroutine %d of the listing is null", i)
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(jg.Addr, "0x"), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("goroutine %d: addr %q: the listing was written by an older gi, or is not gi's", jg.Goid, jg.Addr)
		}
		g := &inspect.Goroutine{ID: jg.Goid, Addr: addr, SP: jg.SP, Status: jg.State, WaitReason: jg.WaitReason, WaitSince: jg.WaitSince,
			Transitions: jg.Transitions, System: jg.System, State: jg.State, Leaked: jg.Leaked}
		if jg.WaitReason != "" {
			g.State = jg.WaitReason
		}
		if c := jg.CreatedBy; c != nil {
			g.CreatedBy = &inspect.Frame{Function: c.Function, File: c.File, Line: c.Line}
			g.ParentID = c.Goid
		}
		for _, f := range jg.Frames {
			g.Frames = append(g.Frames, inspect.Frame{Function: f.Function, File: f.File, Line: f.Line, PC: f.PC, Inlined: f.Inlined})
		}
		snap.Goroutines = append(snap.Goroutines, g)
	}
	return snap, nil
}
