package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Where is a filter on one function's arguments, evaluated in the kernel:
// only the calls whose arguments satisfy every condition produce events.
type Where struct {
	Func       string
	Conditions []Condition
}

// Condition compares one argument with a constant.
type Condition struct {
	Arg string
	// Op is "==", "!=", "<", ">" or "=~" (a string prefix).
	Op string
	// Int is the constant of an integer (or bool) comparison; Str, with
	// IsString set, that of a string comparison (for "=~", the prefix).
	Int      int64
	Str      string
	IsString bool
}

// ParseWhere parses "main.query: id == 42 && key =~ \"user:*\"". Its
// errors say what is wrong, not where the text came from.
func ParseWhere(s string) (Where, error) {
	fn, conds, ok := strings.Cut(s, ": ")
	if !ok {
		return Where{}, errors.New("want FUNCTION: CONDITION [&& CONDITION]")
	}
	w := Where{Func: strings.TrimSpace(fn)}
	if w.Func == "" {
		return Where{}, errors.New("no function")
	}
	for _, c := range splitAnd(conds) {
		cond, err := parseCondition(strings.TrimSpace(c))
		if err != nil {
			return Where{}, err
		}
		w.Conditions = append(w.Conditions, cond)
	}
	return w, nil
}

// FilterError says why a filter on a function's arguments (Options.Where)
// cannot be applied: Func is the function filtered ("" when no filter
// can be), Err the reason.
type FilterError struct {
	Func string
	Err  error
}

func (e *FilterError) Error() string {
	if e.Func == "" {
		return "filter on arguments: " + e.Err.Error()
	}
	return "filter on " + e.Func + ": " + e.Err.Error()
}

func (e *FilterError) Unwrap() error { return e.Err }

// ErrStringSize is wrapped by a FilterError whose string constant does not
// fit the bytes read per string (Options.StringSize).
var ErrStringSize = errors.New("not shorter than the bytes read per string")

// splitAnd splits on "&&" outside quoted strings.
func splitAnd(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && strings.HasPrefix(s[i:], "&&"):
			out = append(out, s[start:i])
			start = i + 2
			i++
		}
	}
	return append(out, s[start:])
}

func parseCondition(s string) (Condition, error) {
	head := s // the operator is before any quoted string
	if q := strings.IndexByte(s, '"'); q >= 0 {
		head = s[:q]
	}
	for _, op := range []string{"==", "!=", "=~", "<", ">"} {
		i := strings.Index(head, op)
		if i < 0 {
			continue
		}
		c := Condition{Arg: strings.TrimSpace(s[:i]), Op: op}
		val := strings.TrimSpace(s[i+len(op):])
		if c.Arg == "" || val == "" {
			return Condition{}, fmt.Errorf("condition %q: want ARGUMENT %s VALUE", s, op)
		}
		switch {
		case strings.HasPrefix(val, `"`):
			str, err := strconv.Unquote(val)
			if err != nil {
				return Condition{}, fmt.Errorf("condition %q: bad string %s", s, val)
			}
			if op == "<" || op == ">" {
				return Condition{}, fmt.Errorf("condition %q: strings compare with ==, != or =~", s)
			}
			if op == "=~" {
				if !strings.HasSuffix(str, "*") || strings.ContainsAny(str[:len(str)-1], "*?[") {
					return Condition{}, fmt.Errorf("condition %q: =~ takes a prefix pattern ending in * (\"user:*\")", s)
				}
				str = str[:len(str)-1]
			}
			c.Str, c.IsString = str, true
		case op == "=~":
			return Condition{}, fmt.Errorf("condition %q: =~ compares a string with a quoted prefix pattern", s)
		case val == "true" || val == "false":
			if op != "==" && op != "!=" {
				return Condition{}, fmt.Errorf("condition %q: bools compare with == or !=", s)
			}
			if val == "true" {
				c.Int = 1
			}
		default:
			n, err := strconv.ParseInt(val, 0, 64)
			if err != nil {
				u, uerr := strconv.ParseUint(val, 0, 64)
				if uerr != nil {
					return Condition{}, fmt.Errorf("condition %q: %s is not an integer, a bool or a quoted string", s, val)
				}
				n = int64(u)
			}
			c.Int = n
		}
		return c, nil
	}
	return Condition{}, fmt.Errorf("condition %q: no comparison (==, !=, <, >, =~)", s)
}
