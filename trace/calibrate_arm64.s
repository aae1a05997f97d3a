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

// calibrationEmulated and calibrationStepped are copies of
// calibrationTarget, which stays unprobed: the simulated instruction is
// probed in the first, the single-stepped one in the second, and the
// three are timed in turn.
TEXT ·calibrationEmulated(SB), NOSPLIT|NOFRAME, $0-0
	MOVD.W R30, -16(RSP)
	MOVD.P 16(RSP), R30
	RET

TEXT ·calibrationStepped(SB), NOSPLIT|NOFRAME, $0-0
	MOVD.W R30, -16(RSP)
	MOVD.P 16(RSP), R30
	RET

// func calibrationAddrs() (bare, emulated, stepped uintptr)
TEXT ·calibrationAddrs(SB), NOSPLIT, $0-24
	MOVD $·calibrationTarget(SB), R0
	MOVD R0, bare+0(FP)
	MOVD $·calibrationEmulated(SB), R0
	MOVD R0, emulated+8(FP)
	MOVD $·calibrationStepped(SB), R0
	MOVD R0, stepped+16(FP)
	RET
