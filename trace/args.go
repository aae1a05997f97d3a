package trace

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/internal/dwarfload"
)

// DefaultStringSize is the bytes read per string argument by default;
// MaxStringSize the most a probe reads behind one pointer.
const (
	DefaultStringSize = 64
	MaxStringSize     = funcargs.MaxDeref
)

// maxArgFunctions bounds the functions whose arguments are captured: the
// kernel holds two plans per function, 712 bytes each.
var maxArgFunctions = 10_000

// argPlans are the capture plans of a session's probes, deduplicated: a
// probe's cookie names its plan by index.
type argPlans struct {
	plans []bpf.ArgPlan
	index map[bpf.ArgPlan]int
}

// add returns the index of plan, adding it if new.
func (p *argPlans) add(plan bpf.ArgPlan) int {
	if i, ok := p.index[plan]; ok {
		return i
	}
	if p.index == nil {
		p.index = map[bpf.ArgPlan]int{}
	}
	p.index[plan] = len(p.plans)
	p.plans = append(p.plans, plan)
	return len(p.plans) - 1
}

// addPair adds an entry plan and its return plan at consecutive indexes
// (for gi_entry_return), returning the entry plan's.
func (p *argPlans) addPair(entry, ret bpf.ArgPlan) int {
	p.plans = append(p.plans, entry, ret)
	return len(p.plans) - 2
}

// planPair returns the entry and return plans of a function probed by one
// program at a site that is both its entry and a RET; false if neither
// captures anything.
func planPair(fn *Function, arch string) (entry, ret bpf.ArgPlan, ok bool, err error) {
	entry, okEntry, err := planOf(fn, bpf.KindEntry, arch)
	if err != nil {
		return entry, ret, false, err
	}
	ret, okReturn, err := planOf(fn, bpf.KindReturn, arch)
	if err != nil {
		return entry, ret, false, err
	}
	return entry, ret, okEntry || okReturn, nil
}

// binaryArch is the GOARCH of bin.
func binaryArch(bin *elfbin.Binary) string {
	switch bin.File.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	}
	return bin.File.Machine.String()
}

// openArgsAsync starts opening the DWARF arguments are read from, and
// returns the function that waits for the result.
func openArgsAsync(l *dwarfload.Loader, arch string) func() (*funcargs.Reader, error) {
	type result struct {
		r   *funcargs.Reader
		err error
	}
	done := make(chan result, 1) // never blocks: a session that fails first drops it
	go func() {
		r, err := funcargs.OpenFrom(l, arch)
		done <- result{r, err}
	}()
	return sync.OnceValues(func() (*funcargs.Reader, error) {
		res := <-done
		return res.r, res.err
	})
}

