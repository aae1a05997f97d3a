#include "textflag.h"

// func calibrationTarget()
//
// The probes gi calibrates its cost figures on: the store of the link
// register most entry probes sit on (the kernel single-steps it out of
// line), and RET, which the kernel simulates.
TEXT ·calibrationTarget(SB), NOSPLIT|NOFRAME, $0-0
	MOVD.W R30, -16(RSP)
	MOVD.P 16(RSP), R30
	RET

// func calibrationAddr() uintptr
TEXT ·calibrationAddr(SB), NOSPLIT, $0-8
	MOVD $·calibrationTarget(SB), R0
	MOVD R0, ret+0(FP)
	RET
