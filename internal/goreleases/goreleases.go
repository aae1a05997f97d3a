// Package goreleases asks the Go module proxy which Go releases exist, so
// that gi's generated tables and its newest-release check follow the
// releases as they ship instead of a list typed by hand.
package goreleases

import (
	"fmt"
	"go/version"
	"os/exec"
	"slices"
	"strings"
)

// Oldest is the oldest Go release gi supports.
const Oldest = "go1.20"

// Newest returns the newest patch release of every minor Go release from
// Oldest on, oldest first ("go1.20.14", ..., "go1.27.4"), as served by the
// module proxy (golang.org/toolchain versions, through the go command so
// that GOPROXY is honoured). Release candidates and betas are left out.
func Newest() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-versions", "golang.org/toolchain").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("go list -m -versions golang.org/toolchain: %v: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list -m -versions golang.org/toolchain: %w", err)
	}
	return newestOf(strings.Fields(string(out))), nil
}

// newestOf picks the newest patch of each minor release from the module
// versions of golang.org/toolchain ("v0.0.1-go1.27.4.linux-amd64").
func newestOf(versions []string) []string {
	best := map[string]string{} // "go1.27" -> "go1.27.4"
	for _, v := range versions {
		v, ok := strings.CutPrefix(v, "v0.0.1-")
		if !ok {
			continue
		}
		v, ok = strings.CutSuffix(v, ".linux-amd64")
		if !ok || !version.IsValid(v) || strings.Contains(v, "rc") || strings.Contains(v, "beta") {
			continue
		}
		lang := version.Lang(v)
		if version.Compare(lang, Oldest) < 0 {
			continue
		}
		if cur, ok := best[lang]; !ok || version.Compare(v, cur) > 0 {
			best[lang] = v
		}
	}
	var out []string
	for _, v := range best {
		out = append(out, v)
	}
	slices.SortFunc(out, version.Compare)
	return out
}
