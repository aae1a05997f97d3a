package inspect_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// memoryImage is a captured address space: the ranges a snapshot read, as
// they were, coalesced and sorted by address.
type memoryImage struct {
	Regions []imageRegion
}

type imageRegion struct {
	Addr uint64
	Data []byte
}

var errNotCaptured = errors.New("not in the image")

// ReadAt reads from the region that holds all of [addr, addr+len(p)).
func (m *memoryImage) ReadAt(p []byte, addr uint64) (int, error) {
	i := sort.Search(len(m.Regions), func(i int) bool { return m.Regions[i].Addr+uint64(len(m.Regions[i].Data)) > addr })
	if i == len(m.Regions) || m.Regions[i].Addr > addr || addr+uint64(len(p)) > m.Regions[i].Addr+uint64(len(m.Regions[i].Data)) || addr+uint64(len(p)) < addr {
		return 0, fmt.Errorf("read %d bytes at %#x: %w", len(p), addr, errNotCaptured)
	}
	return copy(p, m.Regions[i].Data[addr-m.Regions[i].Addr:]), nil
}

// ReadBatch reads the ranges one by one, listing those it cannot.
func (m *memoryImage) ReadBatch(ranges []proc.Range, dst []byte) error {
	var failed []int
	off := 0
	for i, r := range ranges {
		if off+r.Len > len(dst) || r.Len < 0 {
			return fmt.Errorf("batch of %d ranges overflows %d bytes", len(ranges), len(dst))
		}
		if _, err := m.ReadAt(dst[off:off+r.Len], r.Addr); err != nil {
			failed = append(failed, i)
		}
		off += r.Len
	}
	if failed != nil {
		return &proc.BatchError{Failed: failed}
	}
	return nil
}

// recorder is a Memory that keeps a copy of everything read through it.
type recorder struct {
	inspect.Memory
	regions []imageRegion
}

func (r *recorder) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := r.Memory.ReadAt(p, addr)
	if err == nil {
		r.regions = append(r.regions, imageRegion{addr, bytes.Clone(p[:n])})
	}
	return n, err
}

func (r *recorder) ReadBatch(ranges []proc.Range, dst []byte) error {
	err := r.Memory.ReadBatch(ranges, dst)
	var be *proc.BatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	off := 0
	for i, rg := range ranges {
		if be == nil || !slices.Contains(be.Failed, i) {
			r.regions = append(r.regions, imageRegion{rg.Addr, bytes.Clone(dst[off : off+rg.Len])})
		}
		off += rg.Len
	}
	return err
}

