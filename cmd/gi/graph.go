package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
	"unicode"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/outfile"
)

// writeGraphDOT renders a wait-for graph in Graphviz's DOT: objects as
// boxes, goroutines as ellipses, folded waiters as stacked boxes, the
// edges of a deadlock's cycle and its goroutines in red.
func writeGraphDOT(w io.Writer, g *inspect.WaitGraph, title string) error {
	var b bytes.Buffer
	b.WriteString("digraph waitfor {\n")
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n", dotQuote(title))
	for _, n := range g.Nodes {
		attrs := []string{"label=" + dotQuote(n.Label)}
		switch n.Kind {
		case "object":
			attrs = append(attrs, "shape=box", "style=rounded")
		case "waiters":
			attrs = append(attrs, "shape=box3d")
		default:
			attrs = append(attrs, "shape=ellipse")
		}
		if n.Deadlocked {
			attrs = append(attrs, "color=red", "fontcolor=red", "penwidth=2")
		}
		fmt.Fprintf(&b, "  %s [%s];\n", dotQuote(n.ID), strings.Join(attrs, ", "))
	}
	for _, e := range g.Edges {
		attrs := []string{"label=" + dotQuote(e.Kind)}
		if e.Kind == "held-by" {
			attrs = append(attrs, "style=dashed")
		}
		if e.Cycle {
			attrs = append(attrs, "color=red", "fontcolor=red", "penwidth=2")
		}
		fmt.Fprintf(&b, "  %s -> %s [%s];\n", dotQuote(e.From), dotQuote(e.To), strings.Join(attrs, ", "))
	}
	if g.CutObjects > 0 {
		fmt.Fprintf(&b, "  cut [shape=note, label=%s];\n", dotQuote(fmt.Sprintf("%d more objects (%d goroutines waiting on them) left out", g.CutObjects, g.CutGoroutines)))
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// dotQuote quotes s as a DOT string: a quote and a backslash escaped, a
// newline as DOT's line break, other control and unprintable characters
// as spaces, invalid UTF-8 as U+FFFD (names and addresses come from the
// target's memory).
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case !unicode.IsPrint(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// dotTimeout bounds Graphviz's layout of a graph.
const dotTimeout = time.Minute

// graphFile is where --graph writes the wait-for graph: opened before
// the target is touched, so that a path that cannot be written, or an
// SVG without Graphviz, fails first.
type graphFile struct {
	out *outfile.File
	dot string // Graphviz's dot, for an SVG; "" for DOT
}

// openGraphFile opens path for the wait-for graph: DOT, or SVG through
// Graphviz's dot when path ends in .svg. It writes through a temporary
// file renamed into place, so a link planted at path is replaced, not
// followed.
func openGraphFile(path string) (*graphFile, error) {
	g := &graphFile{}
	if strings.HasSuffix(strings.ToLower(path), ".svg") {
		bin, err := exec.LookPath("dot")
		if err != nil {
			return nil, fmt.Errorf("--graph %s: an SVG needs Graphviz's dot on PATH (Debian: apt-get install graphviz); or give a .dot file", path)
		}
		g.dot = bin
	}
	out, err := outfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--graph: %w", err)
	}
	g.out = out
	return g, nil
}

// abort removes what was written, if not committed.
func (g *graphFile) abort() { g.out.Abort() }

// write writes the graph and commits the file.
func (g *graphFile) write(graph *inspect.WaitGraph, title string) error {
	path := g.out.Path()
	var dot bytes.Buffer
	if err := writeGraphDOT(&dot, graph, title); err != nil {
		return err
	}
	if g.dot != "" {
		ctx, cancel := context.WithTimeout(context.Background(), dotTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, g.dot, "-Tsvg")
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = &dot, g.out, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("--graph %s: dot: %v: %s", path, err, oneLine(stderr.String()))
		}
	} else if _, err := g.out.Write(dot.Bytes()); err != nil {
		return fmt.Errorf("--graph: %w", err)
	}
	if err := g.out.Commit(); err != nil {
		return fmt.Errorf("--graph: %w", err)
	}
	return nil
}
