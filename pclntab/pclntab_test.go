package pclntab_test

import (
	"bufio"
	"bytes"
	"debug/gosym"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
)

// The tests build pclntab/testdata/pclntest with several Go toolchains and
// link modes, run it, and compare what the runtime reports about its own
// stacks with the static decoding of the same binary. The binaries are
// opened with elfbin, which finds the pclntab and moduledata in the ELF file
// and hands them to Decode; elfbin's own part (moduledata against the
// symbols, stripped binaries, relocations left zero) is tested in elfbin,
// whose tests build the same program with the same builder
// (targets.PclnBuilder).

// TestPclntab builds the test program with every toolchain and link mode
// once, then runs the checks on the builds, each in parallel subtests.
func TestPclntab(t *testing.T) {
	pb := targets.NewPclnBuilder(t)
	for _, c := range []struct {
		name string
		f    func(*testing.T, *targets.PclnBuilder)
	}{
		{"FramesMatchRuntime", testPclntabFramesMatchRuntime},
		{"SPDeltaMatchesTraceback", testPclntabSPDeltaMatchesTraceback},
		{"MatchesGosym", testPclntabMatchesGosym},
		{"WrapperFuncID", testPclntabWrapperFuncID},
		{"ExternalLinking", testPclntabExternalLinking},
		{"Corrupt", testPclntabCorrupt},
		{"FuncForPC", testPclntabFuncForPC},
		{"StackMaps", testPclntabStackMaps},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, pb) })
	}
}

func pclnOpen(t testing.TB, path string) *elfbin.Binary {
	t.Helper()
	b, err := elfbin.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// --- runtime reports ---

type pclnRtFrame struct {
	pc, entry uint64
	startLine int
	function  string
	file      string
	line      int
}

type pclnRtStack struct {
	tag     string
	pcs     []uint64 // runtime.Callers: return pcs
	entries []uint64 // runtime.FuncForPC(pc-1).Entry()
	frames  []pclnRtFrame
}

type pclnRtFunc struct {
	label, name string
	entry       uint64
}

type pclnRtReport struct {
	funcs  []pclnRtFunc
	stacks []*pclnRtStack
}

func (r *pclnRtReport) funcEntry(label string) (pclnRtFunc, bool) {
	for _, f := range r.funcs {
		if f.label == label {
			return f, true
		}
	}
	return pclnRtFunc{}, false
}

func pclnHex(t testing.TB, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return v
}

func pclnAtoi(t testing.TB, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q: %v", s, err)
	}
	return v
}

func pclnReport(t *testing.T, path string) *pclnRtReport {
	t.Helper()
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	r := &pclnRtReport{}
	var cur *pclnRtStack
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		kind, rest, _ := strings.Cut(line, " ")
		if strings.HasPrefix(line, "FUNC\t") {
			f := strings.Split(line, "\t")
			if len(f) != 4 {
				t.Fatalf("bad line %q", line)
			}
			r.funcs = append(r.funcs, pclnRtFunc{label: f[1], entry: pclnHex(t, f[2]), name: f[3]})
			continue
		}
		switch kind {
		case "STACK":
			cur = &pclnRtStack{tag: rest}
			r.stacks = append(r.stacks, cur)
		case "PC":
			f := strings.Fields(rest)
			cur.pcs = append(cur.pcs, pclnHex(t, f[0]))
			cur.entries = append(cur.entries, pclnHex(t, f[1]))
		case "FRAME":
			// pc entry startline function\tfile\tline
			f := strings.SplitN(rest, " ", 4)
			g := strings.Split(f[3], "\t")
			if len(f) != 4 || len(g) != 3 {
				t.Fatalf("bad line %q", line)
			}
			cur.frames = append(cur.frames, pclnRtFrame{
				pc: pclnHex(t, f[0]), entry: pclnHex(t, f[1]), startLine: pclnAtoi(t, f[2]),
				function: g[0], file: g[1], line: pclnAtoi(t, g[2]),
			})
		case "END":
			cur = nil
		default:
			t.Fatalf("bad line %q", line)
		}
	}
	if len(r.stacks) < 15 {
		t.Fatalf("only %d stacks in the report:\n%s", len(r.stacks), out)
	}
	return r
}

