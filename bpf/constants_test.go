package bpf

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestConstantsMatchC checks every constant this package declares for a
// #define of gi.bpf.c against the C: the programs and gi's tables agree
// only by these numbers, and a change on one side alone would be read
// silently as something else.
func TestConstantsMatchC(t *testing.T) {
	src, err := os.ReadFile("gi.bpf.c")
	if err != nil {
		t.Fatal(err)
	}
	defines := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^#define (GI_[A-Z0-9_]+) +\(?(0x[0-9a-fA-F]+|[0-9]+)(ULL << ([0-9]+)\))?`).FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseUint(m[2], 0, 64)
		if err != nil {
			t.Fatalf("#define %s: %v", m[1], err)
		}
		if m[4] != "" {
			shift, _ := strconv.Atoi(m[4])
			v <<= shift
		}
		defines[m[1]] = v
	}
	for name, goValue := range map[string]uint64{
		"GI_EVENT_ENTRY":       KindEntry,
		"GI_EVENT_RETURN":      KindReturn,
		"GI_EVENT_GOEXIT":      KindGoexit,
		"GI_EVENT_PARK":        KindPark,
		"GI_EVENT_READY":       KindReady,
		"GI_EVENT_RUN":         KindRun,
		"GI_EVENT_YIELD":       KindYield,
		"GI_EVENT_SYSCALL":     KindSyscall,
		"GI_EVENT_SYSRET":      KindSysret,
		"GI_EVENT_SEMA":        KindSema,
		"GI_EVENT_POLL":        KindPoll,
		"GI_FRAMES":            SchedFrames,
		"GI_COOKIE_TLS":        CookieTLS,
		"GI_COOKIE_PLAN_SHIFT": CookiePlanShift,
		"GI_COOKIE_GEN":        CookieGen,
		"GI_COOKIE_SAMPLED":    CookieSampled,
		"GI_COOKIE_STEPPED":    CookieStepped,
		"GI_ARG_OPS":           uint64(PlanOps),
		"GI_ARG_FILTERS":       uint64(PlanFilters),
		"GI_ARG_BYTES":         PlanPayloadMax,
		"GI_DEREF_MAX":         DerefMax,
		"GI_FILTER_STR":        uint64(FilterString),
		"GI_FREGS":             FloatRegisters,
		"GI_OP_REG":            OpReg,
		"GI_OP_STACK":          OpStack,
		"GI_OP_DEREF":          OpDeref,
		"GI_OP_FREG":           OpFreg,
		"GI_CMP_EQ":            CmpEq,
		"GI_CMP_NE":            CmpNe,
		"GI_CMP_LT":            CmpLt,
		"GI_CMP_GT":            CmpGt,
		"GI_CMP_STR_EQ":        CmpStrEq,
		"GI_CMP_STR_NE":        CmpStrNe,
		"GI_CMP_STR_PREFIX":    CmpStrPrefix,
		"GI_LOST_EVENTS":       LostEvents,
		"GI_LOST_FREGS":        LostFloatRegs,
	} {
		c, ok := defines[name]
		if !ok {
			t.Errorf("gi.bpf.c has no #define %s", name)
			continue
		}
		if c != goValue {
			t.Errorf("%s is %d in gi.bpf.c and %d in package bpf", name, c, goValue)
		}
	}
}
