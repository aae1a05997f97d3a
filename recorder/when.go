package recorder

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/report"
)

// Grammar is what a --when may say, one line per form: what the help and
// the errors show.
const Grammar = `goroutines > N          more than N goroutines (>= for at least)
goroutines +N/D         N more goroutines than D ago (e.g. +500/1m)
goroutines +P%/D        P% more goroutines than D ago (e.g. +20%/1m)
count(STATE) > N        more than N goroutines in STATE, as gi ps names it (count(sync.Mutex.Lock) > 100)
FUNC > D                a call of FUNC (traced) longer than D ('main.handle > 500ms')
p99(FUNC) > D           the 99th percentile (p50, p90, p99, p999) of FUNC's calls that ended since the last snapshot over D
blocked > D             a goroutine blocked longer than D (blocked > 30s): as the runtime stamped its wait, or at least since a snapshot first saw it in the same wait
memory > P%             the process's memory cgroup past P% of its limit
leaks > N               more than N goroutines leaked (gi ps --leaks's rule, judged every --leaks-interval)`

// Condition is one --when of gi record: a condition on the summaries of
// the snapshots, judged after each.
type Condition struct {
	// Text is the condition as given.
	Text string

	kind    conditionKind
	state   string        // count(STATE)
	fn      string        // FUNC > D, pNN(FUNC) > D
	q       float64       // pNN's quantile
	atLeast bool          // >= rather than >
	n       float64       // the threshold: a count, or a percentage
	percent bool          // growth in percent rather than goroutines
	d       time.Duration // blocked's threshold, growth's span
}

type conditionKind int

const (
	goroutinesOver conditionKind = iota
	goroutinesGrow
	stateCount
	blockedOver
	memoryOver
	callOver
	quantileOver
	leaksOver
)

// ParseCondition reads a --when.
func ParseCondition(text string) (*Condition, error) {
	c := &Condition{Text: text}
	s := strings.Join(strings.Fields(text), " ")
	bad := func(why string) error {
		return fmt.Errorf("--when %q: %s (gi record --help lists the conditions)", text, why)
	}
	var lhs, rest string
	switch {
	case strings.HasPrefix(s, "count("):
		end := closing(s, len("count"))
		if end < 0 {
			return nil, bad("count( without )")
		}
		c.kind, c.state = stateCount, strings.TrimSpace(s[len("count("):end])
		if c.state == "" {
			return nil, bad("count() names no state")
		}
		lhs, rest = "count", strings.TrimSpace(s[end+1:])
	case isQuantile(s):
		open := strings.Index(s, "(")
		end := closing(s, open)
		if end < 0 {
			return nil, bad("p99( without )")
		}
		q, ok := report.QuantileOf(s[:open])
		if !ok {
			return nil, bad(fmt.Sprintf("%q is not a percentile the recorder keeps (p50, p90, p99, p999)", s[:open]))
		}
		c.kind, c.q, c.fn = quantileOver, q, strings.TrimSpace(s[open+1:end])
		if c.fn == "" {
			return nil, bad("the percentile names no function")
		}
		return c, c.parseDuration(strings.TrimSpace(s[end+1:]), bad)

	default:
		// The measure ends at the first space or operator.
		i := strings.IndexAny(s, " <>+")
		if i <= 0 {
			return nil, bad("no comparison")
		}
		lhs, rest = s[:i], strings.TrimSpace(s[i:])
	}
	switch lhs {
	case "goroutines":
		if strings.HasPrefix(rest, "+") {
			return c, c.parseGrowth(rest[1:], bad)
		}
		c.kind = goroutinesOver
		return c, c.parseCount(rest, bad)
	case "count":
		if c.kind != stateCount {
			return nil, bad("count wants a state: count(STATE) > N")
		}
		return c, c.parseCount(rest, bad)
	case "leaks":
		c.kind = leaksOver
		return c, c.parseCount(rest, bad)
	case "blocked":
		c.kind = blockedOver
		return c, c.parseDuration(rest, bad)
	case "memory":
		c.kind = memoryOver
		v, err := c.parseOp(rest, bad)
		if err != nil {
			return nil, err
		}
		p, ok := strings.CutSuffix(v, "%")
		f, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || f <= 0 || f > 100 || math.IsNaN(f) {
			return nil, bad(fmt.Sprintf("%q is not a percentage of the limit (90%%)", v))
		}
		c.n = f
		return c, nil
	}
	if strings.Contains(lhs, ".") {
		c.kind, c.fn = callOver, lhs
		return c, c.parseDuration(rest, bad)
	}
	return nil, bad(fmt.Sprintf("%q is not something gi record measures", lhs))
}

