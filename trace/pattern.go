package trace

import (
	"fmt"
	"strings"
)

// Pattern is a shell wildcard over fully qualified function names: `*`
// matches any run of characters (dots and slashes included), `?` one
// character, and `[...]` a character class as in path.Match.
type Pattern struct {
	text  string
	exact bool
}

// ExactName returns a pattern matching one function name literally, with
// no wildcard meaning for the `*`, `?` and `[` its name may hold
// (`main.(*T).m`, `main.F[...]`).
func ExactName(name string) Pattern { return Pattern{text: name, exact: true} }

// ParsePattern validates a wildcard pattern.
func ParsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("empty pattern")
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case '\\':
			i++
		}
		if depth < 0 || depth > 1 {
			return Pattern{}, fmt.Errorf("pattern %q: unbalanced brackets", s)
		}
	}
	if depth != 0 {
		return Pattern{}, fmt.Errorf("pattern %q: unbalanced brackets", s)
	}
	return Pattern{text: s}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// Match reports whether name matches the whole pattern.
func (p Pattern) Match(name string) bool {
	if p.exact {
		return p.text == name
	}
	return match(p.text, name)
}

// match is an iterative wildcard matcher with single-star backtracking:
// linear in practice, never exponential.
func match(pat, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for sx < len(s) {
		if px < len(pat) {
			switch c := pat[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				px++
				sx++
				continue
			case '[':
				if n, ok := matchClass(pat[px:], s[sx]); n > 0 && ok {
					px += n
					sx++
					continue
				}
			case '\\':
				if px+1 < len(pat) && pat[px+1] == s[sx] {
					px += 2
					sx++
					continue
				}
			default:
				if c == s[sx] {
					px++
					sx++
					continue
				}
			}
		}
		if starPx >= 0 {
			starSx++
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	for px < len(pat) && pat[px] == '*' {
		px++
	}
	return px == len(pat)
}

// matchClass matches c against the class at the start of pat ("[a-z]",
// "[^.]") and returns the class's length.
func matchClass(pat string, c byte) (int, bool) {
	end := strings.IndexByte(pat[1:], ']')
	if end < 0 {
		return 0, false
	}
	class := pat[1 : end+1]
	negate := strings.HasPrefix(class, "^") || strings.HasPrefix(class, "!")
	if negate {
		class = class[1:]
	}
	found := false
	for i := 0; i < len(class); i++ {
		if i+2 < len(class) && class[i+1] == '-' {
			if class[i] <= c && c <= class[i+2] {
				found = true
			}
			i += 2
			continue
		}
		if class[i] == c {
			found = true
		}
	}
	return end + 2, found != negate
}
