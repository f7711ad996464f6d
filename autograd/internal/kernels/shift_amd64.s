//go:build !purego

#include "textflag.h"

// func shiftStoresAsm(img, left, right *float32, ld int, x *float32, ldx int, r *float32, ldr int, c, n, w int, mode int)
TEXT ·shiftStoresAsm(SB), NOSPLIT, $0-96
	MOVQ   img+0(FP), DI
	MOVQ   left+8(FP), R8
	MOVQ   right+16(FP), R9
	MOVQ   x+32(FP), SI
	MOVQ   r+48(FP), DX
	MOVQ   c+64(FP), R10
	MOVQ   mode+88(FP), AX
	VXORPS Y14, Y14, Y14

channel:
	// The channel's vectors: R11 the byte offset, R12 the bytes left.
	XORQ R11, R11
	MOVQ n+72(FP), R12
	SHLQ $2, R12

vector:
	VMOVUPS (SI)(R11*1), Y0
	CMPQ    AX, $1
	JLT     store
	JEQ     relu
	VADDPS  (DX)(R11*1), Y0, Y0

relu:
	VMAXPS Y0, Y14, Y0 // 0 > v ? 0 : v

store:
	VMOVUPS Y0, (DI)(R11*1)
	VMOVUPS Y0, 4(R8)(R11*1)
	VMOVUPS Y0, (R9)(R11*1)
	ADDQ    $32, R11
	CMPQ    R11, R12
	JLT     vector

	// The zero columns: every w bytes from 0 to n values, both planes.
	XORQ R11, R11
	MOVQ w+80(FP), R13

zero:
	MOVL $0, (R8)(R11*1)
	MOVL $0, (R9)(R11*1)
	ADDQ R13, R11
	CMPQ R11, R12
	JLE  zero

	MOVQ ld+24(FP), R13
	ADDQ R13, DI
	ADDQ R13, R8
	ADDQ R13, R9
	ADDQ ldx+40(FP), SI
	ADDQ ldr+56(FP), DX
	DECQ R10
	JNZ  channel
	VZEROUPPER
	RET
