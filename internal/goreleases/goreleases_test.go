package goreleases

import (
	"slices"
	"testing"
)

func TestNewestOf(t *testing.T) {
	got := newestOf([]string{
		"v0.0.1-go1.19.13.linux-amd64", "v0.0.1-go1.20.14.linux-amd64", "v0.0.1-go1.20.2.linux-amd64",
		"v0.0.1-go1.20.14.linux-arm64", "v0.0.1-go1.27.4.linux-amd64", "v0.0.1-go1.27.10.linux-amd64",
		"v0.0.1-go1.28rc1.linux-amd64", "v0.0.1-go1.26beta1.linux-amd64", "v0.0.1-go1.21.0.linux-amd64",
		"v0.0.1-go1.26.8.windows-amd64", "garbage",
	})
	want := []string{"go1.20.14", "go1.21.0", "go1.27.10"}
	if !slices.Equal(got, want) {
		t.Fatalf("newestOf = %v, want %v", got, want)
	}
}
