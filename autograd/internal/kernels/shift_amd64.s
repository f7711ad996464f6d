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

// rotIdx rotates a vector of 8 values up by one lane (VPERMPS).
DATA rotIdx<>+0(SB)/4, $7
DATA rotIdx<>+4(SB)/4, $0
DATA rotIdx<>+8(SB)/4, $1
DATA rotIdx<>+12(SB)/4, $2
DATA rotIdx<>+16(SB)/4, $3
DATA rotIdx<>+20(SB)/4, $4
DATA rotIdx<>+24(SB)/4, $5
DATA rotIdx<>+28(SB)/4, $6
GLOBL rotIdx<>(SB), RODATA|NOPTR, $32

// func splitStoresAsm(dst *float32, ld, ps int, x *float32, ldx int, c, h, cols int)
//
// Per channel, image row y goes to row (y+1)/2 of the planes of parity
// ph = (y+1) mod 2: R8 walks the rows of plane (0, 1) (even y), R9 those
// of plane (0, 0) (odd y, from row 1); planes kx = 1 and 2 lie 2·ps and
// 4·ps bytes further. A row's 2·cols values are split into evens (plane
// 1) and odds (plane 2), and the odds shifted up by one lane, a zero
// first, go to plane 0.
TEXT ·splitStoresAsm(SB), NOSPLIT, $0-64
	MOVQ    dst+0(FP), DI
	MOVQ    x+24(FP), SI
	MOVQ    c+40(FP), CX
	MOVQ    ps+16(FP), R12
	SHLQ    $1, R12                // plane kx = 1
	LEAQ    (R12)(R12*1), R13      // plane kx = 2
	MOVQ    cols+56(FP), R14
	VMOVUPS rotIdx<>(SB), Y15

split_channel:
	MOVQ DI, R8
	ADDQ ps+16(FP), R8 // plane (0, 1), row 0
	MOVQ DI, R9
	ADDQ R14, R9       // plane (0, 0), row 1
	MOVQ SI, R10
	XORQ DX, DX        // y

split_row:
	MOVQ R8, R11
	TESTQ $1, DX
	JZ   split_even
	MOVQ R9, R11

split_even:
	VXORPS Y5, Y5, Y5 // the lane left of the row: zero
	XORQ   R15, R15   // byte offset in the plane row

split_vec:
	VMOVUPS (R10)(R15*2), Y0
	VMOVUPS 32(R10)(R15*2), Y1
	VSHUFPS $0x88, Y1, Y0, Y2
	VPERMPD $0xD8, Y2, Y2           // evens
	VSHUFPS $0xDD, Y1, Y0, Y3
	VPERMPD $0xD8, Y3, Y3           // odds
	LEAQ    (R11)(R12*1), AX
	VMOVUPS Y2, (AX)(R15*1)
	LEAQ    (R11)(R13*1), AX
	VMOVUPS Y3, (AX)(R15*1)
	VPERMPS Y3, Y15, Y4             // odds rotated up: o7 o0 … o6
	VBLENDPS $1, Y5, Y4, Y6         // lane 0 from the previous vector
	VMOVUPS Y6, (R11)(R15*1)
	VMOVAPS Y4, Y5
	ADDQ    $32, R15
	CMPQ    R15, R14
	JLT     split_vec

	// The next row of this parity, the next image row.
	TESTQ $1, DX
	JNZ   split_odd
	ADDQ  R14, R8
	JMP   split_next

split_odd:
	ADDQ R14, R9

split_next:
	LEAQ (R10)(R14*2), R10
	INCQ DX
	CMPQ DX, h+48(FP)
	JLT  split_row

	ADDQ ld+8(FP), DI
	ADDQ ldx+32(FP), SI
	DECQ CX
	JNZ  split_channel
	VZEROUPPER
	RET
