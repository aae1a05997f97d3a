package measure

import (
	"sync"

	"github.com/gi-debug/gi/trace"
)

// ProgramOf describes the program whose probe sites are sites: its main
// module from the build info, and traceability as trace.Select decides it
// (no runtime internals, no assembly, code that decodes strictly), asked
// once per function and decoded once in all (the traces opened on sites
// share the decoding).
func ProgramOf(sites *trace.Sites) Program {
	var mu sync.Mutex
	known := map[string]string{}
	return Program{
		MainModule: sites.Binary().MainModule,
		Untraceable: func(function string) string {
			mu.Lock()
			why, seen := known[function]
			mu.Unlock()
			if seen {
				return why
			}
			sel, err := sites.Select([]trace.Pattern{trace.ExactName(function)}, nil)
			switch {
			case err != nil:
				why = err.Error()
			case len(sel.Functions) == 0 && len(sel.Untraceable) > 0:
				why = sel.Untraceable[0].Reason
			case len(sel.Functions) == 0:
				why = "not in the binary's function table"
			}
			mu.Lock()
			known[function] = why
			mu.Unlock()
			return why
		},
	}
}
