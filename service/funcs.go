package service

import (
	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/trace"
)

// FuncsRequest says which functions gi funcs lists: those of a process
// (PID) or of an executable (Path) that the patterns match, with their
// call rates counted in the process when Rates is set.
type FuncsRequest struct {
	PID              int
	Path             string
	Include, Exclude []string
	Rates            bool
}

// FuncsResult lists the functions a FuncsRequest matched.
type FuncsResult struct {
	// Path is the executable read, GoVersion the release that built it.
	Path      string
	GoVersion string
	// Selection holds the functions matched, with their probe sites, and
	// those that cannot be traced, with why.
	Selection *trace.Selection
	// Rates are the calls per second counted, by function name (nil: not
	// counted), or RatesErr why they could not be.
	Rates    map[string]trace.CallRate
	RatesErr error
}

// CheckPatterns says whether the patterns of functions to trace (include)
// and to leave out (exclude) parse.
func CheckPatterns(include, exclude []string) error {
	if _, err := parsePatterns(include, ""); err != nil {
		return err
	}
	_, err := parsePatterns(exclude, "--exclude")
	return err
}

// Funcs lists the functions r's patterns match and, in a process, counts
// their calls for a moment (an entry probe that only counts).
func Funcs(r FuncsRequest) (*FuncsResult, error) {
	include, err := parsePatterns(r.Include, "")
	if err != nil {
		return nil, err
	}
	exclude, err := parsePatterns(r.Exclude, "--exclude")
	if err != nil {
		return nil, err
	}
	// A process is read through proc, as every command reads it; the
	// executable alone where the process's memory cannot be opened.
	var bin *elfbin.Binary
	var p *proc.Process
	path := r.Path
	if r.PID != 0 {
		if p, err = proc.Open(r.PID); err == nil {
			defer p.Close()
			bin, path = p.Exe, p.Exe.Path
		} else if bin, err = elfbin.Open(proc.ExePath(r.PID)); err != nil {
			return nil, err
		} else {
			defer bin.Close()
			path = bin.Path
		}
	} else {
		if bin, err = elfbin.Open(path); err != nil {
			return nil, err
		}
		defer bin.Close()
	}
	// One reading of the binary's probe sites for the listing and the
	// counting.
	sites := trace.NewSites(bin)
	sel, err := sites.Select(include, exclude)
	if err != nil {
		return nil, err
	}
	res := &FuncsResult{Path: path, GoVersion: bin.GoVersion, Selection: sel}
	if r.PID != 0 && r.Rates && len(sel.Functions) > 0 {
		counted, err := trace.CountCalls(trace.Options{PID: r.PID, Include: include, Exclude: exclude, Sites: sites, Process: p})
		if err != nil {
			res.RatesErr = err
		} else {
			res.Rates = map[string]trace.CallRate{}
			for _, c := range counted {
				res.Rates[c.Func.Name] = c
			}
		}
	}
	return res, nil
}
