// Package decodes counts how often gi derives each fact of an executable
// or a process (its ELF and pclntab, DWARF, runtime layout, runtime
// strings, load bias, probe sites), so that tests can hold a command to
// deriving each once: every package that needs one asks the per-process
// model (proc.Process) or the per-executable one (elfbin.Binary,
// trace.Sites) instead of deriving it again.
package decodes

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Kind is a fact gi derives.
type Kind int

// The facts counted.
const (
	// ELF: an executable's headers, build info and pclntab parsed.
	ELF Kind = iota
	// DWARF: a binary's DWARF sections read and parsed.
	DWARF
	// Layout: the runtime's layout derived (or read from the cache).
	Layout
	// RuntimeStrings: the runtime's wait-reason and status names read.
	RuntimeStrings
	// LoadBias: a process's load bias read from /proc.
	LoadBias
	// ProbeSites: one function's probe sites decoded.
	ProbeSites
	kinds
)

var names = [kinds]string{"ELF", "DWARF", "runtime layout", "runtime strings", "load bias", "probe sites"}

// String names the kind.
func (k Kind) String() string { return names[k] }

var counts [kinds]atomic.Int64

// Add counts n more derivations of k.
func Add(k Kind, n int) { counts[k].Add(int64(n)) }

// Counts holds a count per kind.
type Counts [kinds]int64

// Now returns the counts so far.
func Now() Counts {
	var c Counts
	for i := range counts {
		c[i] = counts[i].Load()
	}
	return c
}

// Since returns what was counted since c.
func (c Counts) Since() Counts {
	now := Now()
	for i := range now {
		now[i] -= c[i]
	}
	return now
}

// String lists the counts.
func (c Counts) String() string {
	var b strings.Builder
	for k := Kind(0); k < kinds; k++ {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, c[k])
	}
	return b.String()
}

// Of returns the count of k.
func (c Counts) Of(k Kind) int64 { return c[k] }
