package targets

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// ProbeDir is the program the table of runtime layouts is generated from
// (runtimelayout/testdata/layoutprobe): the smallest Go binary with the
// whole runtime.
func ProbeDir() string {
	return filepath.Join(Dir(), "..", "runtimelayout", "testdata", "layoutprobe")
}

// BuildProbe builds the layout probe with toolchain tc (a GOTOOLCHAIN value)
// for arch ("" for the host's), with extra go build flags, into dir, and
// returns the binary's path. CGO is off: the probe is pure Go.
func BuildProbe(tb testing.TB, dir, tc, arch string, flags ...string) string {
	tb.Helper()
	name := tc + "-" + arch
	for _, f := range flags {
		name += "-" + filepath.Base(f)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Dir = ProbeDir()
	cmd.Env = append(cmd.Environ(), "GOTOOLCHAIN="+tc, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if arch != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+arch)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the layout probe with %s for %q %v: %v\n%s", tc, arch, flags, err, msg)
	}
	return out
}