// bias returns the load bias: runtime address of main.main minus its
// link-time address.
func pclnBias(t *testing.T, b *elfbin.Binary, mainEntry uint64) uint64 {
	t.Helper()
	f := b.Lines.FuncByName("main.main")
	if f == nil {
		t.Fatal("no main.main in the pclntab")
	}
	d := mainEntry - f.Entry
	if !b.PIE && d != 0 {
		t.Fatalf("non-PIE binary with load bias %#x", d)
	}
	return d
}

// funcNameForPrint is runtime.funcNameForPrint: generic shapes become [...].
func pclnPrintName(name string) string {
	i := strings.IndexByte(name, '[')
	if i < 0 {
		return name
	}
	j := strings.LastIndexByte(name, ']')
	if j <= i {
		return name
	}
	return name[:i] + "[...]" + name[j+1:]
}

// pclnElider mirrors the runtime's wrapper elision (elideWrapperCalling): a
// wrapper frame is hidden unless its callee is a panic function.
type pclnElider struct {
	wrapper uint8
	panicky map[uint8]bool
}

func pclnNewElider(t *testing.T, lt *pclntab.LineTable) pclnElider {
	e := pclnElider{wrapper: lt.WrapperFuncID(), panicky: map[uint8]bool{}}
	for _, name := range []string{"runtime.gopanic", "runtime.sigpanic", "runtime.panicwrap"} {
		f := lt.FuncByName(name)
		if f == nil {
			t.Fatalf("no %s", name)
		}
		if f.FuncID == 0 || f.FuncID >= e.wrapper {
			t.Fatalf("%s has FuncID %d, wrapper is %d", name, f.FuncID, e.wrapper)
		}
		e.panicky[f.FuncID] = true
	}
	return e
}

func (e pclnElider) elide(id, callee uint8) bool {
	return id == e.wrapper && !e.panicky[callee]
}