// image coalesces the recorded reads (later reads win where they overlap).
func (r *recorder) image() *memoryImage {
	type span struct{ lo, hi uint64 }
	var spans []span
	for _, rg := range r.regions {
		spans = append(spans, span{rg.Addr, rg.Addr + uint64(len(rg.Data))})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	img := &memoryImage{}
	for _, s := range merged {
		img.Regions = append(img.Regions, imageRegion{s.lo, make([]byte, s.hi-s.lo)})
	}
	for _, rg := range r.regions {
		if len(rg.Data) == 0 {
			continue
		}
		i := sort.Search(len(img.Regions), func(i int) bool { return img.Regions[i].Addr+uint64(len(img.Regions[i].Data)) > rg.Addr })
		copy(img.Regions[i].Data[rg.Addr-img.Regions[i].Addr:], rg.Data)
	}
	return img
}

// capturedImage is a process captured for decoding without it: its memory
// as a snapshot read it, its threads' registers, the instant, and the
// runtime's own dump of it (the ground truth).
type capturedImage struct {
	Build      string // targets.BuildOptions of the psstates binary
	BinarySHA  string // sha256 of the binary
	PID        int
	Bias       uint64
	Now        int64
	Threads    []imageThread
	Memory     memoryImage
	Dump       []byte
	DumperGoid int64
}

type imageThread struct {
	TID  int
	Regs ptrace.Regs
}

func (img *capturedImage) threads() []ptrace.Thread {
	out := make([]ptrace.Thread, len(img.Threads))
	for i, th := range img.Threads {
		out[i] = ptrace.Thread{TID: th.TID, Regs: th.Regs}
	}
	return out
}

// monotonicNow is CLOCK_MONOTONIC, the clock of g.waitsince.
func monotonicNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// captureImage stops a running psstates target, decodes a snapshot of it
// through a recorder, resumes it, and returns the capture and the snapshot.
func captureImage(t *testing.T, p *targets.Process, bin string, opts targets.BuildOptions) (*capturedImage, *inspect.Snapshot) {
	t.Helper()
	b, err := elfbin.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mem, err := proc.OpenMemory(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	rec := &recorder{Memory: mem}
	var bias uint64
	if b.PIE {
		entry, err := proc.EntryPoint(p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		bias = entry - b.File.Entry
	}
	tgt, err := inspect.NewTarget(p.Pid, b, rec, bias)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := sharedTracer().Stop(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	now := monotonicNow()
	snap, err := tgt.Decode(stopped.Threads, now)
	if err := stopped.Resume(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	targets.CheckNotStopped(t, p.Pid)
	dump, err := os.ReadFile(p.DumpPath)
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	img := &capturedImage{Build: opts.String(), BinarySHA: hex.EncodeToString(sum[:]), PID: p.Pid, Bias: bias, Now: now,
		Memory: *rec.image(), Dump: dump, DumperGoid: p.DumperGoid}
	for _, th := range stopped.Threads {
		img.Threads = append(img.Threads, imageThread{th.TID, th.Regs})
	}
	return img, snap
}

// decodeImage decodes a captured image with the binary at bin.
func decodeImage(t testing.TB, img *capturedImage, bin string) (*inspect.Snapshot, error) {
	b, err := elfbin.Open(bin)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	mem := img.Memory
	tgt, err := inspect.NewTarget(img.PID, b, &mem, img.Bias)
	if err != nil {
		return nil, err
	}
	return tgt.Decode(img.threads(), img.Now)
}

func dumpText(t testing.TB, snap *inspect.Snapshot) string {
	var buf bytes.Buffer
	if err := inspect.WriteDump(&buf, snap, snap.Goroutines, true); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// imageBuild is the build of psstates the committed image comes from:
// pinned toolchain and -trimpath, so that any machine rebuilds the same bytes.
var imageBuild = targets.BuildOptions{Toolchain: "go1.26.8", Trimpath: true}

const imagePath = "testdata/psstates-image.json.gz"

var writeImage = flag.Bool("write-image", false, "capture "+imagePath+" from a live psstates (needs root)")

// TestImageRoundTrip captures a live psstates target through the Memory
// seam, then decodes the capture with no process at all and checks it
// decodes to exactly what the live copy did, and to the runtime's own dump.
// With -write-image it also writes the committed image.
func TestImageRoundTrip(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", imageBuild)
	p := targets.Start(t, bin, "-park", "20", "-depth", "30", "-spin", "1")
	img, live := captureImage(t, p, bin, imageBuild)
	replayed, err := decodeImage(t, img, bin)
	if err != nil {
		t.Fatalf("decode the image: %v", err)
	}
	if a, b := dumpText(t, live), dumpText(t, replayed); a != b {
		t.Errorf("decoded from the image:\n%s\nlive:\n%s", b, a)
	}
	compareDump(t, replayed, img.Dump, img.DumperGoid, 20)
	if *writeImage {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if err := json.NewEncoder(zw).Encode(img); err != nil {
			t.Fatal(err)
		}
		zw.Close()
		if err := os.WriteFile(imagePath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d regions, %d bytes compressed", imagePath, len(img.Memory.Regions), buf.Len())
	}
}

func loadImage(t testing.TB) *capturedImage {
	f, err := os.Open(imagePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var img capturedImage
	if err := json.NewDecoder(zr).Decode(&img); err != nil {
		t.Fatalf("%s: %v", imagePath, err)
	}
	return &img
}

// imageBinary rebuilds the binary the committed image was captured from
// and checks it is byte for byte the same.
func imageBinary(t testing.TB, img *capturedImage) string {
	bin := targets.Build(t, "psstates", imageBuild)
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if got := hex.EncodeToString(sum[:]); got != img.BinarySHA || img.Build != imageBuild.String() {
		t.Fatalf("psstates (%s) rebuilt as %s, the image was captured from %s (%s): testdata/psstates changed? recapture with go test ./inspect/ -run TestImageRoundTrip -write-image (root)",
			imageBuild, got, img.BinarySHA, img.Build)
	}
	return bin
}

// TestDecodeCommittedImage decodes the committed image of a psstates process,
// with no process and no privileges, and compares it with the runtime's own
// dump captured with it, goroutine by goroutine.
func TestDecodeCommittedImage(t *testing.T) {
	img := loadImage(t)
	snap, err := decodeImage(t, img, imageBinary(t, img))
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, snap, img.Dump, img.DumperGoid, 20)
	// What blocked goroutines wait on decodes from the image too: the
	// parked goroutines share one channel nobody sends on.
	objs := inspect.WaitedObjects(snap.Goroutines)
	if len(objs) == 0 || objs[0].Object.Kind != "chan" || objs[0].Object.Chan == nil || objs[0].Object.Chan.Receivers != len(objs[0].Goroutines) || len(objs[0].Goroutines) < 10 {
		t.Errorf("waiting on, from the image: %v", objs)
	}
}

// FuzzDecodeImage decodes the committed image with bytes of its memory
// overwritten: every walk over target memory is bounded, so a corrupt image
// gives a flagged or partial snapshot or an error, never a panic or a hang.
func FuzzDecodeImage(f *testing.F) {
	img := loadImage(f)
	bin := imageBinary(f, img)
	b, err := elfbin.Open(bin)
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	// One target (its layout and strings read once); each input decodes
	// the goroutines from a patched copy of the memory.
	orig := img.Memory
	tgt, err := inspect.NewTarget(img.PID, b, &orig, img.Bias)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), uint32(0), []byte{0xff})
	f.Add(uint32(1), uint32(8), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint32(3), uint32(16), []byte{0x40, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, region, offset uint32, patch []byte) {
		mem := memoryImage{Regions: make([]imageRegion, len(img.Memory.Regions))}
		for i, r := range img.Memory.Regions {
			mem.Regions[i] = imageRegion{r.Addr, bytes.Clone(r.Data)}
		}
		r := &mem.Regions[int(region)%len(mem.Regions)]
		copy(r.Data[int(offset)%len(r.Data):], patch)
		tgt.Mem = &mem
		snap, err := tgt.Decode(img.threads(), img.Now)
		if err == nil {
			var buf bytes.Buffer
			inspect.WriteDump(&buf, snap, snap.Goroutines, true)
		}
	})
}
