package trace

import (
	"strings"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"main.*", "main.handle", true},
		{"main.*", "main.(*Server).serve.func1", true},
		{"main.*", "mainx.handle", false},
		{"main.*", "main", false},
		{"*", "", true},
		{"*", "net/http.(*conn).serve", true},
		{"net/http.(*conn).*", "net/http.(*conn).serve", true},
		{"net/http.(*conn).*", "net/http.(*connReader).Read", false},
		{"*handleBar", "main.(*T).handleBar", true},
		{"*handleBar", "main.handleBarBaz", false},
		{"main.load*", "main.load", true},
		{"main.load*", "main.loader.func2", true},
		{"main.handle", "main.handle", true},
		{"main.handle", "main.handler", false},
		{"main.handle", "xmain.handle", false},
		{"main.?andle", "main.handle", true},
		{"main.?andle", "main.andle", false},
		{"main.h?", "main.h", false},
		{"*.*.*", "a.b.c", true},
		{"*.*.*", "a.bc", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYcZ", false},
		{"*a*a*a*a*b", strings.Repeat("a", 40), false}, // backtracking stays linear-ish
		{"main.[hl]*", "main.load", true},
		{"main.[hl]*", "main.query", false},
		{"main.[a-c]x", "main.bx", true},
		{"main.[a-c]x", "main.dx", false},
		{"main.[^.]", "main.q", true},
		{"main.[^.]", "main..", false},
		{"main.[!q]", "main.q", false},
		{`main.\*`, "main.*", true},
		{`main.\*`, "main.x", false},
		{`main.F\[*`, "main.F[go.shape.int]", true},
		{`main.F\[*`, "main.F.func1", false},
	} {
		p, err := ParsePattern(tc.pat)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tc.pat, err)
			continue
		}
		if got := p.Match(tc.name); got != tc.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tc.pat, tc.name, got, tc.want)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, bad := range []string{"", "main.[ab", "main.]x", "main.[[a]]"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
		}
	}
	p, err := ParsePattern("main.(*T).*")
	if err != nil || p.String() != "main.(*T).*" {
		t.Errorf("ParsePattern: %v %q", err, p.String())
	}
}

func TestExactName(t *testing.T) {
	p := ExactName("main.(*T).m")
	if !p.Match("main.(*T).m") {
		t.Error("ExactName does not match its own name")
	}
	// The * of the receiver is literal: it does not match other names.
	if p.Match("main.(xT).m") || p.Match("main.(*T).m2") {
		t.Error("ExactName matched another name as a wildcard")
	}
	g := ExactName("main.F[...]")
	if !g.Match("main.F[...]") || g.Match("main.F.") {
		t.Error("ExactName with brackets")
	}
	if p.String() != "main.(*T).m" {
		t.Errorf("String() = %q", p.String())
	}
}
