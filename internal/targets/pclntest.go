package targets

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// PclnToolchains are the Go releases pclntab's and elfbin's tests build
// their test program (pclntab/testdata/pclntest) with: "local" is the
// installed go; the others are fetched by the go command (GOTOOLCHAIN)
// into the module cache if missing. They span the FuncID enum changes
// (1.22 added corostart, 1.25 replaced runfinq) and the pcHeader change of
// 1.26 (no textStart) and the moduledata change of 1.27 (gofunc moved).
var PclnToolchains = []string{"local", "go1.27.4", "go1.25.14", "go1.24.13", "go1.22.12", "go1.21.13", "go1.20.14"}

// PclnModes are the ways the test program is linked by the Go linker.
var PclnModes = []string{"exe", "pie", "strip", "pie-strip"}

// PclnKey is one build of the test program.
type PclnKey struct {
	Toolchain string
	// Mode is one of PclnModes, or ext-pie, ext-pie-strip (the external
	// linker).
	Mode   string
	GOARCH string
}

// String names the build: "go1.22.12/pie", with the architecture when it
// is not the host's.
func (k PclnKey) String() string {
	s := k.Toolchain + "/" + k.Mode
	if k.GOARCH != "" && k.GOARCH != runtime.GOARCH {
		s += "/" + k.GOARCH
	}
	return s
}

type pclnBuild struct {
	once sync.Once
	path string
	err  error
}

// PclnBuilder builds the test program once per key into a directory that
// lives as long as the test that made it, two builds at a time.
type PclnBuilder struct {
	dir   string
	mu    sync.Mutex
	m     map[PclnKey]*pclnBuild
	slots chan struct{}
}

// NewPclnBuilder returns a builder whose builds live as long as t.
func NewPclnBuilder(t *testing.T) *PclnBuilder {
	return &PclnBuilder{dir: t.TempDir(), m: map[PclnKey]*pclnBuild{}, slots: make(chan struct{}, 2)} // 2 cores
}

// Build returns the path of the test program built as k.
func (pb *PclnBuilder) Build(t testing.TB, k PclnKey) string {
	t.Helper()
	if k.GOARCH == "" {
		k.GOARCH = runtime.GOARCH
	}
	pb.mu.Lock()
	r := pb.m[k]
	if r == nil {
		r = &pclnBuild{}
		pb.m[k] = r
	}
	pb.mu.Unlock()
	r.once.Do(func() {
		pb.slots <- struct{}{}
		defer func() { <-pb.slots }()
		r.path, r.err = pb.build(k)
	})
	if r.err != nil {
		t.Fatalf("build %v: %v", k, r.err)
	}
	return r.path
}

func (pb *PclnBuilder) build(k PclnKey) (string, error) {
	out := filepath.Join(pb.dir, strings.NewReplacer("/", "-", ".", "_").Replace(k.String()))
	args := []string{"build", "-o", out}
	cgo := "0"
	switch k.Mode {
	case "exe":
	case "pie":
		args = append(args, "-buildmode=pie")
	case "strip":
		args = append(args, "-ldflags=-s -w")
	case "pie-strip":
		args = append(args, "-buildmode=pie", "-ldflags=-s -w")
	case "ext-pie":
		args = append(args, "-buildmode=pie", "-ldflags=-linkmode=external")
		cgo = "1"
	case "ext-pie-strip":
		args = append(args, "-buildmode=pie", "-ldflags=-linkmode=external -s -w")
		cgo = "1"
	default:
		return "", fmt.Errorf("unknown mode %q", k.Mode)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = filepath.Join(Dir(), "..", "pclntab", "testdata", "pclntest")
	cmd.Env = append(os.Environ(),
		"GOTOOLCHAIN="+k.Toolchain, "GOARCH="+k.GOARCH, "GOOS=linux", "CGO_ENABLED="+cgo,
		"GOFLAGS=-buildvcs=false", "GOWORK=off", "GO111MODULE=on")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %v\n%s", cmd.Args, err, msg)
	}
	return out, nil
}

// ForEach runs f in a parallel subtest per toolchain of PclnToolchains and
// mode of modes, for the host's architecture.
func (pb *PclnBuilder) ForEach(t *testing.T, modes []string, f func(t *testing.T, k PclnKey)) {
	for _, tc := range PclnToolchains {
		for _, mode := range modes {
			k := PclnKey{Toolchain: tc, Mode: mode, GOARCH: runtime.GOARCH}
			t.Run(k.String(), func(t *testing.T) {
				t.Parallel()
				f(t, k)
			})
		}
	}
}
