package main

import (
	"bufio"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// TestRecordBadInput: a condition, a state or an output gi record cannot
// use is one line and a non-zero exit, and writes nothing.
func TestRecordBadInput(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "2")
	pid := strconv.Itoa(p.Pid)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "records")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "--when", "goroutines <", pid}, `--when "goroutines <"`},
		{[]string{"--out", out, "--when", "count(no.Such) > 1", pid}, "no goroutine of go"},
		{[]string{"--out", out, "--when", "leaks > many", pid}, "not a count"},
		{[]string{"--out", out, "--when", "main.noSuch > 1s", pid}, "main.noSuch"},
		{[]string{"--out", out, "--trace", "main.[", pid}, "--trace"},
		{[]string{"--out", out, "--why", pid}, "--why"},
		{[]string{"--out", file, pid}, "--out"},
		{[]string{"--out", out, "--max-overhead", "none", pid}, "need a budget"},
		{[]string{"--out", out, "--interval", "0s", pid}, "--interval"},
		{[]string{pid}, "--out DIR"},
		{[]string{"--replay", dir}, "not a record"},
		{[]string{"--replay", dir, pid}, "--replay reads a record"},
	} {
		_, stderr, code := runGi(t, append([]string{"record"}, c.args...)...)
		if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("gi record %v: exit %d, stderr %q, want one line with %q", c.args, code, stderr, c.want)
		}
		if ents, _ := os.ReadDir(out); len(ents) > 0 {
			t.Errorf("gi record %v wrote %d entries", c.args, len(ents))
		}
	}
	targets.CheckNotStopped(t, p.Pid)
}

// TestRecordCLI runs gi record on a service, makes its lock pile up,
// asks for a record with SIGUSR1, and ends it with Ctrl-C: a line and a
// record directory for each, the summary last, exit status 0, and the
// service untouched.
func TestRecordCLI(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "4", "-pause", "20ms")
	out := t.TempDir()
	cmd := exec.Command(buildGi(t), "record", strconv.Itoa(p.Pid), "--out", out, "--interval", "100ms", "--when", "count(sync.Mutex.Lock) > 3", "--core")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var all []string
	wait := func(prefix string) string {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("gi record ended before %q: %q", prefix, all)
				}
				all = append(all, l)
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q within a minute: %q", prefix, all)
			}
		}
	}
	wait("gi: recording pid " + strconv.Itoa(p.Pid))
	if _, err := p.Do("stall 1s", time.Minute); err != nil {
		t.Fatal(err)
	}
	line := wait("gi: record: count(sync.Mutex.Lock) > 3 (4 goroutines in sync.Mutex.Lock) → ")
	dir := line[strings.LastIndex(line, "→ ")+len("→ "):]
	if st, err := os.Stat(filepath.Join(dir, "ps.json")); err != nil || st.Size() == 0 || filepath.Dir(dir) != out {
		t.Errorf("record %s: ps.json %v", dir, err)
	}
	// The record's core, read back: the four workers in it.
	listing := giOK(t, "ps", filepath.Join(dir, "core"))
	blocked := 0
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, "sync.Mutex.Lock") && strings.Contains(line, "main.handle") && strings.Contains(line, "mutex main.mu") {
			blocked++
		}
	}
	if blocked != 4 {
		t.Errorf("gi ps of the record's core lists %d workers blocked on main.mu, want 4:\n%s", blocked, listing)
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	wait("gi: record: on demand (SIGUSR1) → ")
	cmd.Process.Signal(syscall.SIGINT)
	summary := wait("gi: ")
	for !strings.Contains(summary, " snapshots over ") {
		summary = wait("gi: ")
	}
	if !strings.Contains(summary, "; 2 records (") {
		t.Errorf("summary %q, want 2 records", summary)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("gi record after Ctrl-C: %v (%q)", err, all)
	}
	ents, err := os.ReadDir(out)
	if err != nil || len(ents) != 2 {
		t.Errorf("%d records in %s (%v), want 2", len(ents), out, err)
	}
	// What the pile-up's record kept, read back without the process.
	replay := giOK(t, "record", "--replay", dir)
	if !strings.HasPrefix(replay, "record of pid "+strconv.Itoa(p.Pid)+" at ") || !strings.Contains(replay, "count(sync.Mutex.Lock) > 3 (4 goroutines in sync.Mutex.Lock)") {
		t.Errorf("replay:\n%s", replay)
	}
	if n := strings.Count(replay, "mutex main.mu (locked"); n != 4 {
		t.Errorf("replay lists %d goroutines waiting on main.mu, want the 4 workers:\n%s", n, replay)
	}
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Errorf("the service after gi record: %v", err)
	}
}

// TestKillGiRecord signals gi record at random moments, half of them
// while it holds the process's threads in a snapshot's stop, 40 times
// (mostly SIGKILL; SIGINT and SIGTERM too): every time the process runs
// on, neither stopped nor traced, with no child, and still answers.
func TestKillGiRecord(t *testing.T) {
	requirePrivilege(t)
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "4", "-pause", "2ms")
	out := t.TempDir()
	signals := []syscall.Signal{syscall.SIGKILL, syscall.SIGKILL, syscall.SIGINT, syscall.SIGKILL, syscall.SIGTERM}
	inStop, aimed := 0, 0
	for i := 0; i < 40; i++ {
		sig := signals[i%len(signals)]
		cmd := exec.Command(gi, "record", strconv.Itoa(p.Pid), "--out", out, "--interval", "10ms", "--max-overhead", "50%", "--when", "goroutines > 0", "--cooldown", "0s")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			aimed++
			if waitTraced(p.Pid, cmd.Process.Pid, 5*time.Second) {
				inStop++
			}
		} else {
			time.Sleep(time.Duration(rand.Intn(300000)) * time.Microsecond)
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !running(p.Pid) {
			time.Sleep(time.Millisecond)
		}
		targets.CheckNotStopped(t, p.Pid)
		if kids := targets.Children(p.Pid); len(kids) > 0 {
			t.Errorf("run %d: the process has children %v", i, kids)
		}
		if t.Failed() {
			t.Fatalf("after run %d (%v)", i, sig)
		}
	}
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Fatalf("the service after the kills: %v", err)
	}
	t.Logf("%d of %d aimed signals landed while gi held the threads", inStop, aimed)
	if inStop < aimed*8/10 {
		t.Errorf("only %d of %d aimed signals landed in a stop", inStop, aimed)
	}
}

// TestParseSize reads sizes in bytes and refuses what is none.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "1KiB": 1024, "1k": 1024, "1.5MiB": 3 << 19, "2GB": 2 << 30, "1 GiB": 1 << 30, "3T": 3 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1MiB", "1PiB", "1 meg", "1e9"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}
