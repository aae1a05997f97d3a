package runtimelayout

// Facts of the runtime that gi's code depends on but does not read from
// each binary's DWARF: the probe-site decoder recognises the stack-check
// prologue before any layout is read, a stripped binary has no DWARF, and
// some (bit layouts, the meaning of a flag) no DWARF describes. Each is
// checked against the DWARF of every Go release in the generated table,
// amd64 and arm64, as far as DWARF can tell (facts_test.go).
const (
	// GStackguard0 is the offset of g.stackguard0, which every function's
	// stack-check prologue compares the stack pointer with (g.stack is the
	// two words before it).
	GStackguard0 = 16

	// TFlagExtraStar is the bit of a type descriptor's tflag saying that
	// the name its str field points at has a spurious leading '*' (the
	// runtime then names the type without it): internal/abi.TFlagExtraStar
	// since Go 1.21, runtime.tflagExtraStar in Go 1.20. Checked against the
	// DWARF constant of every release.
	TFlagExtraStar = 1 << 1

	// WaitGroupCounterShift is where sync.WaitGroup's counter sits in its
	// 8-byte state word (WaitLayout.WaitGroupState): the high 32 bits, read
	// as an int32, the low ones counting waiters (and, from Go 1.25, a
	// synctest bubble flag). No DWARF gives a bit layout; the facts test
	// checks that on every release the state is the 8-byte unsigned word
	// the layout records, with the counter's 32 bits at its top, and
	// TestWaitingOn (inspect) compares the counter gi reads with the waiters
	// target's WaitGroup (counter 1) on Go 1.20, 1.22, 1.24, 1.27 and the
	// local toolchain.
	WaitGroupCounterShift = 32

	// StringSize is the size of a string header: its data pointer, then
	// its length, one word each.
	StringSize = 16

	// HmapBucketCount is the number of slots in a bucket of the classic
	// map (Go ≤1.23, the pprof labels' map[string]string): runtime.bucketCnt
	// (internal/abi.MapBucketCount in Go 1.23, whose runtime names it
	// directly). The bucket holds that many tophash bytes, then that many
	// keys, then that many elems (HmapLayout), each key and elem of the
	// label map a string (StringSize). TestSnapshotMatchesRuntimeDump
	// (inspect) checks the labels gi reads with them against a target's, on
	// Go 1.20 and 1.21.
	HmapBucketCount = 8
	// HmapMinTopHash is runtime.minTopHash: a slot whose tophash byte is
	// below it is empty or evacuated, and holds no entry.
	HmapMinTopHash = 5

	// PprofLabelSize is the size of an entry of the Go 1.24+ label list
	// (LabelsList): runtime/pprof.label in Go 1.24 and 1.25,
	// internal/runtime/pprof/label.Label from Go 1.26, the element type of
	// the slice that begins runtime/pprof.labelMap. PprofLabelKey and
	// PprofLabelValue are the offsets of its key and value strings.
	// TestSnapshotMatchesRuntimeDump (inspect) checks the labels gi reads
	// with them against a target's, on Go 1.24, 1.27 and the local toolchain.
	PprofLabelSize  = 32
	PprofLabelKey   = 0
	PprofLabelValue = 16

	// MutexLocked and MutexStarving are the bits of sync.Mutex's state
	// saying it is held and in starvation mode: sync.mutexLocked and
	// sync.mutexStarving, internal/sync's from Go 1.24.
	MutexLocked   = 1
	MutexStarving = 4
	// RWMutexMaxReaders is what a writer subtracts from sync.RWMutex's
	// readerCount, leaving it negative while it holds the lock or waits
	// for readers to leave: sync.rwmutexMaxReaders.
	RWMutexMaxReaders = 1 << 30
)
