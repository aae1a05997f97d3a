package trace

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/proc"
)

// Errors naming what the machine lacks.
var (
	ErrNoBPF         = errors.New("kernel lacks eBPF support for uprobes (BPF_PROG_TYPE_KPROBE)")
	ErrNoBTF         = errors.New("kernel lacks BTF (/sys/kernel/btf/vmlinux): needed to read the thread pointer with CO-RE")
	ErrNoUprobes     = errors.New("kernel lacks uprobes (no uprobe PMU in /sys/bus/event_source/devices)")
	ErrNoRingbuf     = errors.New("kernel lacks BPF ring buffers (5.8+)")
	ErrMemlock       = errors.New("permission denied loading eBPF programs: the kernel charges them to RLIMIT_MEMLOCK (before 5.11) and gi may not raise it (needs CAP_SYS_RESOURCE): run `ulimit -l unlimited` before gi")
	ErrBPFPermission = errors.New("permission denied loading eBPF programs: gi trace needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); in a container: --cap-add=BPF --cap-add=PERFMON")
)

// attachError explains a failed attach: the process gone, missing
// capabilities, or the kernel's own reason.
func (s *Session) attachError(err error) error {
	if s.Opts.PID > 0 {
		if _, statErr := os.Stat("/proc/" + strconv.Itoa(s.Opts.PID)); statErr != nil {
			return fmt.Errorf("process %d: no such process", s.Opts.PID)
		}
	}
	if errors.Is(err, os.ErrPermission) {
		return s.permissionError(err)
	}
	return fmt.Errorf("attach uprobes to %s: %w", s.Opts.Path, err)
}

// KernelFeature is a kernel feature gi traces without, more slowly or
// less exactly, where the kernel lacks it: its name, the first release
// that has it, and what gi does instead.
type KernelFeature struct {
	Name          string
	MinimumKernel string
	Instead       string
}

// Warning is the sentence gi prints when the kernel lacks f.
func (f KernelFeature) Warning() string {
	return "kernel lacks " + f.Name + " (" + f.MinimumKernel + "+): " + f.Instead
}

// The kernel features gi traces without.
var (
	UprobeMulti   = KernelFeature{"uprobe_multi links", "6.6", "attaching one perf event per probe, which is slow to attach and detach"}
	AttachCookies = KernelFeature{"BPF attach cookies", "5.15", "probes find their function by address instead"}
	// KernelFeatures lists them all.
	KernelFeatures = []KernelFeature{UprobeMulti, AttachCookies}
)

// Warnings naming a kernel feature gi works without, and the release
// that has it.
var (
	WarnNoUprobeMulti   = UprobeMulti.Warning()
	WarnNoAttachCookies = AttachCookies.Warning()
)

// noteMissing records the kernel features the session works without.
func (s *Session) noteMissing(missing []KernelFeature) {
	for _, f := range missing {
		s.Missing = append(s.Missing, f)
		s.Warnings = append(s.Warnings, f.Warning())
	}
}

// haveAttachCookies reports whether the kernel has bpf_get_attach_cookie
// for uprobe programs; an error other than its absence (no permission to
// probe) counts as present, and loading then says what is wrong.
func haveAttachCookies() bool {
	err := features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie)
	return !errors.Is(err, ebpf.ErrNotSupported)
}

// checkKernel names the first missing kernel feature.
func (s *Session) checkKernel() error {
	if err := features.HaveProgramType(ebpf.Kprobe); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return s.permissionError(err)
		}
		return fmt.Errorf("%w: %v", ErrNoBPF, err)
	}
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return s.permissionError(err)
		}
		return fmt.Errorf("%w: %v", ErrNoRingbuf, err)
	}
	if _, err := btf.LoadKernelSpec(); err != nil {
		return fmt.Errorf("%w: %v", ErrNoBTF, err)
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/uprobe"); err != nil {
		return ErrNoUprobes
	}
	return nil
}

// HasBPFCapabilities reports whether gi's effective capabilities hold
// CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; ok is false when it cannot
// tell.
func HasBPFCapabilities() (has, ok bool) {
	admin, ok := proc.HasCapabilities(unix.CAP_SYS_ADMIN)
	if !ok {
		return false, false
	}
	bpfCaps, _ := proc.HasCapabilities(unix.CAP_BPF, unix.CAP_PERFMON)
	return admin || bpfCaps, true
}

// permissionError explains an EPERM or EACCES from the kernel: the
// memlock limit when the kernel charges BPF memory to it and gi could not
// raise it; missing capabilities only when gi checked its own and they
// are missing; otherwise the kernel's own reason (the verifier's
// rejection, a limit).
func (s *Session) permissionError(err error) error {
	if s.memlock != nil {
		return fmt.Errorf("%w (%v)", ErrMemlock, s.memlock)
	}
	return permissionError(err)
}

// permissionError is Session.permissionError when memlock is not at stake.
func permissionError(err error) error {
	if has, ok := HasBPFCapabilities(); ok && !has {
		return ErrBPFPermission
	}
	return fmt.Errorf("the kernel refused gi's BPF programs, though gi has the capabilities they need: %w", err)
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
