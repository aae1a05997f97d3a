package trace

import (
	"debug/elf"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf/features"

	"github.com/gi-debug/gi/internal/targets"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		machine elf.Machine
		code    []byte
		want    siteClass
	}{
		{elf.EM_X86_64, []byte{0x55}, classEmulated},                    // PUSHQ BP
		{elf.EM_X86_64, []byte{0x41, 0x57}, classEmulated},              // PUSHQ R15
		{elf.EM_X86_64, []byte{0xe8, 0, 0, 0, 0}, classEmulated},        // CALL rel32
		{elf.EM_X86_64, []byte{0x74, 0x05}, classEmulated},              // JE rel8
		{elf.EM_X86_64, []byte{0xc3}, classStepped},                     // RET
		{elf.EM_X86_64, []byte{0x48, 0x89, 0xe5}, classStepped},         // MOVQ SP, BP
		{elf.EM_X86_64, []byte{0xff, 0x34, 0x24}, classStepped},         // PUSHQ (SP): memory operand
		{elf.EM_X86_64, []byte{0x0f}, classStepped},                     // does not decode
		{elf.EM_AARCH64, []byte{0xc0, 0x03, 0x5f, 0xd6}, classEmulated}, // RET
		{elf.EM_AARCH64, []byte{0x00, 0x00, 0x00, 0x94}, classEmulated}, // BL
		{elf.EM_AARCH64, []byte{0xfe, 0x0f, 0x1f, 0xf8}, classStepped},  // MOVD.W R30, -16(RSP)
		{elf.EM_AARCH64, []byte{0x00, 0x00, 0x00}, classStepped},        // short
	} {
		if got := classify(c.machine, c.code); got != c.want {
			t.Errorf("classify(%v, % x) = %d, want %d", c.machine, c.code, got, c.want)
		}
	}
}

// TestCalibrationSites finds an instruction of each class in the bytes
// calibrate_$GOARCH.s assembles to, on both architectures, whichever
// this test runs on.
func TestCalibrationSites(t *testing.T) {
	for _, c := range []struct {
		machine           elf.Machine
		code              []byte
		emulated, stepped uint64
	}{
		// PUSHQ BP; POPQ BP; RET; INT3 padding
		{elf.EM_X86_64, []byte{0x55, 0x5d, 0xc3, 0xcc, 0xcc}, 0x1000, 0x1001},
		// MOVD.W R30, -16(RSP); MOVD.P 16(RSP), R30; RET; padding
		{elf.EM_AARCH64, []byte{0xfe, 0x0f, 0x1f, 0xf8, 0xfe, 0x07, 0x41, 0xf8, 0xc0, 0x03, 0x5f, 0xd6, 0, 0, 0, 0}, 0x1008, 0x1000},
	} {
		got, err := calibrationSites(c.machine, c.code, 0x1000)
		if err != nil || got[classEmulated] != c.emulated || got[classStepped] != c.stepped {
			t.Errorf("%v: sites %#x, %v; want emulated %#x, stepped %#x", c.machine, got, err, c.emulated, c.stepped)
		}
	}
	if _, err := calibrationSites(elf.EM_AARCH64, []byte{0xfe, 0x0f, 0x1f, 0xf8}, 0); err == nil {
		t.Error("code without an emulated instruction accepted")
	}
}

// TestCalibrateProbes measures the probe costs with each attach mechanism
// the kernel offers: both figures measured, an emulated hit cheaper than
// a single-stepped one.
func TestCalibrateProbes(t *testing.T) {
	targets.RequirePrivilege(t, "eBPF uprobes")
	for _, multi := range []bool{true, false} {
		if multi && features.HaveBPFLinkUprobeMulti() != nil {
			continue
		}
		c, err := measureProbes(multi)
		if err != nil {
			t.Fatalf("multi=%v: %v", multi, err)
		}
		t.Logf("multi=%v: %v", multi, c)
		if c.Emulated >= c.Stepped {
			t.Errorf("multi=%v: an emulated hit costs %v, a single-stepped one %v", multi, c.Emulated, c.Stepped)
		}
	}
}

// TestCalibrateProbesUnderLoad measures the probe costs idle and again
// with more busy threads than CPUs: the figures are CPU time of the
// calibrating thread, which preemption does not inflate (timed by the
// wall clock, a loaded CI machine once measured 24.9 µs for a 14 µs
// single-stepped hit, and gi overstated the overhead by half).
func TestCalibrateProbesUnderLoad(t *testing.T) {
	targets.RequirePrivilege(t, "eBPF uprobes")
	multi := features.HaveBPFLinkUprobeMulti() == nil
	idle, err := measureProbes(multi)
	if err != nil {
		t.Fatal(err)
	}
	n := runtime.NumCPU() + 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for x := uint64(1); !stop.Load(); x = x*3 + 1 {
			}
		}()
	}
	loaded, err := measureProbes(multi)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle: %v; %d busy threads: %v", idle, n, loaded)
	if loaded.Stepped > idle.Stepped*3/2 || loaded.Emulated > idle.Emulated*2 {
		t.Errorf("under load the figures grew from %v to %v", idle, loaded)
	}
}
