package trace

import (
	"sort"
	"sync"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/decodes"
	"github.com/gi-debug/gi/pclntab"
)

// Sites is what gi knows of the probe sites of one binary's functions,
// decoded once each and only when a selection first asks for them: every
// selection made on the binary (Select, Session.Add, a tracer asking
// whether a goroutine's frame can be measured) shares it, so that a
// command reads each function's code once however many traces it opens.
// A Sites is safe for concurrent use; it does not own the binary.
type Sites struct {
	bin *elfbin.Binary

	mu      sync.Mutex
	known   map[*pclntab.Func]siteOutcome
	decoded int
	// first is each name's first function in table order (what matchFuncs
	// keeps of duplicates), made on the first selection by exact names.
	first map[string]*pclntab.Func
}

// siteOutcome is a function's decoded probe sites, or why it cannot be
// traced.
type siteOutcome struct {
	fn     *Function // the decoded function: copied into each selection
	reason string
}

// NewSites returns the probe sites of bin's functions, none decoded yet.
func NewSites(bin *elfbin.Binary) *Sites {
	return &Sites{bin: bin, known: map[*pclntab.Func]siteOutcome{}}
}

// Binary returns the binary the sites are in.
func (s *Sites) Binary() *elfbin.Binary { return s.bin }

// Decoded returns how many functions' code has been decoded so far.
func (s *Sites) Decoded() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decoded
}

// Select finds the functions matching any of include and none of exclude,
// with their probe sites (see the package function Select).
func (s *Sites) Select(include, exclude []Pattern) (*Selection, error) {
	return s.selectMatched(s.match(include, exclude), include)
}

// match is matchFuncs on the binary, except that exact names (what gi ps
// --trace and gi top select, a few at a time, at every snapshot) are
// looked up instead of matched against every function of the binary.
func (s *Sites) match(include, exclude []Pattern) []*pclntab.Func {
	for _, p := range include {
		if !p.exact {
			return matchFuncs(s.bin, include, exclude)
		}
	}
	s.mu.Lock()
	if s.first == nil {
		s.first = map[string]*pclntab.Func{}
		for _, f := range s.bin.Lines.Funcs() {
			if _, dup := s.first[f.Name]; !dup {
				s.first[f.Name] = f
			}
		}
	}
	var out []*pclntab.Func
	seen := map[string]bool{}
	for _, p := range include {
		if f := s.first[p.text]; f != nil && !seen[f.Name] && !matchAny(exclude, f.Name) {
			seen[f.Name] = true
			out = append(out, f)
		}
	}
	s.mu.Unlock()
	// In the function table's order, as matchFuncs returns them.
	sort.Slice(out, func(i, j int) bool { return out[i].Entry < out[j].Entry })
	return out
}

// outcomes returns the decoded outcome of each function of matched,
// decoding those not known yet on parallel goroutines.
func (s *Sites) outcomes(matched []*pclntab.Func) []siteOutcome {
	out := make([]siteOutcome, len(matched))
	var todo []int
	s.mu.Lock()
	for i, f := range matched {
		if o, ok := s.known[f]; ok {
			out[i] = o
		} else {
			todo = append(todo, i)
		}
	}
	s.mu.Unlock()
	decodes.Add(decodes.ProbeSites, len(todo))
	chunks := (len(todo) + selectChunk - 1) / selectChunk
	parallel(chunks, func(c int) error {
		for _, i := range todo[c*selectChunk : min((c+1)*selectChunk, len(todo))] {
			fn, reason := probeFunction(s.bin, matched[i])
			out[i] = siteOutcome{fn, reason}
		}
		return nil
	})
	s.mu.Lock()
	for _, i := range todo {
		if _, ok := s.known[matched[i]]; !ok {
			s.known[matched[i]] = out[i]
			s.decoded++
		}
	}
	s.mu.Unlock()
	return out
}
