package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/gi-debug/gi/internal/targets"
)

// TestTraceExportsCLI runs gi trace with --json, --perfetto and --pprof at
// once and checks the trace-event file and the profile against the JSON
// lines of the same run: every call is one slice on its goroutine's track,
// at the same start and with the same duration, unwound calls marked; the
// profile's time adds up to the root calls' and go tool pprof reads it.
func TestTraceExportsCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{PIE: true}))
	dir := t.TempDir()
	perfetto, prof := filepath.Join(dir, "trace.json"), filepath.Join(dir, "trace.pprof")
	g := startGiTrace(t, "--json", "--perfetto", perfetto, "--pprof", prof, strconv.Itoa(p.Pid), "main.chain*", "main.multiRet", "main.recoverer", "main.panicky", "main.thrower")
	for _, cmd := range []string{"chain 3", "multi 20", "panic 4"} {
		if _, err := p.Do(cmd, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGINT)

	lines := parseTraceJSON(t, g.stdout.String())
	if len(lines) != 3*3+20+4*3 {
		t.Fatalf("%d JSON call lines, want %d", len(lines), 3*3+20+4*3)
	}

	// The trace-event file.
	data, err := os.ReadFile(perfetto)
	if err != nil {
		t.Fatal(err)
	}
	var events []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		TS   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		TID  uint64         `json:"tid"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(data, &events); err != nil {
		t.Fatalf("the trace-event file is not a JSON array: %v", err)
	}
	type key struct {
		goid uint64
		name string
	}
	slices := map[key][]int{}
	tracks := map[uint64]string{}
	for i, e := range events {
		switch e.Ph {
		case "X":
			slices[key{e.TID, e.Name}] = append(slices[key{e.TID, e.Name}], i)
		case "M":
			if e.Name == "thread_name" {
				tracks[e.TID], _ = e.Args["name"].(string)
			}
		}
	}
	matched, unwound := 0, 0
	for _, l := range lines {
		if !strings.HasPrefix(tracks[l.Goid], "goroutine "+strconv.FormatUint(l.Goid, 10)) {
			t.Errorf("goroutine %d: track named %q", l.Goid, tracks[l.Goid])
		}
		found := false
		for _, i := range slices[key{l.Goid, l.Function}] {
			e := events[i]
			if math.Abs(e.TS*1e3-float64(l.StartNS)) < 2e3 && math.Abs(e.Dur*1e3-float64(l.DurationNS)) < 2e3 {
				found = true
				if (e.Args["unwound"] == true) != l.Unwound {
					t.Errorf("%s: unwound %v in the file, %v in JSON", l.Function, e.Args["unwound"], l.Unwound)
				}
				break
			}
		}
		if !found {
			t.Errorf("no slice for %+v", l)
			continue
		}
		matched++
		if l.Unwound {
			unwound++
		}
	}
	if xs := len(events) - len(tracks)*2; xs != len(lines) || matched != len(lines) || unwound != 8 {
		t.Errorf("%d slices, %d matched of %d calls, %d unwound (want 8: panicky and thrower, 4 times)", xs, matched, len(lines), unwound)
	}

	// The profile.
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want, got int64
	for _, l := range lines {
		if l.Depth == 0 {
			want += l.DurationNS
		}
	}
	byLeaf := map[string]int64{}
	for _, s := range pp.Sample {
		got += s.Value[1]
		byLeaf[s.Location[0].Line[0].Function.Name] += s.Value[0]
		if len(s.Label["goroutine"]) != 1 {
			t.Errorf("sample without its goroutine label: %v", s.Label)
		}
	}
	if got != want || byLeaf["main.chainC"] != 3 || byLeaf["main.multiRet"] != 20 || byLeaf["main.thrower"] != 4 {
		t.Errorf("profile: %d ns in all (root calls took %d ns), calls by leaf %v", got, want, byLeaf)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=time", prof).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "main.chainC") {
		t.Errorf("go tool pprof -top: %v\n%s", err, out)
	}
}
