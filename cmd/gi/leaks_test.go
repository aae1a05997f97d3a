package main

import (
	"encoding/json"
	corefile "github.com/gi-debug/gi/core"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// leakyTruth returns the goroutines testdata/leaky says it leaked, and
// how many it parked.
func leakyTruth(t *testing.T, p *targets.Process) (leaked map[uint64]bool, parked int) {
	t.Helper()
	leaked = map[uint64]bool{}
	for _, line := range p.Lines() {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "G" {
			parked++
			if f[3] == "leaked" {
				id, _ := strconv.ParseUint(f[1], 10, 64)
				leaked[id] = true
			}
		}
	}
	if len(leaked) == 0 {
		t.Fatal("the target reported no leaked goroutine")
	}
	return leaked, parked
}

// leakedOf returns the goroutines a gi ps --leaks --json document marks
// leaked, checking its summary agrees with the marks.
func leakedOf(t *testing.T, doc string) map[uint64]bool {
	t.Helper()
	var ps struct {
		Leaks *struct {
			Leaked    int    `json:"leaked"`
			Undecided string `json:"undecided"`
			Sites     []struct {
				Count int      `json:"count"`
				Goids []uint64 `json:"goids"`
			} `json:"sites"`
		} `json:"leaks"`
		Goroutines []struct {
			Goid   uint64 `json:"goid"`
			Leaked bool   `json:"leaked"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		t.Fatalf("%v: %.300s", err, doc)
	}
	if ps.Leaks == nil || ps.Leaks.Undecided != "" {
		t.Fatalf("no decided leaks summary: %+v", ps.Leaks)
	}
	out := map[uint64]bool{}
	for _, g := range ps.Goroutines {
		if g.Leaked {
			out[g.Goid] = true
		}
	}
	sited := 0
	for _, s := range ps.Leaks.Sites {
		sited += s.Count
		for _, id := range s.Goids {
			if !out[id] {
				t.Errorf("site lists goroutine %d, not marked leaked", id)
			}
		}
	}
	if ps.Leaks.Leaked != len(out) || sited != len(out) {
		t.Errorf("summary says %d leaked, sites %d, %d goroutines marked", ps.Leaks.Leaked, sited, len(out))
	}
	return out
}

func sameSet(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestPsLeaks runs gi ps --leaks on testdata/leaky: the JSON document
// (checked against the schema) marks exactly the goroutines the target
// leaked, the table marks as many LEAKED and counts them by creation
// site, --objects marks their objects unreachable, and a core written by
// --core in the same stop gives the same verdict read back; the target
// runs on; --leaks with --trace is refused in one line.
func TestPsLeaks(t *testing.T) {
	requirePrivilege(t)
	// 24 MiB of heap that holds pointers: read from the frozen copy into
	// a buffer of gi's own (hugemem.Lazy), not a small heap's.
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "3", "-ballast-mb", "24")
	truth, _ := leakyTruth(t, p)
	pid := strconv.Itoa(p.Pid)

	core := filepath.Join(t.TempDir(), "core.leaky")
	doc := giOK(t, "ps", "--leaks", "--json", "--core", core, pid)
	validate(t, compileSchema(t, "ps"), "gi ps --leaks --json", doc)
	if got := leakedOf(t, doc); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	// The core holds the vector registers of each thread not in a
	// system call, which the walk scanned (gi ps --leaks reads them in
	// the stop).
	if c, err := corefile.Open(core, ""); err != nil {
		t.Error(err)
	} else {
		for _, th := range c.Threads {
			if th.Regs.Syscall < 0 && len(th.Vector) < 512 {
				t.Errorf("thread %d in gi's core: %d bytes of vector registers", th.TID, len(th.Vector))
			}
		}
		c.Close()
	}
	back := giOK(t, "ps", "--leaks", "--json", core)
	if got := leakedOf(t, back); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json <its core> marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}

	// Live, without --core: read from a copy the target made of itself
	// in the stop, reaped after.
	frozen := giOK(t, "ps", "--leaks", "--json", pid)
	validate(t, compileSchema(t, "ps"), "gi ps --leaks --json", frozen)
	var fdoc struct {
		Leaks struct {
			Frozen      bool  `json:"frozen"`
			ReapPauseNS int64 `json:"reap_pause_ns"`
			HeapBytes   int64 `json:"heap_bytes"`
		} `json:"leaks"`
	}
	if err := json.Unmarshal([]byte(frozen), &fdoc); err != nil {
		t.Fatal(err)
	}
	if fdoc.Leaks.HeapBytes < 24<<20 {
		t.Errorf("%d bytes of heap copied, want the target's 24 MiB of ballast and more", fdoc.Leaks.HeapBytes)
	}
	if !fdoc.Leaks.Frozen || fdoc.Leaks.ReapPauseNS <= 0 {
		t.Errorf("gi ps --leaks of a live target: frozen %v, reap pause %dns; want a frozen copy, reaped", fdoc.Leaks.Frozen, fdoc.Leaks.ReapPauseNS)
	}
	if got := leakedOf(t, frozen); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json (frozen) marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children after gi ps --leaks: %v", kids)
	}

	table := giOK(t, "ps", "--leaks", pid)
	if n := strings.Count(table, " LEAKED "); n != len(truth) {
		t.Errorf("%d rows LEAKED, want %d:\n%s", n, len(truth), table)
	}
	want := regexp.MustCompile(`(?m)^leaks: ` + strconv.Itoa(len(truth)) + ` leaked goroutines \(\d+ blocked on channels and sync objects were judged\)\n  ` +
		strconv.Itoa(len(truth)) + ` leaked goroutines created at main\.spawn\.func1 \(leaky/main\.go:\d+\)\nleaks: stacks precise \(the runtime's stack maps\), heap precise \(the runtime's [a-z ,]+\), globals precise \(the module's pointer masks\); heap [0-9.]+ MB read in \S+ from a copy the process made of itself in the stop, after it resumed; the copy reaped in a second stop of \S+; walked in`)
	if !want.MatchString(table) {
		t.Errorf("no leaks footer matching %s:\n%s", want, table)
	}

	objects := giOK(t, "ps", "--leaks", "--objects", pid)
	if n := strings.Count(objects, "unreachable"); n < len(truth)/2 {
		t.Errorf("%d objects marked unreachable:\n%s", n, objects)
	}
	if err := targets.NotStopped(p.Pid); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runGi(t, "ps", "--leaks", "--trace", "1s", pid)
	checkOneLineError(t, stderr, code, `--leaks and --trace: one at a time`)
}

// TestPsLeaksKernelCore: the kernel's core of testdata/leaky killed with
// GOTRACEBACK=crash gives gi ps --leaks the same verdict as the target's
// own account, default and stripped builds.
func TestPsLeaksKernelCore(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {Stripped: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.StartToCrash(t, targets.Build(t, "leaky", opts), "-n", "3")
			truth, _ := leakyTruth(t, p.Process)
			path := p.Crash(t)
			doc := giOK(t, "ps", "--leaks", "--json", path)
			validate(t, compileSchema(t, "ps"), "gi ps --leaks --json <kernel core>", doc)
			if got := leakedOf(t, doc); !sameSet(got, truth) {
				t.Errorf("gi ps --leaks of the kernel's core marks %v leaked, the target leaked %v", keys(got), keys(truth))
			}
		})
	}
}

// TestLeaksVectorRegisters parks a goroutine on a channel whose only
// reference outside its own stack is a vector register of a running
// thread (testdata/vecspin -chan): it can still be woken, and gi ps
// --leaks must judge it and not report it (without the vector registers
// read in the stop, it would).
func TestLeaksVectorRegisters(t *testing.T) {
	requirePrivilege(t)
	t.Setenv("GODEBUG", "asyncpreemptoff=1") // no signal handler in the way (TestReadVector)
	p := targets.Start(t, targets.Build(t, "vecspin", targets.BuildOptions{}), "-chan")
	core := filepath.Join(t.TempDir(), "core.vecspin")
	// Live, then from the core written in that stop, which holds the
	// spinning thread's vector registers.
	for _, args := range [][]string{{"--core", core, strconv.Itoa(p.Pid)}, {core}} {
		doc := giOK(t, append([]string{"ps", "--leaks", "--json"}, args...)...)
		var d struct {
			Leaks struct {
				Candidates int    `json:"candidates"`
				Leaked     int    `json:"leaked"`
				Undecided  string `json:"undecided"`
			} `json:"leaks"`
		}
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Leaks.Candidates != 1 || d.Leaks.Leaked != 0 || d.Leaks.Undecided != "" || len(leakedOf(t, doc)) != 0 {
			t.Errorf("gi ps --leaks %v: %+v, leaked %v; want main.waiter judged and kept", args, d.Leaks, leakedOf(t, doc))
		}
	}
	targets.CheckNotStopped(t, p.Pid)
}

// TestPsLeaksGrowthBound reads a target that keeps writing 256 MiB while
// gi reads the copy it made of itself (each page it writes is then
// copied, once): with --leaks-max-growth 1 the copy is given up, the walk
// undecided and saying why (only the goroutines leaked by definition are
// reported), the target unharmed and without children;
// with the default bound (1 GiB), the exact leaked set.
func TestPsLeaksGrowthBound(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2", "-ballast-mb", "64", "-churn-mb", "256")
	truth, _ := leakyTruth(t, p)
	pid := strconv.Itoa(p.Pid)
	var d struct {
		Leaks struct {
			Undecided string `json:"undecided"`
		} `json:"leaks"`
	}
	bounded := giOK(t, "ps", "--leaks", "--json", "--leaks-max-growth", "1", pid)
	if err := json.Unmarshal([]byte(bounded), &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Leaks.Undecided, "past the bound of 1 MiB") {
		t.Errorf("gi ps --leaks --leaks-max-growth 1: undecided %q; want the bound hit", d.Leaks.Undecided)
	}
	targets.CheckNotStopped(t, p.Pid)
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children after the copy was given up: %v", kids)
	}
	for _, bad := range []string{"0", "-2", "1073741825"} {
		_, stderr, code := runGi(t, "ps", "--leaks", "--leaks-max-growth", bad, pid)
		checkOneLineError(t, stderr, code, `--leaks-max-growth: `+bad+` MiB; want a bound from 1 to 1073741824, or -1 for none`)
	}
	whole := giOK(t, "ps", "--leaks", "--json", pid)
	if got := leakedOf(t, whole); !sameSet(got, truth) {
		t.Errorf("gi ps --leaks --json marks %v leaked, the target leaked %v", keys(got), keys(truth))
	}
	targets.CheckNotStopped(t, p.Pid)
}
