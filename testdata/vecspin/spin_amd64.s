#include "textflag.h"

// func spin(v *uint64, loaded, stop *uint32)
TEXT ·spin(SB), NOSPLIT, $0-24
	MOVQ v+0(FP), DX
	MOVQ (DX), AX
	MOVQ AX, X1
	MOVQ $0, (DX)
	XORQ AX, AX
	MOVQ loaded+8(FP), DX
	MOVL $1, (DX)
	MOVQ stop+16(FP), BX
loop:
	PAUSE
	MOVL (BX), CX
	TESTL CX, CX
	JEQ loop
	RET
