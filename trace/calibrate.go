package trace

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/bincache"
	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/proc"
)

// siteClass says how the kernel runs the instruction a probe sits on,
// which decides most of what a hit costs the probed thread.
type siteClass uint8

const (
	// classStepped: the kernel copies the instruction out of line and
	// single-steps it (two traps). The default: the dearer class.
	classStepped siteClass = iota
	// classEmulated: the kernel emulates the instruction (one trap).
	classEmulated
)

// classify returns how the kernel runs the instruction code starts with
// on machine: emulated are amd64's pushes of a register, relative jumps,
// calls and conditional jumps (arch/x86/kernel/uprobes.c), arm64's
// branches, RET, ADR/ADRP and literal loads (arch/arm64/kernel/probes);
// everything else, and what does not decode, is single-stepped.
func classify(machine elf.Machine, code []byte) siteClass {
	switch machine {
	case elf.EM_X86_64:
		inst, err := x86asm.Decode(code, 64)
		if err != nil {
			return classStepped
		}
		switch inst.Op {
		case x86asm.PUSH:
			if _, ok := inst.Args[0].(x86asm.Reg); ok {
				return classEmulated
			}
		case x86asm.JMP, x86asm.CALL, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE,
			x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS:
			if _, ok := inst.Args[0].(x86asm.Rel); ok {
				return classEmulated
			}
		}
	case elf.EM_AARCH64:
		if len(code) < 4 {
			return classStepped
		}
		inst, err := arm64asm.Decode(code[:4])
		if err != nil {
			return classStepped
		}
		switch inst.Op {
		case arm64asm.RET, arm64asm.B, arm64asm.BL, arm64asm.BR, arm64asm.BLR, arm64asm.CBZ, arm64asm.CBNZ,
			arm64asm.TBZ, arm64asm.TBNZ, arm64asm.ADR, arm64asm.ADRP:
			return classEmulated
		case arm64asm.LDR, arm64asm.LDRSW:
			if _, ok := inst.Args[1].(arm64asm.PCRel); ok {
				return classEmulated
			}
		}
	}
	return classStepped
}

// ProbeCosts are what a probe hit costs the probed thread beside the time
// its program runs (which the programs measure themselves): the traps
// into the kernel and back, by how the kernel runs the probed instruction.
type ProbeCosts struct {
	// Emulated is a hit on an instruction the kernel emulates.
	Emulated time.Duration `json:"emulated_ns"`
	// Stepped is a hit on an instruction the kernel single-steps.
	Stepped time.Duration `json:"stepped_ns"`
	// Signal is a signal taken by a thread of a Go process, as the probes
	// send to read float registers: the kernel's signal frame and the
	// runtime's handler.
	Signal time.Duration `json:"signal_ns"`
	// Measured says the figures were measured on this machine (now, or
	// earlier since it booted); false: DefaultProbeCosts, measuring
	// failed.
	Measured bool `json:"-"`
}

// DefaultProbeCosts are the figures used where measuring fails: above
// what gi measured on the slower machines it was tested on, so that an
// overhead estimated with them errs high.
var DefaultProbeCosts = ProbeCosts{Emulated: 3 * time.Microsecond, Stepped: 25 * time.Microsecond, Signal: 10 * time.Microsecond}

// of returns the cost of a hit on an instruction of class c.
func (p ProbeCosts) of(c siteClass) time.Duration {
	if c == classEmulated {
		return p.Emulated
	}
	return p.Stepped
}

// String says the figures and whether they were measured.
func (p ProbeCosts) String() string {
	how := "measured"
	if !p.Measured {
		how = "not measured: defaults"
	}
	return fmt.Sprintf("%v a hit emulated, %v single-stepped, %v a signal (%s)", p.Emulated, p.Stepped, p.Signal, how)
}

// calibrationTarget and calibrationAddr are in calibrate_$GOARCH.s: a
// function of two instructions of known classes and a RET, and its
// address.
func calibrationTarget()
func calibrationAddr() uintptr

var (
	calibrated     map[bool]ProbeCosts
	calibrateMu    sync.Mutex
	calibrationErr = map[bool]error{}
)

