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

// func calibrationAddr() uintptr
TEXT ·calibrationAddr(SB), NOSPLIT, $0-8
	LEAQ ·calibrationTarget(SB), AX
	MOVQ AX, ret+0(FP)
	RET
