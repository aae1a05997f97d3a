package inspect

import (
	"encoding/json"
	"time"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// Phase is one step of a snapshot, measured: its wall time, the CPU time
// and page faults of all of gi's threads meanwhile (getrusage), and the
// reads of the target's memory it made.
type Phase struct {
	// Name is the step: before the stop "tids", "polls", "precopy",
	// "buffers", "handoff"; in it "seize", "wait", "regs"
	// (ptrace.Stopped.Marks),
	// "allgs", "scan" (the g structs read and scanned), "ms" (the m's
	// of goroutines on threads), "stacks", "labels", "waits", "resume";
	// after it "gs" and "decode".
	Name string `json:"name"`
	// InStop is set for the steps taken while the target was stopped.
	InStop bool          `json:"in_stop,omitempty"`
	Wall   time.Duration `json:"wall_ns"`
	User   time.Duration `json:"user_ns"`
	Sys    time.Duration `json:"sys_ns"`
	MinFlt int64         `json:"minflt"`
	MajFlt int64         `json:"majflt"`
	proc.ReadStats
	// End is when the step ended.
	End time.Time `json:"-"`
}

// Phases are a snapshot's steps in order.
type Phases []Phase

// JSON returns the phases as one line of JSON, with the pause, the sum of
// the steps in the stop and when they began and ended (Unix ns): what
// GI_PHASES prints.
func (ps Phases) JSON(pause time.Duration) string {
	var stop Phase
	stop.Name = "stop"
	var from, to int64
	for i, p := range ps {
		if p.InStop {
			if from == 0 && i > 0 {
				from = ps[i-1].End.UnixNano()
			}
			stop.add(p)
			to = p.End.UnixNano()
		}
	}
	b, _ := json.Marshal(struct {
		PauseNS  int64   `json:"pause_ns"`
		FromUnix int64   `json:"stop_from_unix_ns"`
		ToUnix   int64   `json:"stop_to_unix_ns"`
		Stop     Phase   `json:"stop"`
		Phases   []Phase `json:"phases"`
	}{int64(pause), from, to, stop, ps})
	return string(b)
}

func (p *Phase) add(q Phase) {
	p.Wall += q.Wall
	p.User += q.User
	p.Sys += q.Sys
	p.MinFlt += q.MinFlt
	p.MajFlt += q.MajFlt
	p.Readv += q.Readv
	p.Iovecs += q.Iovecs
	p.ReadvBytes += q.ReadvBytes
	p.Preads += q.Preads
	p.PreadBytes += q.PreadBytes
}

// phaseMeter records the phases of one snapshot; a nil meter records
// nothing.
type phaseMeter struct {
	mem    Memory
	last   ptrace.Usage
	reads  proc.ReadStats
	phases Phases
}

// readStats is a Memory that counts its reads (*proc.Memory).
type readStats interface{ Stats() proc.ReadStats }

func newPhaseMeter(mem Memory) *phaseMeter {
	m := &phaseMeter{mem: mem, last: ptrace.SampleUsage()}
	m.reads = m.stats()
	return m
}

func (m *phaseMeter) stats() proc.ReadStats {
	if s, ok := m.mem.(readStats); ok {
		return s.Stats()
	}
	return proc.ReadStats{}
}

// mark ends the step name, begun at the previous mark.
func (m *phaseMeter) mark(name string, inStop bool) {
	if m == nil {
		return
	}
	m.markAt(name, inStop, ptrace.SampleUsage())
}

// markAt ends the step name at u, a sample taken at its end.
func (m *phaseMeter) markAt(name string, inStop bool, u ptrace.Usage) {
	reads := m.stats()
	m.phases = append(m.phases, Phase{
		Name: name, InStop: inStop,
		Wall: u.At.Sub(m.last.At), User: u.User - m.last.User, Sys: u.Sys - m.last.Sys,
		MinFlt: u.MinFlt - m.last.MinFlt, MajFlt: u.MajFlt - m.last.MajFlt,
		ReadStats: reads.Sub(m.reads), End: u.At,
	})
	m.last, m.reads = u, reads
}
