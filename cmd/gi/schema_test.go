package main

import (
	"bufio"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gi-debug/gi/internal/targets"
)

// schemaPath is the one place gi's JSON output is documented.
var schemaPath = filepath.Join("..", "..", "schema", "gi.schema.json")

func compileSchema(t *testing.T, def string) *jsonschema.Schema {
	t.Helper()
	abs, err := filepath.Abs(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.NewCompiler().Compile(abs + "#/$defs/" + def)
	if err != nil {
		t.Fatalf("compile %s#/$defs/%s: %v", schemaPath, def, err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, what, doc string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: not JSON: %v", what, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not match the schema: %v\n%.2000s", what, err, doc)
	}
}

// TestJSONSchema validates the real output of gi ps --json (plain, with
// --trace, grouped) and of gi trace --json against schema/gi.schema.json,
// whose objects admit no undocumented field.
func TestJSONSchema(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	pid := strconv.Itoa(p.Pid)
	ps := compileSchema(t, "ps")
	for _, args := range [][]string{{"--json", "--all", "--all-frames"}, {"--json", "--trace", "500ms"}} {
		out, stderr, code := runGi(t, append([]string{"ps"}, append(args, pid)...)...)
		if code != 0 {
			t.Fatalf("gi ps %v: %s", args, stderr)
		}
		validate(t, ps, "gi ps "+strings.Join(args, " "), out)
		if strings.Contains(strings.Join(args, " "), "--trace") && !strings.Contains(out, `"trace_window"`) {
			t.Errorf("gi ps --trace --json has no trace_window")
		}
	}
	out, stderr, code := runGi(t, "ps", "--group", "--json", "--trace", "500ms", pid)
	if code != 0 {
		t.Fatalf("gi ps --group --json --trace: %s", stderr)
	}
	validate(t, compileSchema(t, "psGroups"), "gi ps --group --json --trace", out)

	tracee := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	g := startGiTrace(t, "--json", strconv.Itoa(tracee.Pid), "main.chain*", "main.recoverer", "main.thrower", "main.panicky")
	for _, cmd := range []string{"chain 2", "panic 2"} {
		if _, err := tracee.Do(cmd, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGINT)
	call, summary := compileSchema(t, "traceCall"), compileSchema(t, "traceSummary")
	lines, summaries := 0, 0
	sc := bufio.NewScanner(strings.NewReader(g.stdout.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"summary"`) {
			summaries++
			validate(t, summary, "gi trace --json summary", sc.Text())
			continue
		}
		lines++
		validate(t, call, "gi trace --json line", sc.Text())
	}
	if !strings.Contains(g.stdout.String(), `"args":[{"name":"i","type":"int","value":`) {
		t.Errorf("no call line with the arguments of main.thrower, panicky or recoverer:\n%s", g.stdout)
	}
	if lines != 2*3+2*3 || summaries != 1 {
		t.Errorf("%d call lines and %d summaries, want 12 and 1", lines, summaries)
	}
}

// TestJSONSchemaIsStrict: a field the schema does not document fails.
func TestJSONSchemaIsStrict(t *testing.T) {
	sch := compileSchema(t, "traceSummary")
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"summary":{"events":1,"lost":0,"probes":2,"attach_ns":3,"detach_ns":4,"surprise":5}}`))
	if err := sch.Validate(v); err == nil {
		t.Error("an undocumented field passed the schema")
	}
	frame := compileSchema(t, "frame")
	v, _ = jsonschema.UnmarshalJSON(strings.NewReader(`{"function":"main.f","file":"m.go","line":1,"pc":16}`))
	if err := frame.Validate(v); err == nil {
		t.Error("a frame without its required inlined field passed")
	}
}

// TestObjectsCLI runs gi ps --objects on the waiters target, whose 100
// goroutines receive from one channel nobody sends on: the first row says
// so, with the fact stated, and the JSON document matches the schema.
func TestObjectsCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "waiters", targets.BuildOptions{}), "-fan", "100")
	out := giOK(t, "ps", "--objects", strconv.Itoa(p.Pid))
	lines := strings.Split(out, "\n")
	if len(lines) < 3 {
		t.Fatalf("gi ps --objects:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 4 || f[0] != "100" || f[1] != "chan" || !strings.Contains(lines[1], "100 receivers, 0 senders") {
		t.Errorf("first row %q: want the channel 100 goroutines receive from", lines[1])
	}
	fanAddr := strings.Fields(lines[1])[2]
	if !strings.Contains(out, "chan "+fanAddr+": no goroutine waits to send") {
		t.Errorf("facts missing:\n%s", out)
	}
	var fanLines int
	for _, l := range p.Lines() {
		if strings.Contains(l, "addr="+fanAddr+" ") {
			fanLines++
		}
	}
	if fanLines != 100 {
		t.Errorf("the target names %s for %d goroutines, want 100 (gi's address is not the target's)", fanAddr, fanLines)
	}
	validate(t, compileSchema(t, "psObjects"), "gi ps --objects --json", giOK(t, "ps", "--objects", "--json", strconv.Itoa(p.Pid)))
	validate(t, compileSchema(t, "ps"), "gi ps --json (waiters)", giOK(t, "ps", "--json", strconv.Itoa(p.Pid)))
}

// giOK runs gi and returns its stdout, failing the test unless it succeeds.
func giOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runGi(t, args...)
	if code != 0 {
		t.Fatalf("gi %v: exit %d: %s", args, code, errOut)
	}
	return out
}