// checkStack checks one runtime.Callers/CallersFrames report against
// FuncForPC and Frames, frame by frame: each pc of runtime.Callers is a
// logical frame (the innermost physical one, then virtual pcs for the outer
// inlined calls); Frames at pc-1 must reproduce the runtime's expansion.
func pclnCheckStack(t *testing.T, b *elfbin.Binary, el pclnElider, bias uint64, s *pclnRtStack) (inlined int) {
	t.Helper()
	lt := b.Lines
	if len(s.frames) != len(s.pcs) {
		t.Errorf("%s: %d pcs but %d frames", s.tag, len(s.pcs), len(s.frames))
		return
	}
	var ours []pclntab.Frame
	var entries []uint64
	callee := uint8(0) // FuncIDNormal
	for i := 0; i < len(s.pcs); {
		pc := s.pcs[i] - bias
		f := lt.FuncForPC(pc - 1)
		if f == nil {
			t.Errorf("%s: FuncForPC(%#x) = nil", s.tag, pc-1)
			return
		}
		if f.Entry+bias != s.entries[i] {
			t.Errorf("%s: FuncForPC(%#x) = %s at %#x, runtime says entry %#x", s.tag, pc-1, f.Name, f.Entry+bias, s.entries[i])
		}
		lookup := pc
		if lookup > f.Entry {
			lookup--
		}
		chain, err := lt.Frames(f, lookup)
		if err != nil {
			t.Errorf("%s: Frames(%s, %#x): %v", s.tag, f.Name, lookup, err)
			return
		}
		if chain[len(chain)-1].Inlined || chain[len(chain)-1].Function != f.Name {
			t.Errorf("%s: Frames(%s, %#x) does not end with the physical frame: %+v", s.tag, f.Name, lookup, chain)
		}
		n := 0
		for j, fr := range chain {
			if fr.Inlined != (j < len(chain)-1) {
				t.Errorf("%s: frame %d of %d: Inlined = %v", s.tag, j, len(chain), fr.Inlined)
			}
			if el.elide(fr.FuncID, callee) {
				callee = fr.FuncID
				continue
			}
			callee = fr.FuncID
			want := fr.PC + 1 // the "return pc" the runtime records
			if j == 0 && lookup == pc {
				want = pc // at a function entry the runtime does not back up
			}
			if i+n >= len(s.pcs) || s.pcs[i+n]-bias != want {
				t.Errorf("%s: logical frame %s at %#x: runtime.Callers has no virtual pc %#x", s.tag, fr.Function, fr.PC, fr.PC+1+bias)
				return
			}
			if fr.Inlined {
				inlined++
			}
			ours = append(ours, fr)
			entries = append(entries, f.Entry)
			n++
		}
		if n == 0 {
			t.Errorf("%s: every frame at %#x elided", s.tag, pc)
			return
		}
		i += n
	}
	if len(ours) != len(s.frames) {
		t.Errorf("%s: %d logical frames, runtime has %d", s.tag, len(ours), len(s.frames))
		return
	}
	for i, rt := range s.frames {
		fr := ours[i]
		if pclnPrintName(fr.Function) != rt.function || fr.File != rt.file || fr.Line != rt.line ||
			fr.PC+bias != rt.pc || entries[i]+bias != rt.entry || (rt.startLine != 0 && fr.StartLine != rt.startLine) {
			t.Errorf("%s: frame %d:\n got %s %s:%d pc=%#x entry=%#x start=%d\nwant %s %s:%d pc=%#x entry=%#x start=%d",
				s.tag, i, fr.Function, fr.File, fr.Line, fr.PC+bias, entries[i]+bias, fr.StartLine,
				rt.function, rt.file, rt.line, rt.pc, rt.entry, rt.startLine)
		}
	}
	return inlined
}

// testPclntabFramesMatchRuntime compares FuncForPC, Frames and FileLine with
// runtime.Callers, runtime.FuncForPC and runtime.CallersFrames, frame by
// frame, for every toolchain and link mode.
func testPclntabFramesMatchRuntime(t *testing.T, pb *targets.PclnBuilder) {
	pb.ForEach(t, targets.PclnModes, func(t *testing.T, k targets.PclnKey) {
		path := pb.Build(t, k)
		rep := pclnReport(t, path)
		b := pclnOpen(t, path)
		mainFn, ok := rep.funcEntry("main.main")
		if !ok {
			t.Fatal("no FUNC main.main in the report")
		}
		bias := pclnBias(t, b, mainFn.entry)
		el := pclnNewElider(t, b.Lines)
		inlined := 0
		for _, s := range rep.stacks {
			inlined += pclnCheckStack(t, b, el, bias, s)
		}
		if inlined < 20 {
			t.Errorf("only %d inlined frames checked", inlined)
		}
		for _, rf := range rep.funcs {
			f := b.Lines.FuncForPC(rf.entry - bias)
			if f == nil || f.Entry+bias != rf.entry || pclnPrintName(f.Name) != rf.name {
				t.Errorf("FUNC %s: runtime says %s at %#x, FuncForPC gives %+v", rf.label, rf.name, rf.entry, f)
			}
		}
	})
}

// pclnTracebackFrame is one frame of a GOTRACEBACK=system traceback.
type pclnTracebackFrame struct {
	function   string // as printed: funcNameForPrint, "panic" for runtime.gopanic
	file       string
	line       int
	physical   bool // has +off fp= sp= pc=
	off        uint64
	pc, sp, fp uint64
}

var (
	pclnTracebackFile = regexp.MustCompile(`^\t(.+):(\d+)(?: \+0x([0-9a-f]+))?(?: fp=0x([0-9a-f]+) sp=0x([0-9a-f]+) pc=0x([0-9a-f]+))?$`)
)

