package runtimelayout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"go/version"
	"slices"
	"strconv"
	"strings"

	"github.com/gi-debug/gi/internal/decodes"
)

// VersionLayout is the runtime layout of one Go release on one
// architecture, as its DWARF describes it, with the static string tables
// the runtime prints. It stands in for the DWARF of stripped binaries.
// Addresses (allgs and the like) are binary-specific and left zero.
type VersionLayout struct {
	Go, Arch    string // "go1.21", "amd64"
	Toolchain   string // the release it was generated from: "go1.21.13"
	Layout      RuntimeLayout
	WaitReasons []string // runtime.waitReasonStrings
	GStatuses   []string // runtime.gStatusStrings, nil before it existed
}

//go:generate go run ./internal/gentables -o layouts_generated.go

// GoMinor returns the minor release of a Go version as build info spells
// it: 21 for "go1.21.13", "go1.21rc1" or "go1.21.0 X:boringcrypto"; ok is
// false for anything that is not a Go 1 release (go/version decides).
func GoMinor(v string) (minor int, ok bool) {
	v, _, _ = strings.Cut(v, " ") // experiments: "go1.21.0 X:boringcrypto"
	m, ok := strings.CutPrefix(version.Lang(v), "go1.")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(m)
	return n, err == nil
}

// ErrNoTable means a stripped binary's Go release is outside the table.
var ErrNoTable = fmt.Errorf("no generated runtime layout")

// TableLayout returns the generated layout for a Go version and GOARCH.
func TableLayout(goVersion, arch string) (*VersionLayout, error) {
	minor, ok := GoMinor(goVersion)
	if !ok {
		return nil, fmt.Errorf("%w: cannot parse Go version %q", ErrNoTable, goVersion)
	}
	key := "go1." + strconv.Itoa(minor)
	var lo, hi string
	for i := range generatedLayouts {
		v := &generatedLayouts[i]
		if v.Arch != arch {
			continue
		}
		if v.Go == key {
			return v, nil
		}
		if lo == "" || less(v.Go, lo) {
			lo = v.Go
		}
		if hi == "" || less(hi, v.Go) {
			hi = v.Go
		}
	}
	if hi != "" && less(hi, key) {
		return nil, fmt.Errorf("%w: the binary is stripped and built with %s, newer than gi's table of runtime layouts (%s to %s on %s): a newer gi knows it", ErrNoTable, goVersion, lo, hi, arch)
	}
	return nil, fmt.Errorf("%w for %s on %s (gi's table covers %s to %s)", ErrNoTable, goVersion, arch, lo, hi)
}

func less(a, b string) bool {
	x, _ := GoMinor(a)
	y, _ := GoMinor(b)
	return x < y
}

// LayoutOfProbe reads the runtime layout and string tables of a
// (non-stripped, non-PIE) binary built with toolchain: a table entry.
func LayoutOfProbe(bin Source, toolchain string) (*VersionLayout, error) {
	dbg, err := LoadDebug(bin.File)
	if err != nil {
		return nil, err
	}
	l, err := LayoutFromDWARF(dbg)
	if err != nil {
		return nil, err
	}
	v := &VersionLayout{Arch: bin.Arch, Toolchain: toolchain}
	minor, _ := GoMinor(bin.GoVersion)
	v.Go = "go1." + strconv.Itoa(minor)
	if v.WaitReasons, err = ReadStringArray(bin.Contents, l.WaitReasonStrings, l.WaitReasonCount, 1<<12); err != nil {
		return nil, fmt.Errorf("runtime.waitReasonStrings: %w", err)
	}
	if l.GStatusStrings != 0 {
		if v.GStatuses, err = ReadStringArray(bin.Contents, l.GStatusStrings, l.GStatusCount, 1<<12); err != nil {
			return nil, fmt.Errorf("runtime.gStatusStrings: %w", err)
		}
	}
	l.AllGs, l.AllGLen, l.WaitReasonStrings, l.GStatusStrings, l.TracebackLabels, l.Wait.SemTable, l.Heap.MHeap = 0, 0, 0, 0, 0, 0, 0
	l.Heap.Queues.AllFin, l.Heap.Queues.GCCleanups = 0, 0
	l.Heap.Objects.AllP, l.Heap.Objects.AllM = 0, 0
	l.Heap.Bits.InProgress = 0
	v.Layout = *l
	return v, nil
}

