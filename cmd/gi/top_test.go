package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// tmuxSession drives a real terminal: a shell in a tmux server of its own
// (tmux -L), so that one test's server going away as its last session
// ends never races with the next test's.
type tmuxSession struct {
	t    *testing.T
	name string
}

// newTmux starts a shell in a terminal of width × height; the server is
// killed when the test ends.
func newTmux(t *testing.T, name string, width, height int) *tmuxSession {
	s := &tmuxSession{t: t, name: name}
	s.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), "sh")
	t.Cleanup(func() { exec.Command("tmux", "-L", name, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.name}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	s.run(append([]string{"send-keys", "-t", s.name}, keys...)...)
}

func (s *tmuxSession) screen() string {
	return s.run("capture-pane", "-p", "-t", s.name)
}

// waitFor polls the screen until ok accepts it.
func (s *tmuxSession) waitFor(what string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sc := s.screen()
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %s:\n%s", what, sc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}

// TestTopInTmux runs gi top in a real terminal (tmux) against the lockserver
// target, drives sorting, filtering, expanding and quitting with keys, and
// checks the screen, the terminal afterwards, the target and the probes.
func TestTopInTmux(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal("tmux is missing (make deps installs it)")
		}
		t.Skip("tmux is missing")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	s := newTmux(t, "gitop"+strconv.Itoa(os.Getpid()), 200, 50)
	s.keys("clear; echo BEFORE-GI-TOP", "Enter")
	s.waitFor("the shell", contains("BEFORE-GI-TOP"))
	s.keys(gi+" top --max-overhead none "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")

	sc := s.waitFor("the grouped view with latencies", func(sc string) bool {
		return strings.Contains(sc, "gi top - pid "+strconv.Itoa(p.Pid)) && strings.Contains(sc, "sort: count") && handleCalls(sc) > 0
	})
	for _, want := range []string{"COUNT", "STATE", "MAXWAIT", "P99", "main.worker"} {
		if !strings.Contains(sc, want) {
			t.Errorf("screen lacks %q:\n%s", want, sc)
		}
	}
	giPid := findProcess(t, "top --max-overhead none "+strconv.Itoa(p.Pid))
	progs, links := bpfObjectsOf(t, giPid)
	if len(progs) == 0 {
		t.Errorf("gi top holds no BPF programs: no trace runs")
	}

	checkSorted(t, "count", sc, topCount)
	s.keys("p")
	sc = s.waitFor("sort by p99", contains("sort: p99"))
	checkSorted(t, "p99", sc, topP99)
	s.keys("w")
	sc = s.waitFor("sort by wait", contains("sort: wait"))
	checkSorted(t, "wait", sc, topMaxWait)

	s.keys("/", "h", "a", "n", "d", "l", "e", "Enter")
	sc = s.waitFor("the filter applied", contains("filter: handle"))
	if strings.Contains(sc, "main.worker") || !strings.Contains(sc, "main.handle") {
		t.Errorf("filter 'handle' shows other groups or none:\n%s", sc)
	}

	s.keys("Enter")
	sc = s.waitFor("an expanded group", contains("goroutines ", "main.handle(...)", "lockserver/main.go"))
	if !strings.Contains(sc, "created by main.main") {
		t.Errorf("expanded stack lacks its creator:\n%s", sc)
	}

	s.keys("q")
	sc = s.waitFor("gi exiting", contains("GI-EXIT=0"))
	if strings.Contains(sc, "gi top - pid") || !strings.Contains(sc, "BEFORE-GI-TOP") {
		t.Errorf("the terminal was not restored after quitting:\n%s", sc)
	}
	checkReleased(t, progs, links)
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Errorf("target broken after gi top: %v", err)
	}
}

// handleRow matches a gi top row of main.handle; its group is CALLS.
var handleRow = regexp.MustCompile(`(?m)^[ >]\s*\d+\s+.*\s~?(\d+)\s+\S+\s+\S+\s+main\.handle `)

// handleCalls returns the CALLS of the main.handle row of a gi top screen
// (~N, an estimate, when the budget sampled it), 0 if there is none.
func handleCalls(screen string) int {
	m := handleRow.FindStringSubmatch(screen)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Columns of gi top's rows: "%s %6d  %-22s %8s %8s %9s %9s  %s" (the
// selection mark, COUNT, STATE, MAXWAIT, CALLS, P50, P99, FUNCTION).
var (
	topCount   = [2]int{2, 8}
	topMaxWait = [2]int{33, 41}
	topP99     = [2]int{61, 70}
)

// checkSorted checks that the rows of a gi top screen are in descending
// order of the column at cols (a count or a duration; blank sorts last),
// and that there are rows to order.
func checkSorted(t *testing.T, by, screen string, cols [2]int) {
	t.Helper()
	var values []float64
	header := false
	for _, line := range strings.Split(screen, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "COUNT") {
			header = true
			continue
		}
		if !header || len(line) < cols[1] {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimSpace(line[topCount[0]:topCount[1]])); err != nil {
			continue // an expanded group's lines
		}
		field := strings.TrimSpace(line[cols[0]:cols[1]])
		v := -1.0
		if field != "" {
			if n, err := strconv.Atoi(field); err == nil {
				v = float64(n)
			} else if d, err := time.ParseDuration(field); err == nil {
				v = float64(d)
			} else {
				t.Errorf("sort by %s: cannot read %q in row %q", by, field, line)
			}
		}
		values = append(values, v)
	}
	if len(values) < 2 {
		t.Errorf("sort by %s: %d rows on the screen:\n%s", by, len(values), screen)
		return
	}
	for i := 1; i < len(values); i++ {
		if values[i] > values[i-1] {
			t.Errorf("sort by %s: row %d (%v) after row %d (%v):\n%s", by, i, values[i], i-1, values[i-1], screen)
			return
		}
	}
}

func TestTopWithoutTerminal(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	_, stderr, code := runGi(t, "top", strconv.Itoa(p.Pid))
	checkOneLineError(t, stderr, code, `needs a terminal`)
}

// findProcess returns the pid of the process whose command line contains s.
func findProcess(t *testing.T, s string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			cmd := strings.ReplaceAll(string(b), "\x00", " ")
			if strings.Contains(cmd, s) && !strings.Contains(cmd, "sh -c") && !strings.HasPrefix(cmd, "sh") {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no process with %q in its command line", s)
	return 0
}

// TestTopSmallTerminal runs gi top in a 12-line terminal on the psstates
// target (more groups than fit) and moves the selection past the last
// visible row: the view scrolls, the selected row (marked '>') stays on
// screen, and the lines hidden above and below are counted.
func TestTopSmallTerminal(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "psstates", targets.BuildOptions{}), "-park", "50", "-depth", "20", "-spin", "1")
	s := newTmux(t, "gitopsmall"+strconv.Itoa(os.Getpid()), 160, 12)
	s.keys(gi+" top --max-overhead none "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")
	sc := s.waitFor("the view with more below", contains("gi top - pid", "↓ "))
	if !strings.Contains(sc, "> ") {
		t.Fatalf("no selected row marked:\n%s", sc)
	}
	for i := 0; i < 12; i++ {
		s.keys("j")
	}
	sc = s.waitFor("the selection scrolled into view", func(sc string) bool {
		return strings.Contains(sc, "↑ ") && strings.Contains(sc, "\n> ")
	})
	if n := strings.Count(sc, "\n> "); n != 1 {
		t.Errorf("%d selected rows on screen, want 1:\n%s", n, sc)
	}
	s.keys("Escape") // harmless outside the prompt
	s.keys("Home")
	s.waitFor("back at the top", func(sc string) bool { return !strings.Contains(sc, "↑ ") && strings.Contains(sc, "\n> ") })
	s.keys("q")
	s.waitFor("gi exiting", contains("GI-EXIT=0"))
	targets.CheckNotStopped(t, p.Pid)
}

// TestTopFollowsNewFunctions: gi top on a server whose traffic starts only
// after gi top attached (testdata/fanout: requests on fresh goroutines
// through main.stageA → stageB → stageC). The stages appear as goroutines
// move into them and get their latencies from the same trace, grown in
// place: gi holds the same BPF programs before and after (nothing is
// reloaded or re-attached).
func TestTopFollowsNewFunctions(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "fanout", targets.BuildOptions{}), "-stage", "20ms")
	s := newTmux(t, "gitopfollow"+strconv.Itoa(os.Getpid()), 220, 50)
	s.keys(gi+" top --max-overhead none "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")
	s.waitFor("the first view", contains("gi top - pid "+strconv.Itoa(p.Pid), "main.main"))
	giPid := findProcess(t, "top --max-overhead none "+strconv.Itoa(p.Pid))
	// The programs gi holds once its first trace is attached (in the
	// background): links made, and the same set twice in a row.
	programs := func() ([]uint32, int) {
		progs, links := bpfObjectsOf(t, giPid)
		slices.Sort(progs)
		return slices.Compact(progs), len(links)
	}
	var progs []uint32
	for deadline := time.Now().Add(30 * time.Second); ; {
		now, links := programs()
		if links > 0 && slices.Equal(now, progs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gi top's first trace never settled: programs %v, %d links", now, links)
		}
		progs = now
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := p.Do("clients 6", time.Minute); err != nil {
		t.Fatal(err)
	}
	stageRow := regexp.MustCompile(`(?m)^[ >]\s*\d+\s+sleep\s+.*?\s(\d+)\s+\S+\s+\S+\s+main\.stage[ABC] `)
	sc := s.waitFor("a stage with calls", func(sc string) bool {
		for _, m := range stageRow.FindAllStringSubmatch(sc, -1) {
			if n, _ := strconv.Atoi(m[1]); n > 0 {
				return true
			}
		}
		return false
	})
	after, _ := programs()
	_, links := bpfObjectsOf(t, giPid)
	if !slices.Equal(progs, after) {
		t.Errorf("gi top's BPF programs changed as the trace grew: %v, then %v:\n%s", progs, after, sc)
	}
	s.keys("q")
	s.waitFor("gi exiting", contains("GI-EXIT=0"))
	checkReleased(t, after, links)
	targets.CheckNotStopped(t, p.Pid)
}

// TestTopWhyInTmux runs gi top --why against lockserver, whose workers
// wait for the shared mutex about five times as long as they hold it:
// main.handle's row must say it is mostly sync.Mutex.Lock (as gi ps
// --trace --why does, TestPsTraceWhy), and quitting must detach the
// scheduler's probes with the rest. Traced whole (--max-overhead none), as
// the budget would sample main.handle and the scheduler's probes.
func TestTopWhyInTmux(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-pause", "0")
	s := newTmux(t, "gitopwhy"+strconv.Itoa(os.Getpid()), 220, 50)
	s.keys(gi+" top --max-overhead none --why "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")
	mostly := regexp.MustCompile(`(?m)^[ >]\s*\d+\s+.*\s(\S+) (\d+)%\s+main\.handle `)
	sc := s.waitFor("main.handle mostly waiting for the mutex", func(sc string) bool {
		m := mostly.FindStringSubmatch(sc)
		return m != nil && m[1] == "sync.Mutex.Lock"
	})
	if !strings.Contains(sc, "MOSTLY") {
		t.Errorf("no MOSTLY column:\n%s", sc)
	}
	// Each worker holds the lock 1 ms and waits for the five others.
	if m := mostly.FindStringSubmatch(sc); m != nil {
		if share, _ := strconv.Atoi(m[2]); share < 60 || share > 95 {
			t.Errorf("main.handle mostly sync.Mutex.Lock %d%%, want about 5/6:\n%s", share, sc)
		}
	}
	giPid := findProcess(t, "top --max-overhead none --why "+strconv.Itoa(p.Pid))
	progs, links := bpfObjectsOf(t, giPid)
	s.keys("q")
	s.waitFor("gi exiting", contains("GI-EXIT=0"))
	checkReleased(t, progs, links)
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Errorf("target broken after gi top --why: %v", err)
	}
}

// TestTopBudgetInTmux: under a budget main.handle's calls do not fit
// (see TestPsTraceBudget), gi top traces it in sampling windows, and its
// CALLS column shows an estimate, ~N.
func TestTopBudgetInTmux(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-pause", "0")
	s := newTmux(t, "gitopbudget"+strconv.Itoa(os.Getpid()), 220, 50)
	s.keys(gi+" top --max-overhead 2% "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")
	estimated := regexp.MustCompile(`(?m)^[ >]\s*\d+\s+.*\s~(\d+)\s+\S+\s+\S+\s+main\.handle `)
	sc := s.waitFor("main.handle's calls estimated", func(sc string) bool {
		m := estimated.FindStringSubmatch(sc)
		return m != nil && m[1] != "0"
	})
	if !strings.Contains(sc, "traced in sampling windows: main.handle") {
		t.Errorf("no warning that main.handle is sampled:\n%s", sc)
	}
	s.keys("q")
	s.waitFor("gi exiting", contains("GI-EXIT=0"))
	targets.CheckNotStopped(t, p.Pid)
}

// TestTopWatchdog: when detaching gi top's probes hangs once the view
// ends (GI_TEST_CLOSE_DELAY), gi exits within its grace all the same
// (GI_TEST_TOP_GRACE), says why, restores the terminal, and leaves the
// target running, untraced.
func TestTopWatchdog(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	s := newTmux(t, "gitopwd"+strconv.Itoa(os.Getpid()), 200, 50)
	s.keys("clear; echo BEFORE-GI-TOP", "Enter")
	s.waitFor("the shell", contains("BEFORE-GI-TOP"))
	s.keys("GI_TEST_CLOSE_DELAY=1h GI_TEST_TOP_GRACE=2s "+gi+" top --max-overhead none "+strconv.Itoa(p.Pid)+"; echo GI-EXIT=$?", "Enter")
	// Latencies on the screen: the trace runs (its probes are in).
	s.waitFor("the grouped view with latencies", func(sc string) bool {
		return strings.Contains(sc, "gi top - pid "+strconv.Itoa(p.Pid)) && handleCalls(sc) > 0
	})
	giPid := findProcess(t, "top --max-overhead none "+strconv.Itoa(p.Pid))
	progs, links := bpfObjectsOf(t, giPid)
	if len(progs) == 0 {
		t.Errorf("gi top holds no BPF programs: no trace runs")
	}
	s.keys("q")
	sc := s.waitFor("gi exiting", contains("GI-EXIT=1"))
	if !strings.Contains(sc, "did not end within 2s") || strings.Contains(sc, "gi top - pid") || !strings.Contains(sc, "BEFORE-GI-TOP") {
		t.Errorf("want the watchdog's line and the terminal restored:\n%s", sc)
	}
	checkReleased(t, progs, links)
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Errorf("target broken after gi top: %v", err)
	}
}
