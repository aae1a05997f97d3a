package link

import (
	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/trace"
)

// ProgramOf describes the program in bin: its main module from the build
// info, and traceability as trace.Select decides it (no runtime internals,
// no assembly, code that decodes strictly), asked once per function.
func ProgramOf(bin *elfbin.Binary) Program {
	known := map[string]string{}
	return Program{
		MainModule: bin.MainModule,
		Untraceable: func(function string) string {
			why, seen := known[function]
			if !seen {
				sel, err := trace.Select(bin, []trace.Pattern{trace.ExactName(function)}, nil)
				switch {
				case err != nil:
					why = err.Error()
				case len(sel.Functions) == 0 && len(sel.Untraceable) > 0:
					why = sel.Untraceable[0].Reason
				case len(sel.Functions) == 0:
					why = "not in the binary's function table"
				}
				known[function] = why
			}
			return why
		},
	}
}