// CalibrateProbes measures what a probe hit costs on this machine, with
// uprobe_multi links (multi) or one perf event per probe: gi probes a
// function of its own with a program that does nothing and times a
// thread calling it, without probes and with a probe on an emulated and
// on a single-stepped instruction. The figures are kept for the
// machine's boot (in gi's cache directory), so only the first trace
// after a boot pays the ~50 ms measurement and the detach. On failure it
// returns DefaultProbeCosts with the error.
func CalibrateProbes(multi bool) (ProbeCosts, error) {
	calibrateMu.Lock()
	defer calibrateMu.Unlock()
	if c, ok := calibrated[multi]; ok {
		return c, calibrationErr[multi]
	}
	if calibrated == nil {
		calibrated = map[bool]ProbeCosts{}
	}
	key := calibrationKey(multi)
	if c, ok := readCalibration(key); ok {
		calibrated[multi] = c
		return c, nil
	}
	c, err := measureProbes(multi)
	if err != nil {
		calibrated[multi], calibrationErr[multi] = DefaultProbeCosts, err
		return DefaultProbeCosts, err
	}
	c.Measured = true
	calibrated[multi] = c
	writeCalibration(key, c)
	return c, nil
}

// calibrationKey names the figures of this boot, kernel and attach
// mechanism.
func calibrationKey(multi bool) string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var u unix.Utsname
	_ = unix.Uname(&u)
	mech := "perf"
	if multi {
		mech = "multi"
	}
	// "cpu": the figures are in thread CPU time (leastPerCall); earlier
	// ones, in wall time, are measured again.
	return strings.TrimSpace(string(boot)) + " " + unix.ByteSliceToString(u.Release[:]) + " " + runtime.GOARCH + " cpu " + mech
}

// calibrationFile is where the figures are kept.
type calibrationFile struct {
	Key   string     `json:"key"`
	Costs ProbeCosts `json:"costs"`
}

func calibrationPath(key string) string {
	dir := bincache.DefaultDir()
	if dir == "" {
		return ""
	}
	name := "probe-costs-perf.json"
	if strings.HasSuffix(key, " multi") {
		name = "probe-costs-multi.json"
	}
	return filepath.Join(dir, name)
}

