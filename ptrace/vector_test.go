package ptrace_test

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
)

// TestReadVector stops testdata/vecspin, whose spinning thread holds a
// value in a vector register only, and requires Stopped.ReadVector to
// find it in that thread's register set (NT_X86_XSTATE or NT_PRFPREG),
// and a set read for every other thread not in a system call; the
// target runs on after.
func TestReadVector(t *testing.T) {
	targets.RequirePrivilege(t, "stopping another process")
	// No preemption signals: stopped in their handler, the thread's
	// vector registers would be the handler's, its own in the signal
	// frame.
	t.Setenv("GODEBUG", "asyncpreemptoff=1")
	p := targets.Start(t, targets.Build(t, "vecspin", targets.BuildOptions{}))
	var tid int
	var value uint64
	for _, line := range p.Lines() {
		if v, ok := strings.CutPrefix(line, "TID "); ok {
			tid, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "VALUE "); ok {
			value, _ = strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
		}
	}
	if tid == 0 || value == 0 {
		t.Fatalf("no TID or VALUE from the target: %q", p.Lines())
	}
	tr := ptrace.NewTracer()
	defer tr.Close()
	s, err := tr.Stop(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	s.ReadVector()
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	targets.CheckNotStopped(t, p.Pid)
	want := binary.LittleEndian.AppendUint64(nil, value)
	found := false
	for _, th := range s.Threads {
		if th.Regs.Syscall >= 0 && th.TID != tid {
			// In a system call: left without (ReadVector).
			if th.Vector != nil || th.VectorErr != nil {
				t.Errorf("thread %d, in system call %d: vector registers %d bytes, %v", th.TID, th.Regs.Syscall, len(th.Vector), th.VectorErr)
			}
			continue
		}
		if th.VectorErr != nil || len(th.Vector) < 512 || (th.VectorNote != ptrace.NoteX86XState && th.VectorNote != ptrace.NotePRFPREG) {
			t.Errorf("thread %d: vector registers %d bytes (note %#x), %v", th.TID, len(th.Vector), th.VectorNote, th.VectorErr)
			continue
		}
		if th.TID != tid {
			continue
		}
		for off := 0; off+8 <= len(th.Vector); off += 8 {
			if bytes.Equal(th.Vector[off:off+8], want) {
				found = true
				t.Logf("thread %d: %#x at byte %d of its %d bytes of vector registers (note %#x)", tid, value, off, len(th.Vector), th.VectorNote)
			}
		}
		for _, r := range th.Regs.All {
			if r == value {
				t.Errorf("thread %d holds %#x in a general register too: the target does not test what it should", tid, value)
			}
		}
	}
	if !found {
		t.Errorf("%#x not in the vector registers of thread %d", value, tid)
	}
}