// closing returns the index of the parenthesis that closes the one at
// open in s (states and functions hold some: "select (no cases)",
// "net/http.(*conn).serve"), -1 if none does.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// isQuantile says whether s starts with a percentile: "p99(".
func isQuantile(s string) bool {
	i := 1
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return len(s) > 2 && s[0] == 'p' && i > 1 && i < len(s) && s[i] == '('
}

// parseDuration reads "> D" with D a positive duration.
func (c *Condition) parseDuration(rest string, bad func(string) error) error {
	v, err := c.parseOp(rest, bad)
	if err != nil {
		return err
	}
	if c.d, err = time.ParseDuration(v); err != nil || c.d <= 0 {
		return bad(fmt.Sprintf("%q is not a positive duration", v))
	}
	return nil
}

// Function is the function a condition on calls judges ("" for others):
// the recorder traces it.
func (c *Condition) Function() string {
	if c.kind == callOver || c.kind == quantileOver {
		return c.fn
	}
	return ""
}

// OnLeaks says whether the condition needs the leak rule judged.
func (c *Condition) OnLeaks() bool { return c.kind == leaksOver }

// OnCall says whether the condition is judged on each call as it ends
// (FUNC > D) rather than on the snapshots.
func (c *Condition) OnCall() bool { return c.kind == callOver }

// SlowCall judges a call of the condition's function that took d: whether
// it is over the threshold, and what it measured.
func (c *Condition) SlowCall(d time.Duration) (bool, string) {
	if d < c.d || d == c.d && !c.atLeast {
		return false, ""
	}
	return true, fmt.Sprintf("a call of %s took %v", c.fn, d.Round(time.Microsecond))
}

// parseOp reads "> V" or ">= V" and returns V.
func (c *Condition) parseOp(rest string, bad func(string) error) (string, error) {
	switch {
	case strings.HasPrefix(rest, ">="):
		c.atLeast = true
		rest = rest[2:]
	case strings.HasPrefix(rest, ">"):
		rest = rest[1:]
	default:
		return "", bad("want > or >=")
	}
	v := strings.TrimSpace(rest)
	if v == "" {
		return "", bad("no threshold")
	}
	return v, nil
}

// parseCount reads "> N" with N a count.
func (c *Condition) parseCount(rest string, bad func(string) error) error {
	v, err := c.parseOp(rest, bad)
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(v, 10, 31)
	if err != nil {
		return bad(fmt.Sprintf("%q is not a count", v))
	}
	c.n = float64(n)
	return nil
}

// parseGrowth reads "N/D" or "P%/D" (after the +).
func (c *Condition) parseGrowth(rest string, bad func(string) error) error {
	c.kind = goroutinesGrow
	amount, span, ok := strings.Cut(strings.ReplaceAll(rest, " ", ""), "/")
	if !ok {
		return bad("growth wants +N/D or +P%/D")
	}
	amount, c.percent = strings.CutSuffix(amount, "%")
	f, err := strconv.ParseFloat(amount, 64)
	if err != nil || f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return bad(fmt.Sprintf("%q is not a positive growth", amount))
	}
	c.n = f
	if c.d, err = time.ParseDuration(span); err != nil || c.d <= 0 {
		return bad(fmt.Sprintf("%q is not a positive duration", span))
	}
	return nil
}

// State is the state a count(STATE) condition counts ("" for others).
func (c *Condition) State() string {
	if c.kind == stateCount {
		return c.state
	}
	return ""
}

