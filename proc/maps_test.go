package proc

import (
	"os"
	"testing"
)

func TestParseMappings(t *testing.T) {
	text := "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/my server\n" +
		"7ffd2a1f0000-7ffd2a211000 rw-p 00000000 00:00 0                          [stack]\n" +
		"c000000000-c004000000 rw-s 00001000 00:00 0 \n"
	ms, err := parseMappings([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0x452000, Read: true, Exec: true, Inode: 173521, Path: "/usr/bin/my server"},
		{Start: 0x7ffd2a1f0000, End: 0x7ffd2a211000, Read: true, Write: true, Path: "[stack]"},
		{Start: 0xc000000000, End: 0xc004000000, Read: true, Write: true, Shared: true, Offset: 0x1000},
	}
	if len(ms) != len(want) {
		t.Fatalf("%d mappings, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
	for _, bad := range []string{"00400000 r-xp 0 0 0\n", "1-0 r-xp 0 08:02 1 x\n", "1-2 rw 0 08:02 1\n", "1-2 rw-p\n"} {
		if _, err := parseMappings([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestMappingsOfSelf(t *testing.T) {
	ms, err := Mappings(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		if m.Path == exe && m.Exec {
			found = true
		}
	}
	if !found {
		t.Errorf("no executable mapping of %s in %d mappings", exe, len(ms))
	}
}
