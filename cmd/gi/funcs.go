package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/trace"
)

func newFuncsCommand() *cobra.Command {
	var exclude []string
	cmd := &cobra.Command{
		Use:   "funcs <pid|name|binary> [PATTERN...]",
		Short: "List the functions patterns match, their probe counts, and why any cannot be traced",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patterns := args[1:]
			if len(patterns) == 0 {
				patterns = []string{"main.*"}
			}
			return runFuncs(cmd.OutOrStdout(), args[0], patterns, exclude)
		},
	}
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "drop functions matching `PATTERN` (repeatable)")
	return cmd
}

func runFuncs(out io.Writer, target string, patterns, excludes []string) error {
	include, err := parsePatterns(patterns, "pattern")
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
