package targets

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gi-debug/gi/runtimelayout"
)

// MatrixToolchains are the Go releases of the compatibility matrix
// (`make test-matrix`): those of runtimelayout's generated table, the newest patch
// of each supported minor release.
var MatrixToolchains = runtimelayout.TableToolchains()

// MatrixBuilds are the build variants of the matrix.
var MatrixBuilds = []BuildOptions{{}, {PIE: true}, {CgoExternal: true}, {Stripped: true}, {Trimpath: true}}

// MatrixEnabled reports whether the matrix tests should run (GI_TEST_MATRIX=1).
func MatrixEnabled() bool { return os.Getenv("GI_TEST_MATRIX") == "1" }

// MatrixCell is one toolchain and build variant.
type MatrixCell struct {
	Toolchain string
	Opts      BuildOptions
}

// BuildName names the build variant of a cell for the grid.
func (c MatrixCell) BuildName() string {
	o := c.Opts
	o.Toolchain = ""
	s := strings.TrimPrefix(o.String(), "local")
	s = strings.TrimPrefix(s, "/")
	if s == "" {
		return "default"
	}
	return s
}

// MatrixCells lists every cell.
func MatrixCells() []MatrixCell {
	var out []MatrixCell
	for _, tc := range MatrixToolchains {
		for _, b := range MatrixBuilds {
			o := b
			o.Toolchain = tc
			out = append(out, MatrixCell{Toolchain: tc, Opts: o})
		}
	}
	return out
}

// PrebuildMatrix builds program for every cell, several at a time.
func PrebuildMatrix(tb testing.TB, program string) {
	tb.Helper()
	cells := MatrixCells()
	errs := make([]error, len(cells))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	for i, c := range cells {
		wg.Add(1)
		go func(i int, c MatrixCell) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = BuildPath(program, c.Opts)
		}(i, c)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Errorf("build %s for %s: %v", program, cells[i].Opts, err)
		}
	}
}

// Grid collects one result per cell and prints them as a table.
type Grid struct {
	mu    sync.Mutex
	cells map[[2]string]string
}

// Set records the result of a cell.
func (g *Grid) Set(c MatrixCell, result string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cells == nil {
		g.cells = map[[2]string]string{}
	}
	g.cells[[2]string{c.Toolchain, c.BuildName()}] = result
}

// Print writes the grid: a row per toolchain, a column per build variant.
func (g *Grid) Print(w io.Writer, title string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var cols []string
	for _, b := range MatrixBuilds {
		cols = append(cols, MatrixCell{Opts: b}.BuildName())
	}
	fmt.Fprintf(w, "\n%s\n%-12s", title, "")
	for _, c := range cols {
		fmt.Fprintf(w, " %-13s", c)
	}
	fmt.Fprintln(w)
	for _, tc := range MatrixToolchains {
		fmt.Fprintf(w, "%-12s", tc)
		for _, c := range cols {
			r := g.cells[[2]string{tc, c}]
			if r == "" {
				r = "-"
			}
			fmt.Fprintf(w, " %-13s", r)
		}
		fmt.Fprintln(w)
	}
}