// parseTraceback returns the frames of every goroutine, innermost first.
func pclnParseTraceback(t *testing.T, out string) [][]pclnTracebackFrame {
	var gs [][]pclnTracebackFrame
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "goroutine "):
			gs = append(gs, nil)
			continue
		case strings.HasPrefix(l, "created by "):
			i++ // and its file line
			continue
		case l == "" || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "...") || len(gs) == 0:
			continue
		}
		if i+1 >= len(lines) {
			break
		}
		m := pclnTracebackFile.FindStringSubmatch(lines[i+1])
		if m == nil || !strings.HasSuffix(l, ")") {
			t.Fatalf("unexpected traceback lines %q, %q", l, lines[i+1])
		}
		i++
		fr := pclnTracebackFrame{function: l[:strings.LastIndexByte(l, '(')], file: m[1], line: pclnAtoi(t, m[2])}
		if m[6] != "" {
			fr.physical = true
			if m[3] != "" {
				fr.off = pclnHex(t, m[3])
			}
			fr.fp, fr.sp, fr.pc = pclnHex(t, m[4]), pclnHex(t, m[5]), pclnHex(t, m[6])
		}
		gs[len(gs)-1] = append(gs[len(gs)-1], fr)
	}
	return gs
}

func pclnTracebackName(name string) string {
	if name == "runtime.gopanic" {
		return "panic"
	}
	return pclnPrintName(name)
}

// testPclntabSPDeltaMatchesTraceback checks SPDelta against the runtime's
// own unwinder. With GOTRACEBACK=system a fatal panic prints, for every
// physical frame of every goroutine, the pc, sp and fp the runtime's unwinder
// computed, where fp = sp + funcspdelta(f, pc) (+ the return address slot on
// amd64). So SPDelta(FuncForPC(pc), pc) must be fp-sp-8 on amd64 (fp-sp on
// arm64) at every frame the runtime walked: the runtime reports the value
// of its own pcsp decoding, without any assembly in the test program. The
// same traceback also lists the inlined frames of each physical frame, which
// must match Frames at the runtime's lookup pc (pc-1: no frame follows a
// signal here).
func testPclntabSPDeltaMatchesTraceback(t *testing.T, pb *targets.PclnBuilder) {
	pb.ForEach(t, targets.PclnModes, func(t *testing.T, k targets.PclnKey) {
		path := pb.Build(t, k)
		cmd := exec.Command(path, "-panic")
		cmd.Env = append(os.Environ(), "GOTRACEBACK=system")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("want exit status 2 from the panic, got %v\n%s", err, stderr.String())
		}
		b := pclnOpen(t, path)
		f := strings.Split(strings.TrimSpace(stdout.String()), "\t")
		if len(f) != 4 || f[1] != "main.main" {
			t.Fatalf("bad output %q", stdout.String())
		}
		bias := pclnBias(t, b, pclnHex(t, f[2]))
		retSlot := uint64(8)
		if b.Arch == "arm64" {
			retSlot = 0
		}
		var checked, inlined int
		seen := map[string]bool{}
		for _, g := range pclnParseTraceback(t, stderr.String()) {
			var pending []pclnTracebackFrame
			for _, fr := range g {
				if !fr.physical {
					pending = append(pending, fr)
					continue
				}
				group := append(pending, fr)
				pending = nil
				pc := fr.pc - bias
				fn := b.Lines.FuncForPC(pc)
				if fn == nil {
					t.Errorf("%s: FuncForPC(%#x) = nil", fr.function, pc)
					continue
				}
				if pclnTracebackName(fn.Name) != fr.function || fn.Entry+fr.off != pc && fr.off != 0 {
					t.Errorf("FuncForPC(%#x) = %s at %#x, traceback says %s +%#x", pc, fn.Name, fn.Entry, fr.function, fr.off)
					continue
				}
				d, err := b.Lines.SPDelta(fn, pc)
				if err != nil {
					t.Errorf("SPDelta(%s, %#x): %v", fn.Name, pc, err)
					continue
				}
				if want := int64(fr.fp - fr.sp - retSlot); d != want {
					t.Errorf("SPDelta(%s, %#x) = %d, the runtime unwound with %d (sp=%#x fp=%#x)", fn.Name, pc, d, want, fr.sp, fr.fp)
				}
				checked++
				seen[fn.Name] = true
				lookup := pc
				if lookup > fn.Entry {
					lookup--
				}
				chain, err := b.Lines.Frames(fn, lookup)
				if err != nil {
					t.Errorf("Frames(%s, %#x): %v", fn.Name, lookup, err)
					continue
				}
				if len(chain) != len(group) {
					t.Errorf("Frames(%s, %#x): %d frames, traceback has %d: %+v vs %+v", fn.Name, lookup, len(chain), len(group), chain, group)
					continue
				}
				for i := range chain {
					if pclnTracebackName(chain[i].Function) != group[i].function || chain[i].File != group[i].file || chain[i].Line != group[i].line {
						t.Errorf("Frames(%s, %#x)[%d] = %s %s:%d, traceback has %s %s:%d", fn.Name, lookup, i,
							chain[i].Function, chain[i].File, chain[i].Line, group[i].function, group[i].file, group[i].line)
					}
				}
				inlined += len(chain) - 1
			}
		}
		for _, name := range []string{"main.boom", "main.recursePanic", "main.recurseBlock", "runtime.gopark", "runtime.goexit", "runtime.main", "runtime.gopanic"} {
			if !seen[name] {
				t.Errorf("traceback has no physical frame of %s", name)
			}
		}
		if checked < 40 || inlined < 5 {
			t.Errorf("only %d frames and %d inlined frames checked:\n%s", checked, inlined, stderr.String())
		}
	})
}

