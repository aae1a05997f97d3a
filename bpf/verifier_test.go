package bpf

import (
	"errors"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/rlimit"

	"github.com/gi-debug/gi/internal/targets"
)

// verifierBudget is the most instructions the verifier may walk for one of
// gi's programs: a quarter of the kernel's limit (1,000,000 since Linux
// 5.2), leaving room for verifiers of other kernels that prune less. The
// largest walks 126k on 6.18.
const verifierBudget = 250_000

// TestVerifierBudget loads every program in each variant gi loads it in
// (float registers read through signals or not, cookies by address or
// not) and reads the verifier's statistics: each must stay within
// verifierBudget. Reading float registers once had the verifier walk the
// capture of arguments several times a program, and gi_entry_return
// 494,554 instructions.
func TestVerifierBudget(t *testing.T) {
	targets.RequirePrivilege(t, "loading BPF programs")
	// As gi loads them: RLIMIT_MEMLOCK raised where it may be (kernels
	// before 5.11 charge maps to it), uprobe_multi programs as plain ones
	// where the kernel lacks it, and cookies by address where it lacks
	// attach cookies.
	rlimit.RemoveMemlock()
	multi := features.HaveBPFLinkUprobeMulti() == nil
	cookieVariants := []uint8{0, 1}
	if errors.Is(features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie), ebpf.ErrNotSupported) {
		cookieVariants = []uint8{1}
	}
	t.Logf("uprobe_multi %v, cookie_by_ip variants %v", multi, cookieVariants)
	processed := regexp.MustCompile(`processed (\d+) insns`)
	for variant := range 4 {
		floats, why := uint8(variant&1), uint8(variant>>1)
		for _, byIP := range cookieVariants {
			spec, specs, err := LoadSpecs()
			if err != nil {
				t.Fatal(err)
			}
			if err := specs.FloatRegs.Set(floats); err != nil {
				t.Fatal(err)
			}
			if err := specs.CookieByIp.Set(byIP); err != nil {
				t.Fatal(err)
			}
			if err := specs.Why.Set(why); err != nil {
				t.Fatal(err)
			}
			names := make([]string, 0, len(spec.Programs))
			for name := range spec.Programs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				one := spec.Copy()
				for other, p := range one.Programs {
					if other != name {
						delete(one.Programs, other)
					} else if !multi {
						p.AttachType = ebpf.AttachNone
					}
				}
				c, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
				if err != nil {
					var ve *ebpf.VerifierError
					if errors.As(err, &ve) {
						t.Log(strings.Join(ve.Log[max(0, len(ve.Log)-40):], "\n"))
					}
					t.Fatalf("float_regs=%d cookie_by_ip=%d why=%d %s: %v", floats, byIP, why, name, err)
				}
				log := c.Programs[name].VerifierLog
				c.Close()
				m := processed.FindStringSubmatch(log)
				if m == nil {
					t.Fatalf("float_regs=%d cookie_by_ip=%d why=%d %s: no statistics in the verifier's log: %q", floats, byIP, why, name, log)
				}
				n, _ := strconv.Atoi(m[1])
				t.Logf("float_regs=%d cookie_by_ip=%d why=%d %-16s %7d instructions walked", floats, byIP, why, name, n)
				if n > verifierBudget {
					t.Errorf("float_regs=%d cookie_by_ip=%d why=%d %s: the verifier walked %d instructions, more than gi's budget of %d", floats, byIP, why, name, n, verifierBudget)
				}
			}
		}
	}
}