// AddressReader reads an address space: a binary's file-backed contents
// (Binary.ReadAt) or a live process's memory (proc.Memory.ReadAt).
type AddressReader interface {
	ReadAt(p []byte, addr uint64) (int, error)
}

// ReadStringArray reads a [n]string array at addr from r: n string headers,
// then each string's bytes, at most maxLen per string. Empty strings are
// left "".
func ReadStringArray(r AddressReader, addr uint64, n int64, maxLen uint64) ([]string, error) {
	if n <= 0 || n > 4096 {
		return nil, fmt.Errorf("implausible length %d", n)
	}
	hdr := make([]byte, n*16)
	if _, err := r.ReadAt(hdr, addr); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		p := binary.LittleEndian.Uint64(hdr[i*16:])
		l := binary.LittleEndian.Uint64(hdr[i*16+8:])
		if l == 0 {
			continue
		}
		if l > maxLen {
			return nil, fmt.Errorf("string %d has length %d", i, l)
		}
		s := make([]byte, l)
		if _, err := r.ReadAt(s, p); err != nil {
			return nil, fmt.Errorf("string %d at %#x: %w", i, p, err)
		}
		out[i] = string(s)
	}
	return out, nil
}

// TableToolchains returns the Go releases the generated table was made
// from, oldest first ("go1.20.14", ...): the newest patch of each minor
// release the module proxy served when the table was generated.
func TableToolchains() []string {
	var out []string
	for _, v := range generatedLayouts {
		if !slices.Contains(out, v.Toolchain) {
			out = append(out, v.Toolchain)
		}
	}
	slices.SortFunc(out, version.Compare)
	return out
}

// GeneratedLayouts returns a copy of the generated table.
func GeneratedLayouts() []VersionLayout {
	return append([]VersionLayout(nil), generatedLayouts...)
}

// RuntimeStrings are the runtime's names of goroutine statuses and of
// the reasons a goroutine waits, as the binary's Go release spells them:
// what g.atomicstatus and g.waitreason index.
type RuntimeStrings struct {
	WaitReasons []string // runtime.waitReasonStrings
	Statuses    []string // runtime.gStatusStrings, nil before it existed
}

// ReadRuntimeStrings reads the runtime's strings of a process: from
// table, the generated table's entry, for a stripped binary; else from
// the process's memory r (relocations applied: a PIE's string headers
// are written at load), at the layout's link-time addresses plus bias.
func ReadRuntimeStrings(r AddressReader, l *RuntimeLayout, table *VersionLayout, bias uint64) (*RuntimeStrings, error) {
	decodes.Add(decodes.RuntimeStrings, 1)
	if table != nil {
		return &RuntimeStrings{WaitReasons: table.WaitReasons, Statuses: table.GStatuses}, nil
	}
	if l.WaitReasonStrings == 0 {
		return nil, errors.New("runtime.waitReasonStrings not found")
	}
	var s RuntimeStrings
	var err error
	if s.WaitReasons, err = ReadStringArray(r, l.WaitReasonStrings+bias, l.WaitReasonCount, maxRuntimeString); err != nil {
		return nil, fmt.Errorf("read runtime.waitReasonStrings: %w", err)
	}
	if l.GStatusStrings != 0 {
		if s.Statuses, err = ReadStringArray(r, l.GStatusStrings+bias, l.GStatusCount, maxRuntimeString); err != nil {
			return nil, fmt.Errorf("read runtime.gStatusStrings: %w", err)
		}
	}
	return &s, nil
}

// maxRuntimeString bounds the length of one of the runtime's strings.
const maxRuntimeString = 1 << 12