// pclntabBytes returns the raw pc/line table for debug/gosym.
func pclnSectionData(t *testing.T, b *elfbin.Binary) []byte {
	for _, name := range []string{".gopclntab", ".data.rel.ro.gopclntab"} {
		if s := b.File.Section(name); s != nil {
			data, err := s.Data()
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
	t.Fatal("no pclntab section")
	return nil
}

// compareGosym checks Funcs and FileLine against debug/gosym for every
// function: all pcs of the functions of package main, a sample elsewhere.
func pclnCompareGosym(t *testing.T, b *elfbin.Binary) {
	lt := b.Lines
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(pclnSectionData(t, b), lt.TextStart()))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Funcs) != len(lt.Funcs()) {
		t.Fatalf("%d functions, gosym has %d", len(lt.Funcs()), len(tab.Funcs))
	}
	rng := rand.New(rand.NewSource(1))
	lines := 0
	for i, f := range lt.Funcs() {
		g := &tab.Funcs[i]
		if f.Name != g.Name || f.Entry != g.Entry || f.End != g.End {
			t.Fatalf("function %d: %s [%#x,%#x), gosym has %s [%#x,%#x)", i, f.Name, f.Entry, f.End, g.Name, g.Entry, g.End)
		}
		if f.Entry == f.End {
			continue
		}
		pcs := []uint64{f.Entry, f.End - 1, f.Entry + uint64(rng.Int63n(int64(f.End-f.Entry)))}
		if strings.HasPrefix(f.Name, "main.") {
			pcs = pcs[:0]
			for pc := f.Entry; pc < f.End; pc++ {
				pcs = append(pcs, pc)
			}
		}
		for _, pc := range pcs {
			file, line, err := lt.FileLine(f, pc)
			gfile, gline, gfn := tab.PCToLine(pc)
			if gfn == nil || gfn.Entry != f.Entry {
				t.Fatalf("gosym.PCToLine(%#x) in %v, want %s", pc, gfn, f.Name)
			}
			if err != nil && (gline <= 0 || !f.HasLines()) {
				// Alignment padding after the code, or a marker
				// symbol without tables: gosym returns garbage.
				continue
			}
			if err != nil || file != gfile || line != gline {
				t.Errorf("FileLine(%s, %#x) = %s:%d, %v; gosym says %s:%d", f.Name, pc, file, line, err, gfile, gline)
			}
			lines++
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d functions, %d pcs compared with debug/gosym", len(tab.Funcs), lines)
}

// testPclntabMatchesGosym compares Funcs and FileLine with debug/gosym on
// the test program (both architectures) and on the go command of every
// toolchain at hand: big real-world binaries built by each release.
func testPclntabMatchesGosym(t *testing.T, pb *targets.PclnBuilder) {
	pb.ForEach(t, []string{"exe", "pie", "strip"}, func(t *testing.T, k targets.PclnKey) {
		pclnCompareGosym(t, pclnOpen(t, pb.Build(t, k)))
	})
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	for _, tc := range []string{"local", "go1.21.13", "go1.20.14"} {
		for _, mode := range []string{"exe", "pie"} {
			k := targets.PclnKey{Toolchain: tc, Mode: mode, GOARCH: other}
			t.Run(k.String(), func(t *testing.T) {
				t.Parallel()
				b := pclnOpen(t, pb.Build(t, k))
				if b.Arch != other {
					t.Errorf("Arch = %q, want %q", b.Arch, other)
				}
				pclnCompareGosym(t, b)
			})
		}
	}
	for _, path := range pclnGoCommands(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(path))), func(t *testing.T) {
			t.Parallel()
			pclnCompareGosym(t, pclnOpen(t, path))
		})
	}
}