// Span is how much history the condition looks back on (0: the latest
// snapshot alone).
func (c *Condition) Span() time.Duration {
	if c.kind == goroutinesGrow {
		return c.d
	}
	return 0
}

// over compares v with the threshold.
func (c *Condition) over(v float64) bool {
	if c.atLeast {
		return v >= c.n
	}
	return v > c.n
}

// Judged says whether the latest of the summaries can judge the
// condition at all: not a percentile over an interval with no call of its
// function, nor leaks on a snapshot that did not judge them (or could not
// decide). A condition not judged keeps its state: it neither starts nor
// stops holding.
func (c *Condition) Judged(history []report.RecordSummary) bool {
	if len(history) == 0 {
		return false
	}
	now := &history[len(history)-1]
	switch c.kind {
	case quantileOver:
		l, ok := now.Latency(c.fn)
		return ok && l.Calls > 0
	case leaksOver:
		return now.LeaksJudged && now.LeaksUndecided == ""
	}
	return true
}

// Eval judges the condition on the summaries, oldest first (the last is
// the snapshot just taken): whether it holds, and what it measured.
func (c *Condition) Eval(history []report.RecordSummary) (holds bool, value string) {
	if len(history) == 0 {
		return false, "no snapshot"
	}
	now := &history[len(history)-1]
	switch c.kind {
	case goroutinesOver:
		return c.over(float64(now.Goroutines)), fmt.Sprintf("%d goroutines", now.Goroutines)
	case stateCount:
		n := now.Count(c.state)
		return c.over(float64(n)), fmt.Sprintf("%d goroutines in %s", n, c.state)
	case blockedOver:
		w := now.LongestWait()
		if len(now.Longest) == 0 {
			return false, "no goroutine blocked"
		}
		l := now.Longest[0]
		holds := w > c.d || c.atLeast && w == c.d
		return holds, fmt.Sprintf("goroutine %d blocked %v in %s (%s)", l.Goid, w.Round(time.Millisecond), l.State, l.Function)
	case callOver:
		return false, "judged on each call"
	case quantileOver:
		l, ok := now.Latency(c.fn)
		if !ok || l.Calls == 0 {
			return false, fmt.Sprintf("no call of %s ended since the last snapshot", c.fn)
		}
		v := l.Quantile(c.q)
		return v > c.d || c.atLeast && v == c.d, fmt.Sprintf("%s of %s %v over %d calls", report.QuantileName(c.q), c.fn, v.Round(time.Microsecond), l.Calls)
	case leaksOver:
		if !now.LeaksJudged {
			return false, "leaks not judged on this snapshot"
		}
		if now.LeaksUndecided != "" {
			return false, "leaks undecided: " + now.LeaksUndecided
		}
		return c.over(float64(now.Leaked)), fmt.Sprintf("%d goroutines leaked", now.Leaked)
	case memoryOver:
		if now.MemoryLimit <= 0 {
			return false, "no memory limit"
		}
		p := 100 * float64(now.MemoryBytes) / float64(now.MemoryLimit)
		return c.over(p), fmt.Sprintf("memory %.1f%% of its limit (%d of %d MiB)", p, now.MemoryBytes>>20, now.MemoryLimit>>20)
	case goroutinesGrow:
		// The latest snapshot at least the span old.
		var then *report.RecordSummary
		for i := len(history) - 2; i >= 0; i-- {
			if now.Time.Sub(history[i].Time) >= c.d {
				then = &history[i]
				break
			}
		}
		if then == nil {
			return false, fmt.Sprintf("less than %v recorded", c.d)
		}
		grown := float64(now.Goroutines - then.Goroutines)
		value = fmt.Sprintf("%d goroutines, %+d in %v", now.Goroutines, now.Goroutines-then.Goroutines, now.Time.Sub(then.Time).Round(time.Millisecond))
		if c.percent {
			if then.Goroutines == 0 {
				return grown > 0, value
			}
			return c.over(100 * grown / float64(then.Goroutines)), value
		}
		return c.over(grown), value
	}
	return false, ""
}
