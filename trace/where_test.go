package trace

import (
	"strings"
	"testing"
)

func TestParseWhere(t *testing.T) {
	w, err := ParseWhere(`main.query: id == 42 && key =~ "user:*" && n != -3 && ok == true && x > 0x10 && y < 5 && s != "a && b==c"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Condition{
		{Arg: "id", Op: "==", Int: 42},
		{Arg: "key", Op: "=~", Str: "user:", IsString: true},
		{Arg: "n", Op: "!=", Int: -3},
		{Arg: "ok", Op: "==", Int: 1},
		{Arg: "x", Op: ">", Int: 16},
		{Arg: "y", Op: "<", Int: 5},
		{Arg: "s", Op: "!=", Str: "a && b==c", IsString: true},
	}
	if w.Func != "main.query" || len(w.Conditions) != len(want) {
		t.Fatalf("parsed %+v", w)
	}
	for i, c := range w.Conditions {
		if c != want[i] {
			t.Errorf("condition %d: %+v, want %+v", i, c, want[i])
		}
	}
	w, err = ParseWhere(`main.(*Server).Get: k == 18446744073709551615`)
	if err != nil || w.Func != "main.(*Server).Get" || w.Conditions[0].Int != -1 {
		t.Errorf("receiver and max uint64: %+v %v", w, err)
	}
	for _, bad := range []struct{ in, want string }{
		{`main.query id == 1`, "want FUNCTION: CONDITION"},
		{`: id == 1`, "no function"},
		{`main.query: id`, "no comparison"},
		{`main.query: id == `, "want ARGUMENT == VALUE"},
		{`main.query: key =~ "user:"`, "prefix pattern ending in *"},
		{`main.query: key =~ "u*r*"`, "prefix pattern ending in *"},
		{`main.query: id =~ 4`, "quoted prefix pattern"},
		{`main.query: key < "b"`, "strings compare with"},
		{`main.query: ok > true`, "bools compare with"},
		{`main.query: id == 4x`, "not an integer"},
		{`main.query: key == "unterminated`, "bad string"},
	} {
		if _, err := ParseWhere(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseWhere(%q) = %v, want an error with %q", bad.in, err, bad.want)
		}
	}
}
