package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
)

// warnMissing says in one line on errOut what memory the core lacks that
// gi needed (a truncated core, mappings its coredump_filter left out):
// the listing then holds the goroutines gi could still decode. When that
// left none, it is the error instead.
func warnMissing(errOut io.Writer, c *core.Core, snap *inspect.Snapshot) error {
	missing := c.Missing()
	if len(missing) == 0 {
		return nil
	}
	text := missingText(missing)
	if len(snap.Goroutines) == 0 {
		return fmt.Errorf("core %s: no goroutine could be decoded: it lacks %s", c.Path, text)
	}
	fmt.Fprintf(errOut, "gi: warning: core %s lacks memory gi needs, so the listing holds only what it could decode: %s\n", c.Path, text)
	return nil
}

// missingText names the missing mappings, a few per reason.
func missingText(missing []core.MissingMemory) string {
	const shown = 4
	var reasons []string
	byReason := map[string][]string{}
	for _, m := range missing {
		r := m.Reason()
		if _, ok := byReason[r]; !ok {
			reasons = append(reasons, r)
		}
		byReason[r] = append(byReason[r], strings.TrimSuffix(m.String(), ", "+r))
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		ranges := byReason[r]
		if len(ranges) > shown {
			ranges = append(ranges[:shown:shown], fmt.Sprintf("%d more", len(ranges)-shown))
		}
		what := "mapping "
		if len(byReason[r]) > 1 {
			what = "mappings "
		}
		parts[i] = what + strings.Join(ranges, ", ") + ", " + r
	}
	return strings.Join(parts, "; ")
}
