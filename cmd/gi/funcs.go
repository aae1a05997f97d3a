package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/trace"
)

func newFuncsCommand() *cobra.Command {
	var exclude []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "funcs <pid|name|binary> [PATTERN...]",
		Short: "List the functions patterns match, their probe counts, and why any cannot be traced",
		Example: `  gi funcs 4242                           # the functions of package main in pid 4242
  gi funcs ./server 'net/http.*'          # in a binary, before running it
  gi funcs --json 4242 'main.(*Server).*'
  kubectl debug -it mypod --target=app --image=gi --profile=sysadmin -- gi funcs 1 'main.*'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patterns := args[1:]
			if len(patterns) == 0 {
				patterns = []string{"main.*"}
			}
			return runFuncs(cmd.OutOrStdout(), args[0], patterns, exclude, asJSON)
		},
	}
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "drop functions matching `PATTERN` (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func runFuncs(out io.Writer, target string, patterns, excludes []string, asJSON bool) error {
	include, err := parsePatterns(patterns, "")
	if err != nil {
		return err
	}
	exclude, err := parsePatterns(excludes, "--exclude")
	if err != nil {
		return err
	}
	pid, path, err := traceTarget(target)
	if err != nil {
		return err
	}
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/exe"
	}
	bin, err := elfbin.Open(path)
	if err != nil {
		return err
	}
	defer bin.Close()
	sel, err := trace.Select(bin, include, exclude)
	if err != nil {
		return err
	}
	if asJSON {
		return report.Write(out, report.NewFuncs(path, bin.GoVersion, sel))
	}
	tbl := newTable(out)
	tbl.Header("FUNCTION", "ENTRY", "RETURNS", "LOCATION", "NOTE")
	probes, entryOnly := 0, 0
	for _, f := range sel.Functions {
		probes += 1 + len(f.Returns)
		note := ""
		if f.EntryOnly {
			entryOnly++
			note = "entry only: no RET"
		}
		tbl.Append([]string{f.Name, fmt.Sprintf("%#x", f.EntrySite), strconv.Itoa(len(f.Returns)), fmt.Sprintf("%s:%d", shortFile(f.File), f.Line), note})
	}
	for _, u := range sel.Untraceable {
		tbl.Append([]string{u.Name, "-", "-", "", "cannot trace: " + u.Reason})
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	only := ""
	if entryOnly > 0 {
		only = fmt.Sprintf("; %d at entry only (no RET)", entryOnly)
	}
	fmt.Fprintf(out, "\n%d traceable functions (%d probes), %d not traceable%s\n", len(sel.Functions), probes, len(sel.Untraceable), only)
	return nil
}
