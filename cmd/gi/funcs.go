package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
)

func newFuncsCommand() *cobra.Command {
	var exclude []string
	var asJSON, rates bool
	cmd := &cobra.Command{
		Use:   "funcs <pid|name|binary> [PATTERN...]",
		Short: "List the functions patterns match, their probe counts, call rates, and why any cannot be traced",
		Long: `funcs lists the functions the patterns match, where their probes go, and why
any cannot be traced. In a process it also counts each one's calls for 50 ms
(an entry probe that only counts, then detached) and shows its calls per
second and what tracing it whole would cost the process (CALLS/S, IF
TRACED: the share of the process's CPU time), so a hot pattern shows before
it costs anything; --rates=false skips that.`,
		Example: `  gi funcs 4242                           # the functions of package main in pid 4242, with call rates
  gi funcs ./server 'net/http.*'          # in a binary, before running it
  gi funcs --json 4242 'main.(*Server).*'
  kubectl debug -it mypod --target=app --image=gi --profile=sysadmin -- gi funcs 1 'main.*'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patterns := args[1:]
			if len(patterns) == 0 {
				patterns = []string{"main.*"}
			}
			return runFuncs(cmd.OutOrStdout(), args[0], patterns, exclude, asJSON, rates)
		},
	}
	cmd.Flags().BoolVar(&rates, "rates", true, "in a process, count each function's calls for 50 ms (needs the privileges gi trace needs)")
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "drop functions matching `PATTERN` (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func runFuncs(out io.Writer, target string, patterns, excludes []string, asJSON, countRates bool) error {
	req := service.FuncsRequest{Include: patterns, Exclude: excludes, Rates: countRates}
	// Patterns are refused before the target is looked for.
	err := service.CheckPatterns(patterns, excludes)
	if err != nil {
		return err
	}
	if req.PID, req.Path, err = traceTarget(target); err != nil {
		return err
	}
	res, err := service.Funcs(req)
	if err != nil {
		return err
	}
	sel, rates, rateErr := res.Selection, res.Rates, ""
	if res.RatesErr != nil {
		rateErr = res.RatesErr.Error()
	}
	if asJSON {
		doc := report.NewFuncs(res.Path, res.GoVersion, sel)
		doc.AddRates(rates, rateErr)
		return report.Write(out, doc)
	}
	tbl := newTable(out)
	header := []any{"FUNCTION", "ENTRY", "RETURNS", "LOCATION"}
	if rates != nil {
		header = append(header, "CALLS/S", "IF TRACED")
	}
	tbl.Header(append(header, "NOTE")...)
	probes, entryOnly := 0, 0
	for _, f := range sel.Functions {
		probes += 1 + len(f.Returns)
		note := ""
		if f.EntryOnly {
			entryOnly++
			note = "entry only: no RET"
		}
		row := []string{f.Name, fmt.Sprintf("%#x", f.EntrySite), strconv.Itoa(len(f.Returns)), fmt.Sprintf("%s:%d", inspect.ShortPath(f.File), f.Line)}
		if rates != nil {
			r := rates[f.Name]
			row = append(row, fmt.Sprintf("%.0f", r.PerSecond), formatShare(r.Cost))
		}
		tbl.Append(append(row, note))
	}
	for _, u := range sel.Untraceable {
		row := []string{u.Name, "-", "-", ""}
		if rates != nil {
			row = append(row, "", "")
		}
		tbl.Append(append(row, "cannot trace: "+u.Reason))
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	only := ""
	if entryOnly > 0 {
		only = fmt.Sprintf("; %d at entry only (no RET)", entryOnly)
	}
	fmt.Fprintf(out, "\n%d traceable functions (%d probes), %d not traceable%s\n", len(sel.Functions), probes, len(sel.Untraceable), only)
	if rates != nil {
		fmt.Fprintln(out, "CALLS/S: calls counted for 50 ms; IF TRACED: what tracing each whole would take of the process's CPU time (gi trace --max-overhead samples the costliest)")
	}
	if rateErr != "" {
		fmt.Fprintf(out, "call rates not counted: %s\n", rateErr)
	}
	return nil
}

// formatShare renders a share as a percentage with two significant
// digits: 0.078%, 4.2%, 170%.
func formatShare(v float64) string {
	if p := 100 * v; p >= 10 {
		return fmt.Sprintf("%.0f%%", p)
	}
	return fmt.Sprintf("%.2g%%", 100*v)
}