// toolchainGoCommands returns the go commands of the installed toolchain and
// of the toolchains fetched for the builds.
func pclnGoCommands(t testing.TB) []string {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(strings.TrimSpace(string(goroot)), "bin", "go")}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range targets.PclnToolchains[1:] {
		p := filepath.Join(strings.TrimSpace(string(modcache)), "golang.org", "toolchain@v0.0.1-"+tc+".linux-"+runtime.GOARCH, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// wrapperFuncID is abi.FuncIDWrapper per Go minor release (see
// internal/abi/symtab.go, runtime/symtab.go in 1.20).
func pclnWrapperFuncID(goVersion string) uint8 {
	minor, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(goVersion, "go1."), ".", 2)[0])
	switch {
	case minor <= 21:
		return 21
	case minor <= 24:
		return 22 // FuncID_corostart added
	default:
		return 23 // runfinq replaced by runFinalizers, runCleanups
	}
}

// testPclntabWrapperFuncID checks WrapperFuncID against autogenerated code:
// method-value (-fm) wrappers, pointer-receiver wrappers, type equality
// functions, and the value of the release's enum.
func testPclntabWrapperFuncID(t *testing.T, pb *targets.PclnBuilder) {
	pb.ForEach(t, []string{"exe", "strip"}, func(t *testing.T, k targets.PclnKey) {
		b := pclnOpen(t, pb.Build(t, k))
		lt := b.Lines
		w := lt.WrapperFuncID()
		if want := pclnWrapperFuncID(b.GoVersion); w != want {
			t.Errorf("WrapperFuncID() = %d, want %d for %s", w, want, b.GoVersion)
		}
		for _, name := range []string{"main.point.value-fm", "main.(*point).ptr-fm", "main.(*point).value"} {
			f := lt.FuncByName(name)
			if f == nil {
				t.Errorf("no function %s", name)
				continue
			}
			if f.FuncID != w {
				t.Errorf("%s has FuncID %d, WrapperFuncID() = %d", name, f.FuncID, w)
			}
		}
		// Type equality functions are autogenerated but not wrappers. Go
		// 1.27 names them by the type's memory shape (type:.eq.M16SSM40),
		// not by the type.
		eq := "type:.eq.main.key"
		if lt.FuncByName(eq) == nil {
			for _, f := range lt.Funcs() {
				if strings.HasPrefix(f.Name, "type:.eq.") {
					eq = f.Name
					break
				}
			}
		}
		for _, name := range []string{"main.main", "main.point.value", eq} {
			if f := lt.FuncByName(name); f == nil || f.FuncID != 0 {
				t.Errorf("%s: %+v, want FuncID 0", name, f)
			}
		}
		if f := lt.FuncByName("runtime.goexit"); f == nil || f.Flag&1 == 0 {
			t.Errorf("runtime.goexit has no TopFrame flag: %+v", f)
		}
		if f := lt.FuncByName("runtime.rt0_go"); f == nil || f.Flag&4 == 0 {
			t.Errorf("runtime.rt0_go has no Asm flag: %+v", f)
		}
	})
}

