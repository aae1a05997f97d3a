package report

import (
	"github.com/gi-debug/gi/trace"
)

// Funcs is the document `gi funcs --json` prints: the functions patterns
// match in a binary, where their probes go, and why any cannot be traced.
type Funcs struct {
	// Binary is the executable read (/proc/<pid>/exe for a process).
	Binary    string `json:"binary"`
	GoVersion string `json:"go_version"`
	// Probes is the number of probe points tracing Functions would attach.
	Probes      int           `json:"probes"`
	Functions   []Func        `json:"functions"`
	Untraceable []Untraceable `json:"untraceable"`
	// RatesError says why the call rates of a process's functions were
	// not counted (without privileges, say).
	RatesError string `json:"rates_error,omitempty"`
}

// Func is one traceable function of a Funcs document.
type Func struct {
	Name string `json:"name"`
	// Entry is where the function begins, EntrySite where its entry probe
	// goes (past the stack-check prologue); Returns where its RET probes
	// go. All are link-time addresses.
	Entry     uint64   `json:"entry"`
	EntrySite uint64   `json:"entry_site"`
	Returns   []uint64 `json:"returns"`
	// EntryOnly marks a function without a RET: traced at entry only.
	EntryOnly bool   `json:"entry_only"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	// CallsPerSecond and TracedCost are its call rate, counted for a
	// short window in a process, and the share of the process's CPU time
	// tracing it whole would take; absent when not counted.
	CallsPerSecond *float64 `json:"calls_per_second,omitempty"`
	TracedCost     *float64 `json:"traced_cost,omitempty"`
}

// Untraceable is a matched function that cannot be traced, and why.
type Untraceable struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// NewFuncs builds the document of sel, read from the binary at path.
func NewFuncs(path, goVersion string, sel *trace.Selection) *Funcs {
	doc := &Funcs{Binary: path, GoVersion: goVersion, Functions: []Func{}, Untraceable: []Untraceable{}}
	for _, f := range sel.Functions {
		doc.Probes += 1 + len(f.Returns)
		rets := f.Returns
		if rets == nil {
			rets = []uint64{}
		}
		doc.Functions = append(doc.Functions, Func{Name: f.Name, Entry: f.Entry, EntrySite: f.EntrySite, Returns: rets,
			EntryOnly: f.EntryOnly, File: f.File, Line: f.Line})
	}
	for _, u := range sel.Untraceable {
		doc.Untraceable = append(doc.Untraceable, Untraceable{Name: u.Name, Reason: u.Reason})
	}
	return doc
}

// AddRates sets the functions' call rates from rates (by name; nil when
// not counted), or says why they were not counted (err).
func (d *Funcs) AddRates(rates map[string]trace.CallRate, err string) {
	d.RatesError = err
	if rates == nil {
		return
	}
	for i := range d.Functions {
		r := rates[d.Functions[i].Name]
		perSecond, cost := r.PerSecond, r.Cost
		d.Functions[i].CallsPerSecond, d.Functions[i].TracedCost = &perSecond, &cost
	}
}