// planArgs reads the selected functions' arguments and results from DWARF
// and plans their capture (Function.Args, Function.Results), with the
// --where filters compiled into the plans. Without DWARF, arguments are
// left out with a warning, unless a filter needs them.
func (s *Session) planArgs() error {
	if !s.Opts.Args && len(s.Opts.Where) == 0 {
		return nil
	}
	byName := map[string]*Function{}
	for _, fn := range s.Selection.Functions {
		byName[fn.Name] = fn
	}
	for _, w := range s.Opts.Where {
		if byName[w.Func] == nil {
			return &FilterError{Func: w.Func, Err: errors.New("the function is not traced (name it in the patterns)")}
		}
	}
	capture := s.Opts.Args
	if capture && len(s.Selection.Functions) > maxArgFunctions {
		// Each function needs two plans in the kernel (712 bytes each).
		capture = false
		s.Warnings = append(s.Warnings, fmt.Sprintf("arguments are captured for at most %d functions, and %d are traced: tracing without them (narrow the patterns)",
			maxArgFunctions, len(s.Selection.Functions)))
		if len(s.Opts.Where) == 0 {
			return nil // no DWARF to read (a big binary's takes a second)
		}
	}
	arch := binaryArch(s.Binary)
	open := s.argsReader
	if open == nil {
		open = func() (*funcargs.Reader, error) { return funcargs.OpenFrom(s.Binary.DWARF(), arch) }
	}
	r, err := open()
	if err != nil {
		if len(s.Opts.Where) > 0 {
			return &FilterError{Err: err}
		}
		if errors.Is(err, funcargs.ErrNoDWARF) {
			s.Warnings = append(s.Warnings, "arguments need DWARF, and the binary has none (stripped): tracing without them")
		} else {
			s.Warnings = append(s.Warnings, fmt.Sprintf("arguments not shown: %v", err))
		}
		return nil
	}
	s.args = r
	opts := funcargs.CaptureOptions{StringSize: s.Opts.StringSize, RegName: r.Arch.RegName}
	if opts.StringSize <= 0 {
		opts.StringSize = DefaultStringSize
	}
	s.signal = findSignalProbe(s.Binary, r, arch)
	opts.NoFloatRegs = s.signal.unusable
	wheres := map[string]Where{}
	for _, w := range s.Opts.Where {
		wheres[w.Func] = w
	}
	var unknown []string
	for _, fn := range s.Selection.Functions {
		w, filtered := wheres[fn.Name]
		if !capture && !filtered {
			continue
		}
		desc, err := r.Func(fn.Name, fn.EntrySite)
		if err != nil {
			if filtered {
				return &FilterError{Func: fn.Name, Err: err}
			}
			continue // assembly, or a function DWARF does not describe
		}
		pf := s.Binary.Lines.FuncForPC(fn.EntrySite)
		if pf == nil {
			continue
		}
		spd, err := s.Binary.Lines.SPDelta(pf, fn.EntrySite)
		if err != nil {
			continue
		}
		params, results, err := desc.Locate(fn.EntrySite, spd+r.Arch.CFAFromSP)
		if err != nil {
			if filtered {
				return &FilterError{Func: fn.Name, Err: err}
			}
			continue
		}
		entryOpts := opts
		if entryOpts.NoFloatRegs == "" {
			entryOpts.NoFloatRegs, entryOpts.Overwritten = s.entryStep(fn)
		}
		fn.Args = funcargs.NewCapture(params, entryOpts)
		fn.Results = funcargs.NewCapture(results, opts)
		for _, u := range fn.Args.Unknown() {
			unknown = append(unknown, fn.Name+" "+u)
		}
		if filtered {
			fn.where = w
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		more := ""
		if len(unknown) > 3 {
			more = fmt.Sprintf(" (and %d more)", len(unknown)-3)
			unknown = unknown[:3]
		}
		s.Warnings = append(s.Warnings, "arguments shown as ?: "+strings.Join(unknown, "; ")+more)
	}
	return nil
}

// entryStep decodes the instruction at fn's entry site (Function.entryStep)
// and returns why float registers cannot be read there ("" if they can),
// and those the instruction overwrites first.
func (s *Session) entryStep(fn *Function) (string, map[uint64]string) {
	code := make([]byte, 16)
	n, _ := s.Binary.ReadAt(code, fn.EntrySite)
	step, err := StepAt(s.Binary.File.Machine, code[:n])
	if err != nil {
		return fmt.Sprintf("passed in a floating-point register, and the probed instruction does not decode (%v)", err), nil
	}
	if step.Unknown != "" {
		return "passed in a floating-point register, and the probed instruction is " + step.Unknown + ": where the thread is next, when the registers are read, is not known", nil
	}
	fn.entryStep = step
	return "", step.Writes
}

// signalProbe is where the probes that read float registers have their
// thread interrupted: runtime.sigtrampgo, where every signal of a Go
// thread arrives with its frame.
type signalProbe struct {
	site uint64
	// ctxWord is the word of struct pt_regs that holds sigtrampgo's ctx
	// parameter (the frame's ucontext) at site.
	ctxWord int
	// unusable says why float registers cannot be read ("" if they can).
	unusable string
}

// findSignalProbe locates runtime.sigtrampgo and its ctx parameter in
// bin's DWARF.
func findSignalProbe(bin *elfbin.Binary, r *funcargs.Reader, arch string) signalProbe {
	const fn = "runtime.sigtrampgo"
	fail := func(why string, args ...any) signalProbe {
		return signalProbe{unusable: "passed in a floating-point register, which gi reads in " + fn + ", and " + fmt.Sprintf(why, args...)}
	}
	f := bin.Lines.FuncByName(fn)
	if f == nil {
		return fail("the binary has no such function")
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := bin.ReadAt(code, f.Entry); err != nil {
		return fail("its code does not read: %v", err)
	}
	sites, err := FindProbeSites(bin.File.Machine, code, f.Entry)
	if err != nil && !errors.Is(err, ErrNoReturn) {
		return fail("its code does not decode: %v", err)
	}
	desc, err := r.Func(fn, sites.Entry)
	if err != nil {
		return fail("DWARF does not describe it: %v", err)
	}
	spd, err := bin.Lines.SPDelta(f, sites.Entry)
	if err != nil {
		return fail("its frame is not known: %v", err)
	}
	params, _, err := desc.Locate(sites.Entry, spd+r.Arch.CFAFromSP)
	if err != nil {
		return fail("its parameters are not located: %v", err)
	}
	for _, p := range params {
		if p.Var.Name != "ctx" {
			continue
		}
		if p.Unknown != "" || len(p.Pieces) != 1 || p.Pieces[0].Stack || p.Pieces[0].Float {
			break
		}
		w, ok := bpf.RegisterWord(arch, p.Pieces[0].Reg)
		if !ok {
			break
		}
		return signalProbe{site: sites.Entry, ctxWord: w}
	}
	return fail("its parameter ctx is not in a register")
}

// planOf encodes what a probe of fn captures (entry: the arguments and the
// --where filter; return: the results), returning false if the probe
// captures nothing.
func planOf(fn *Function, kind uint8, arch string) (bpf.ArgPlan, bool, error) {
	var plan bpf.ArgPlan
	c := fn.Results
	if kind == bpf.KindEntry {
		c = fn.Args
	}
	filtered := len(fn.where.Conditions) > 0
	if (c == nil || len(c.Ops) == 0) && !filtered {
		return plan, false, nil
	}
	if c != nil {
		if len(c.Ops) > bpf.PlanOps || c.Size > bpf.PlanPayloadMax {
			return plan, false, fmt.Errorf("%s: capture of %d operations, %d bytes exceeds the probe's bounds", fn.Name, len(c.Ops), c.Size)
		}
		plan.Nops, plan.Size = uint16(len(c.Ops)), uint16(c.Size)
		if c.FloatStatus >= 0 {
			plan.Fregs, plan.FregsAt = 1, uint16(c.FloatStatus)
			if kind == bpf.KindEntry && !fn.entryStep.Return {
				plan.ResumeOff = int32(fn.entryStep.Next)
			} else {
				plan.ResumeRet = 1
			}
		}
		for i, op := range c.Ops {
			o := &plan.Ops[i]
			o.Out, o.Size = uint16(op.Out), uint16(op.Size)
			// funcargs' operations in the probe program's terms: the two
			// number them each their own way.
			switch op.Kind {
			case funcargs.OpReg:
				w, ok := bpf.RegisterWord(arch, op.Reg)
				if !ok {
					return plan, false, fmt.Errorf("%s: register %d not in a uprobe's registers", fn.Name, op.Reg)
				}
				o.Kind, o.Reg = bpf.OpReg, uint8(w)
			case funcargs.OpFloatReg:
				r, ok := bpf.FloatRegisterIndex(arch, op.Reg)
				if !ok {
					return plan, false, fmt.Errorf("%s: register %d is not a float register the probes read", fn.Name, op.Reg)
				}
				o.Kind, o.Reg = bpf.OpFreg, uint8(r)
			case funcargs.OpStack:
				o.Kind, o.Off = bpf.OpStack, int32(op.SPOffset)
			case funcargs.OpDeref:
				o.Kind, o.Ptr, o.Elem, o.Off = bpf.OpDeref, uint16(op.Ptr), uint16(op.Elem), int32(op.Add)
				o.Len = bpf.NoLength
				if op.Len >= 0 {
					o.Len = uint16(op.Len)
				}
			default:
				return plan, false, fmt.Errorf("%s: capture operation %d unknown to the probes", fn.Name, op.Kind)
			}
		}
	}
	if filtered {
		plan.Track = 1
		if kind == bpf.KindEntry {
			if err := compileWhere(&plan, fn.where, fn.Args); err != nil {
				return plan, false, err
			}
		}
	}
	return plan, true, nil
}

// compileWhere adds w's conditions to an entry plan.
func compileWhere(plan *bpf.ArgPlan, w Where, c *funcargs.Capture) error {
	if len(w.Conditions) > bpf.PlanFilters {
		return &FilterError{Func: w.Func, Err: fmt.Errorf("at most %d conditions", bpf.PlanFilters)}
	}
	for i, cond := range w.Conditions {
		cv := c.Lookup(cond.Arg)
		if cv == nil {
			var names []string
			for _, v := range c.Values {
				names = append(names, v.Var.Name)
			}
			return &FilterError{Func: w.Func, Err: fmt.Errorf("no argument %q (it has: %s)", cond.Arg, strings.Join(names, ", "))}
		}
		if cv.Unknown != "" {
			return &FilterError{Func: w.Func, Err: fmt.Errorf("argument %s: %s", cond.Arg, cv.Unknown)}
		}
		f := &plan.Filters[i]
		if cond.IsString {
			at, read, ok := cv.StringRead()
			if !ok {
				return &FilterError{Func: w.Func, Err: fmt.Errorf("%s has type %s, not string", cond.Arg, cv.Var.TypeName())}
			}
			if len(cond.Str) > bpf.FilterString {
				return &FilterError{Func: w.Func, Err: fmt.Errorf("string constants are compared up to %d bytes", bpf.FilterString)}
			}
			if len(cond.Str) >= read {
				return &FilterError{Func: w.Func, Err: fmt.Errorf("%q: %w (%d)", cond.Str, ErrStringSize, read)}
			}
			f.Cmp = map[string]uint8{"==": bpf.CmpStrEq, "!=": bpf.CmpStrNe, "=~": bpf.CmpStrPrefix}[cond.Op]
			f.Size, f.At = uint8(len(cond.Str)), uint16(at)
			copy(f.Str[:], cond.Str)
			continue
		}
		at, signed, ok := cv.Integer()
		if !ok {
			return &FilterError{Func: w.Func, Err: fmt.Errorf("%s has type %s: compare integers, bools and strings", cond.Arg, cv.Var.TypeName())}
		}
		f.Cmp = map[string]uint8{"==": bpf.CmpEq, "!=": bpf.CmpNe, "<": bpf.CmpLt, ">": bpf.CmpGt}[cond.Op]
		f.Size, f.At, f.Value = uint8(cv.Var.Type.Size()), uint16(at), cond.Int
		if signed {
			f.IsSigned = 1
		}
	}
	plan.Nfilters = uint8(len(w.Conditions))
	return nil
}
