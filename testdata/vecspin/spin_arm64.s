#include "textflag.h"

// func spin(v *uint64, loaded, stop *uint32)
TEXT ·spin(SB), NOSPLIT, $0-24
	MOVD v+0(FP), R3
	MOVD (R3), R0
	FMOVD R0, F1
	MOVD ZR, (R3)
	MOVD $0, R0
	MOVD loaded+8(FP), R3
	MOVW $1, R4
	MOVW R4, (R3)
	MOVD stop+16(FP), R1
loop:
	YIELD
	MOVWU (R1), R2
	CBZ R2, loop
	RET
