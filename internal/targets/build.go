// Package targets builds and runs the target programs under testdata for
// gi's tests and benchmarks, and parses the Go runtime's goroutine dump that
// serves as their ground truth.
package targets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gi-debug/gi/internal/goreleases"
)

// BuildOptions selects how a target is built.
type BuildOptions struct {
	// Toolchain is a GOTOOLCHAIN value such as "go1.21.13"; empty or
	// "local" means the installed Go.
	Toolchain string
	// PIE builds with -buildmode=pie.
	PIE bool
	// Stripped links with -ldflags='-s -w': no symbol table, no DWARF.
	Stripped bool
	// Trimpath builds with -trimpath.
	Trimpath bool
	// CgoExternal builds with cgo and -linkmode=external.
	CgoExternal bool
	// Arch is a GOARCH to cross-build for; empty means the host's.
	Arch string
	// Experiment is a GOEXPERIMENT value ("noallocheaders",
	// "greenteagc"); empty means the release's default.
	Experiment string
}

// String names the build, e.g. "go1.21.13/pie/stripped".
func (o BuildOptions) String() string {
	parts := []string{o.toolchain()}
	if o.Arch != "" {
		parts = append(parts, o.Arch)
	}
	if o.PIE {
		parts = append(parts, "pie")
	}
	if o.CgoExternal {
		parts = append(parts, "cgo-external")
	}
	if o.Stripped {
		parts = append(parts, "stripped")
	}
	if o.Trimpath {
		parts = append(parts, "trimpath")
	}
	if o.Experiment != "" {
		parts = append(parts, "X:"+o.Experiment)
	}
	return strings.Join(parts, "/")
}

func (o BuildOptions) toolchain() string {
	if o.Toolchain == "" {
		return "local"
	}
	return o.Toolchain
}

// DefaultToolchains are the toolchains tests build targets with unless
// GI_TEST_TOOLCHAINS (comma-separated) says otherwise; there "newest" stands
// for the newest Go release the module proxy serves (make test-newest).
var DefaultToolchains = []string{"local", "go1.20.14", "go1.22.12", "go1.24.13", "go1.27.4"}

// Toolchains returns the toolchains under test.
func Toolchains() []string {
	if v := strings.TrimSpace(os.Getenv("GI_TEST_TOOLCHAINS")); v != "" {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "newest" {
				s = newestRelease()
			}
			if s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return DefaultToolchains
}

// newestRelease asks the module proxy for the newest Go release, once.
var newestRelease = sync.OnceValue(func() string {
	rs, err := goreleases.Newest()
	if err != nil || len(rs) == 0 {
		// The build then fails, naming the toolchain it could not get.
		fmt.Fprintf(os.Stderr, "GI_TEST_TOOLCHAINS=newest: no release from the module proxy: %v\n", err)
		return "newest-release-unknown"
	}
	fmt.Fprintf(os.Stderr, "GI_TEST_TOOLCHAINS=newest: %s\n", rs[len(rs)-1])
	return rs[len(rs)-1]
})

// Dir returns the testdata directory (the target programs' module).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

var (
	buildMu    sync.Mutex
	buildLocks = map[string]*sync.Mutex{}
)

func lockFor(key string) *sync.Mutex {
	buildMu.Lock()
	defer buildMu.Unlock()
	m := buildLocks[key]
	if m == nil {
		m = &sync.Mutex{}
		buildLocks[key] = m
	}
	return m
}

// Build builds testdata/<name> with opts and returns the binary's path. Builds
// are cached by source content and options under the user cache directory,
// so repeated test runs and parallel tests build each target once.
func Build(tb testing.TB, name string, opts BuildOptions) string {
	tb.Helper()
	path, err := BuildPath(name, opts)
	if err != nil {
		tb.Fatalf("build %s (%s): %v", name, opts, err)
	}
	return path
}

// PrebuiltName is the file name of testdata/<name> built with opts in a
// directory of prebuilt targets (GI_TARGETS_PREBUILT), one directory per
// architecture: "tracee-local-pie".
func PrebuiltName(name string, opts BuildOptions) string {
	opts.Arch = ""
	return name + "-" + strings.ReplaceAll(opts.String(), "/", "-")
}

// BuildPath is Build for callers without a testing.TB. With
// GI_TARGETS_PREBUILT set (a machine without Go, such as a test VM), it
// builds nothing and returns the target prebuilt in that directory.
func BuildPath(name string, opts BuildOptions) (string, error) {
	if dir := os.Getenv("GI_TARGETS_PREBUILT"); dir != "" {
		path := filepath.Join(dir, PrebuiltName(name, opts))
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("not prebuilt (GI_TARGETS_PREBUILT): %w", err)
		}
		return path, nil
	}
	src := filepath.Join(Dir(), name)
	sum, err := hashTree(src, filepath.Join(Dir(), "go.mod"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", name, opts, sum, runtime.Version())
	key := hex.EncodeToString(h.Sum(nil))[:20]
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "gi-targets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name+"-"+strings.ReplaceAll(opts.String(), "/", "-")+"-"+key)
	m := lockFor(out)
	m.Lock()
	defer m.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	args := []string{"build", "-o", tmp.Name()}
	var ldflags []string
	if opts.PIE {
		args = append(args, "-buildmode=pie")
	}
	if opts.Trimpath {
		args = append(args, "-trimpath")
	}
	if opts.Stripped {
		ldflags = append(ldflags, "-s", "-w")
	}
	if opts.CgoExternal {
		ldflags = append(ldflags, "-linkmode=external")
	}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags="+strings.Join(ldflags, " "))
	}
	args = append(args, "./"+name)
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+opts.toolchain(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if opts.Arch != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+opts.Arch)
	}
	if opts.Experiment != "" {
		cmd.Env = append(cmd.Env, "GOEXPERIMENT="+opts.Experiment)
	}
	if opts.CgoExternal {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1")
	} else {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// goCommand returns the go command: the one `go test` put first in PATH.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// hashTree hashes every file under dir plus extra files.
func hashTree(dir string, extra ...string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	files = append(files, extra...)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