// testPclntabExternalLinking checks PIEs linked by the system linker: the
// pclntab is then merged into .data.rel.ro (found by its header when the
// binary is stripped), and runtime.text is not the start of .text.
func testPclntabExternalLinking(t *testing.T, pb *targets.PclnBuilder) {
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal("no gcc for external linking (make deps installs it); GI_REQUIRE_PRIVILEGED=1 forbids skipping")
		}
		t.Skip("no gcc for external linking")
	}
	for _, tc := range []string{"local", "go1.21.13"} {
		for _, mode := range []string{"ext-pie", "ext-pie-strip"} {
			k := targets.PclnKey{Toolchain: tc, Mode: mode, GOARCH: runtime.GOARCH}
			t.Run(k.String(), func(t *testing.T) {
				t.Parallel()
				path := pb.Build(t, k)
				rep := pclnReport(t, path)
				b := pclnOpen(t, path)
				mainFn, _ := rep.funcEntry("main.main")
				bias := pclnBias(t, b, mainFn.entry)
				el := pclnNewElider(t, b.Lines)
				for _, s := range rep.stacks {
					pclnCheckStack(t, b, el, bias, s)
				}
				if lo, _ := b.TextRange(); lo == b.Lines.TextStart() {
					t.Logf("text section starts at runtime.text %#x", lo)
				}
			})
		}
	}
}

