package link

import (
	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/trace"
)

// ProgramOf describes the program in bin: its main module from the build
// info, and traceability as trace.Select decides it (no runtime internals,
// no assembly, code that decodes strictly), asked once per function.
func ProgramOf(bin *elfbin.Binary) Program {
	known := map[string]bool{}
	return Program{
		MainModule: bin.MainModule,
		Traceable: func(function string) bool {
			ok, seen := known[function]
			if !seen {
				sel, err := trace.Select(bin, []trace.Pattern{trace.ExactName(function)}, nil)
				ok = err == nil && len(sel.Functions) > 0
				known[function] = ok
			}
			return ok
		},
	}
}