func readCalibration(key string) (ProbeCosts, bool) {
	path := calibrationPath(key)
	if path == "" {
		return ProbeCosts{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) > 4096 {
		return ProbeCosts{}, false
	}
	var f calibrationFile
	if json.Unmarshal(data, &f) != nil || f.Key != key || f.Costs.Emulated <= 0 || f.Costs.Stepped <= 0 || f.Costs.Signal <= 0 {
		return ProbeCosts{}, false
	}
	f.Costs.Measured = true
	return f.Costs, true
}

// writeCalibration keeps the figures; a failure only costs the next
// trace the measurement.
func writeCalibration(key string, c ProbeCosts) {
	path := calibrationPath(key)
	if path == "" {
		return
	}
	data, err := json.Marshal(calibrationFile{Key: key, Costs: c})
	if err != nil || os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	// A temporary file made anew and renamed over the name: a link
	// planted at either (a cache directory another user can write) is
	// replaced, not written through.
	f, err := outfile.Create(path, 0o644)
	if err != nil {
		return
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return
	}
	_ = f.Commit()
}

// Calibration loop sizes: calls per timing, and timings kept the least of.
const (
	calibrationCalls = 256
	calibrationReps  = 7
)

// calibrationSites returns the file offsets of an instruction of each
// class in calibrationTarget's code, whose first byte is at file offset
// fileOff: its three instructions, up to the RET.
func calibrationSites(machine elf.Machine, code []byte, fileOff uint64) ([2]uint64, error) {
	end, step := 3, 1 // PUSHQ BP, POPQ BP, RET: one byte each
	if machine == elf.EM_AARCH64 {
		end, step = 12, 4
	}
	var offsets [2]uint64 // by class
	var have [2]bool
	for off := 0; off < end && off < len(code); off += step {
		c := classify(machine, code[off:])
		if !have[c] {
			offsets[c], have[c] = fileOff+uint64(off), true
		}
	}
	if !have[classEmulated] || !have[classStepped] {
		return offsets, fmt.Errorf("calibration code % x lacks an instruction of each class", code)
	}
	return offsets, nil
}

// detaching counts the calibrations whose probes are being detached: a
// measurement waits for them, or it would time their hits.
var detaching sync.WaitGroup

// measureProbes does CalibrateProbes' measurement.
func measureProbes(multi bool) (ProbeCosts, error) {
	detaching.Wait()
	machine := elf.EM_X86_64
	if runtime.GOARCH == "arm64" {
		machine = elf.EM_AARCH64
	}
	pid := os.Getpid()
	addr := uint64(calibrationAddr())
	maps, err := proc.Mappings(pid)
	if err != nil {
		return ProbeCosts{}, err
	}
	var fileOff uint64
	found := false
	for _, m := range maps {
		if m.Exec && addr >= m.Start && addr < m.End {
			fileOff, found = addr-m.Start+m.Offset, true
			break
		}
	}
	if !found {
		return ProbeCosts{}, fmt.Errorf("calibration code at %#x is in no executable mapping", addr)
	}
	// The code as the file has it: in memory, a probe left by an earlier
	// calibration still being detached shows as a breakpoint.
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return ProbeCosts{}, err
	}
	code := make([]byte, 16)
	_, err = exe.ReadAt(code, int64(fileOff))
	exe.Close()
	if err != nil {
		return ProbeCosts{}, fmt.Errorf("read calibration code: %w", err)
	}
	offsets, err := calibrationSites(machine, code, fileOff)
	if err != nil {
		return ProbeCosts{}, err
	}

	spec, specs, err := bpf.LoadSpecs()
	if err != nil {
		return ProbeCosts{}, err
	}
	specs.Events.MaxEntries = uint32(os.Getpagesize())
	if !multi {
		for _, p := range spec.Programs {
			p.AttachType = ebpf.AttachNone
		}
	}
	objs, err := bpf.Load(spec, "gi_empty")
	if err != nil {
		return ProbeCosts{}, fmt.Errorf("load calibration program: %w", err)
	}
	ex, err := link.OpenExecutable("/proc/self/exe")
	if err != nil {
		objs.Close()
		return ProbeCosts{}, err
	}
	var links []link.Link
	detaching.Add(1)
	defer func() {
		// Detaching waits for the kernel's grace periods (50 to 150 ms):
		// not on the caller's time. The probes are on gi alone.
		go func() {
			defer detaching.Done()
			for _, l := range links {
				l.Close()
			}
			objs.Close()
		}()
	}()
	attach := func(off uint64) error {
		var l link.Link
		var err error
		if multi {
			l, err = ex.UprobeMulti(nil, objs.GiEmpty, &link.UprobeMultiOptions{Addresses: []uint64{off}, PID: uint32(pid)})
		} else {
			l, err = ex.Uprobe("", objs.GiEmpty, &link.UprobeOptions{Address: off, PID: pid})
		}
		if err != nil {
			return fmt.Errorf("attach calibration probe: %w", err)
		}
		links = append(links, l)
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bare := timeCalls()
	if err := attach(offsets[classEmulated]); err != nil {
		return ProbeCosts{}, err
	}
	one := timeCalls()
	if err := attach(offsets[classStepped]); err != nil {
		return ProbeCosts{}, err
	}
	both := timeCalls()
	c := ProbeCosts{Emulated: one - bare, Stepped: both - one}
	c.Signal = timeSignals()
	c.Measured = true
	// A probe costs a trap at least: a figure below 50 ns means it did
	// not fire.
	if c.Emulated < 50*time.Nanosecond || c.Stepped < 50*time.Nanosecond {
		return ProbeCosts{}, fmt.Errorf("calibration probes did not fire (a call took %v bare, %v and %v probed)", bare, one, both)
	}
	return c, nil
}

// timeCalls returns the least CPU time per call of calibrationTarget
// over calibrationReps timings.
func timeCalls() time.Duration {
	return leastPerCall(calibrationTarget)
}

// timeSignals returns the least CPU time a SIGURG sent to the calling
// thread (locked to it) takes, handler included, over calibrationReps
// timings.
func timeSignals() time.Duration {
	pid, tid := unix.Getpid(), unix.Gettid()
	return leastPerCall(func() { _ = unix.Tgkill(pid, tid, unix.SIGURG) })
}

// leastPerCall returns the least CPU time per call of fn over
// calibrationReps timings of calibrationCalls calls each, in the calling
// thread's CPU time: the kernel charges a probe's traps to the thread,
// while a thread the scheduler preempts (a loaded machine) spends no CPU
// time meanwhile. Timed by the wall clock, a busy machine inflated the
// figures by more than half.
func leastPerCall(fn func()) time.Duration {
	best := time.Duration(1 << 62)
	for range calibrationReps {
		start := threadCPUTime()
		for range calibrationCalls {
			fn()
		}
		best = min(best, (threadCPUTime()-start)/calibrationCalls)
	}
	return best
}

// threadCPUTime is the calling thread's CPU time.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
