package proc_test

import (
	"debug/elf"
	"errors"
	"os/exec"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
)

// TestOpenProcess opens running Go processes, fixed-address and PIE: the
// executable is the target's, the load bias puts the ELF header of its
// first segment where the target's memory has it, the layout is derived
// once for every caller, and a process that is not Go, or is gone, is
// named as such.
func TestOpenProcess(t *testing.T) {
	targets.RequirePrivilege(t, "reading another process's memory")
	for _, opts := range []targets.BuildOptions{{}, {PIE: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			target := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "10", "-depth", "5", "-spin", "0")
			p, err := proc.Open(target.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.PID != target.Pid || p.NSPID != target.Pid || p.Exe.GoVersion == "" || p.Exe.PIE != opts.PIE {
				t.Errorf("pid %d, ns pid %d, Go %q, PIE %v; want pid %d in gi's namespace, a Go version, PIE %v",
					p.PID, p.NSPID, p.Exe.GoVersion, p.Exe.PIE, target.Pid, opts.PIE)
			}
			if opts.PIE == (p.Bias == 0) {
				t.Errorf("load bias %#x for a PIE=%v executable", p.Bias, opts.PIE)
			}
			var first *elf.Prog
			for _, prog := range p.Exe.File.Progs {
				if prog.Type == elf.PT_LOAD {
					first = prog
					break
				}
			}
			magic := make([]byte, 4)
			if _, err := p.Mem.ReadAt(magic, first.Vaddr+p.Bias); err != nil || string(magic) != elf.ELFMAG {
				t.Errorf("at the first segment plus the bias (%#x): %q, %v; want the ELF header", first.Vaddr+p.Bias, magic, err)
			}
			l1, _, err := p.RuntimeLayout()
			if err != nil {
				t.Fatal(err)
			}
			if l2, _, _ := p.RuntimeLayout(); l1 != l2 || l1.AllGs == 0 {
				t.Errorf("the runtime layout derived twice (%p, %p), or without runtime.allgs", l1, l2)
			}
		})
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if _, err := proc.Open(sleep.Process.Pid); !errors.Is(err, proc.ErrNotGo) {
		t.Errorf("opening sleep: %v, want ErrNotGo", err)
	}
	if _, err := proc.Open(1<<22 + 1); !errors.Is(err, proc.ErrNoSuchProcess) {
		t.Errorf("opening a pid no process has: %v, want ErrNoSuchProcess", err)
	}
}
