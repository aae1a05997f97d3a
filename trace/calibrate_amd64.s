#include "textflag.h"

// func calibrationTarget()
//
// The probes gi calibrates its cost figures on: PUSHQ BP, the instruction
// most entry probes sit on (the kernel emulates it), and RET, which the
// kernel single-steps out of line.
TEXT ·calibrationTarget(SB), NOSPLIT|NOFRAME, $0-0
	PUSHQ BP
	POPQ BP
	RET

// calibrationEmulated and calibrationStepped are copies of
// calibrationTarget, which stays unprobed: the emulated instruction is
// probed in the first, the single-stepped one in the second, and the
// three are timed in turn.
TEXT ·calibrationEmulated(SB), NOSPLIT|NOFRAME, $0-0
	PUSHQ BP
	POPQ BP
	RET

TEXT ·calibrationStepped(SB), NOSPLIT|NOFRAME, $0-0
	PUSHQ BP
	POPQ BP
	RET

// func calibrationAddrs() (bare, emulated, stepped uintptr)
TEXT ·calibrationAddrs(SB), NOSPLIT, $0-24
	LEAQ ·calibrationTarget(SB), AX
	MOVQ AX, bare+0(FP)
	LEAQ ·calibrationEmulated(SB), AX
	MOVQ AX, emulated+8(FP)
	LEAQ ·calibrationStepped(SB), AX
	MOVQ AX, stepped+16(FP)
	RET