// testPclntabCorrupt overwrites random bytes of one table of a real
// binary at a time (functab and _func records, pcvalue tables, name and file
// tables, inline trees, moduledata) or truncates the file inside the
// pclntab: Open and every lookup must return errors, never panic or loop.
func testPclntabCorrupt(t *testing.T, pb *targets.PclnBuilder) {
	path := pb.Build(t, targets.PclnKey{Toolchain: "local", Mode: "exe"})
	orig := pclnOpen(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pcln := orig.File.Section(".gopclntab")
	raw, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	h, err := pclntab.ParseHeader(raw, orig.File.ByteOrder)
	if err != nil {
		t.Fatal(err)
	}
	fileOff := func(addr uint64) uint64 {
		off, err := orig.FileOffset(addr)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	// [start, end) file offsets of the regions to corrupt.
	regions := [][2]uint64{
		{pcln.Offset, pcln.Offset + h.TableOffset(0)},                            // header
		{pcln.Offset + h.TableOffset(4), pcln.Offset + h.TableOffset(4) + 65536}, // functab, _func
		{pcln.Offset + h.TableOffset(3), pcln.Offset + h.TableOffset(4)},         // pctab
		{pcln.Offset + h.TableOffset(0), pcln.Offset + h.TableOffset(3)},         // names, cutab, files
		{fileOff(orig.Lines.GoFunc()), fileOff(orig.Lines.GoFunc()) + 65536},
		{fileOff(orig.Lines.Module()), fileOff(orig.Lines.Module()) + 41*8},
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(42))
	iterations := 120
	if testing.Short() {
		iterations = 12
	}
	opened, failed := 0, 0
	for it := 0; it < iterations; it++ {
		var mut []byte
		if it%7 == 6 { // truncated inside the pclntab
			mut = data[:pcln.Offset+uint64(rng.Int63n(int64(pcln.Size)))]
		} else {
			mut = bytes.Clone(data)
			r := regions[it%len(regions)]
			for n := 1 + rng.Intn(20); n > 0; n-- {
				if off := r[0] + uint64(rng.Int63n(int64(r[1]-r[0]))); off < uint64(len(mut)) {
					mut[off] = byte(rng.Intn(256))
				}
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("corrupt%d", it))
		if err := os.WriteFile(p, mut, 0o755); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Sprintf("panic: %v", r)
				}
			}()
			b, err := elfbin.Open(p)
			if err != nil {
				done <- ""
				return
			}
			defer b.Close()
			opened++
			lt := b.Lines
			lt.WrapperFuncID()
			lt.FuncByName("main.main")
			for _, f := range lt.Funcs() {
				for _, pc := range []uint64{f.Entry, (f.Entry + f.End) / 2, f.End - 1, f.End} {
					lt.FuncForPC(pc)
					_, _, err1 := lt.FileLine(f, pc)
					_, err2 := lt.SPDelta(f, pc)
					_, err3 := lt.Frames(f, pc)
					if err1 != nil || err2 != nil || err3 != nil {
						failed++
					}
				}
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatalf("iteration %d: %s", it, msg)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("iteration %d: lookups did not finish", it)
		}
		os.Remove(p)
	}
	t.Logf("%d of %d corrupt binaries opened, %d lookups failed", opened, iterations, failed)
}

// testPclntabFuncForPC checks FuncForPC against a linear scan and
// that it does not allocate.
func testPclntabFuncForPC(t *testing.T, pb *targets.PclnBuilder) {
	b := pclnOpen(t, pb.Build(t, targets.PclnKey{Toolchain: "local", Mode: "exe"}))
	lt := b.Lines
	fs := lt.Funcs()
	for i, f := range fs {
		for _, pc := range []uint64{f.Entry, f.End - 1} {
			if f.End == f.Entry {
				continue
			}
			if got := lt.FuncForPC(pc); got != f {
				t.Fatalf("FuncForPC(%#x) = %v, want %s", pc, got, f.Name)
			}
		}
		if i == 0 && lt.FuncForPC(f.Entry-1) != nil {
			t.Errorf("FuncForPC before the first function is not nil")
		}
	}
	if lt.FuncForPC(fs[len(fs)-1].End) != nil || lt.FuncForPC(0) != nil {
		t.Errorf("FuncForPC outside the text is not nil")
	}
	pc := lt.FuncByName("main.main").Entry + 3
	if n := testing.AllocsPerRun(1000, func() { lt.FuncForPC(pc) }); n != 0 {
		t.Errorf("FuncForPC allocates %v times", n)
	}
}

func BenchmarkFuncForPC(b *testing.B) {
	bin, err := elfbin.Open(pclnGoCommands(b)[0])
	if err != nil {
		b.Fatal(err)
	}
	defer bin.Close()
	lt := bin.Lines
	fs := lt.Funcs()
	lo, hi := fs[0].Entry, fs[len(fs)-1].End
	rng := rand.New(rand.NewSource(1))
	pcs := make([]uint64, 4096)
	for i := range pcs {
		pcs[i] = lo + uint64(rng.Int63n(int64(hi-lo)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lt.FuncForPC(pcs[i&4095])
	}
}

func BenchmarkFrames(b *testing.B) {
	bin, err := elfbin.Open(pclnGoCommands(b)[0])
	if err != nil {
		b.Fatal(err)
	}
	defer bin.Close()
	lt := bin.Lines
	fs := lt.Funcs()
	rng := rand.New(rand.NewSource(1))
	type site struct {
		f  *pclntab.Func
		pc uint64
	}
	sites := make([]site, 4096)
	for i := 0; i < len(sites); {
		f := fs[rng.Intn(len(fs))]
		if f.End == f.Entry {
			continue
		}
		s := site{f, f.Entry + uint64(rng.Int63n(int64(f.End-f.Entry)))}
		if _, err := lt.Frames(s.f, s.pc); err == nil { // not alignment padding
			sites[i] = s
			i++
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := sites[i&4095]
		if _, err := lt.Frames(s.f, s.pc); err != nil {
			b.Fatal(err)
		}
	}
}
