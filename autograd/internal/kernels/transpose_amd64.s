//go:build !purego

#include "textflag.h"

// AVX2 kernel of TransposeStrided (transpose.go): a copy, so every bit of
// every value is kept.

// TRANSPOSE8 transposes Y0-Y7 (eight rows of eight) into Y8-Y15, columns
// 0-7 in order, using nothing else: pairs of rows interleaved (a0 b0 a1
// b1 | a4 b4 a5 b5 and the rest), then quads (a0 b0 c0 d0 | a4 b4 c4 d4
// and the rest), then the low halves of rows 0-3 and 4-7 joined, and the
// high halves.
#define TRANSPOSE8 \
	VUNPCKLPS  Y1, Y0, Y8         \
	VUNPCKHPS  Y1, Y0, Y9         \
	VUNPCKLPS  Y3, Y2, Y10        \
	VUNPCKHPS  Y3, Y2, Y11        \
	VUNPCKLPS  Y5, Y4, Y12        \
	VUNPCKHPS  Y5, Y4, Y13        \
	VUNPCKLPS  Y7, Y6, Y14        \
	VUNPCKHPS  Y7, Y6, Y15        \
	VSHUFPS    $0x44, Y10, Y8, Y0 \
	VSHUFPS    $0xEE, Y10, Y8, Y1 \
	VSHUFPS    $0x44, Y11, Y9, Y2 \
	VSHUFPS    $0xEE, Y11, Y9, Y3 \
	VSHUFPS    $0x44, Y14, Y12, Y4 \
	VSHUFPS    $0xEE, Y14, Y12, Y5 \
	VSHUFPS    $0x44, Y15, Y13, Y6 \
	VSHUFPS    $0xEE, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8  \
	VPERM2F128 $0x20, Y5, Y1, Y9  \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15

// LOAD8 loads eight rows of eight into Y0-Y7, rows 0-3 from r0 and 4-7
// from r4 (R8 the row stride, R10 three rows).
#define LOAD8(r0, r4) \
	VMOVUPS (r0), Y0         \
	VMOVUPS (r0)(R8*1), Y1   \
	VMOVUPS (r0)(R8*2), Y2   \
	VMOVUPS (r0)(R10*1), Y3  \
	VMOVUPS (r4), Y4         \
	VMOVUPS (r4)(R8*1), Y5   \
	VMOVUPS (r4)(R8*2), Y6   \
	VMOVUPS (r4)(R10*1), Y7

// STORE8 stores Y8-Y15 at off bytes into eight destination rows, 0-3
// from DI and 4-7 from R12 (DX the row stride, R11 three rows).
#define STORE8(off) \
	VMOVUPS Y8, off(DI)          \
	VMOVUPS Y9, off(DI)(DX*1)    \
	VMOVUPS Y10, off(DI)(DX*2)   \
	VMOVUPS Y11, off(DI)(R11*1)  \
	VMOVUPS Y12, off(R12)        \
	VMOVUPS Y13, off(R12)(DX*1)  \
	VMOVUPS Y14, off(R12)(DX*2)  \
	VMOVUPS Y15, off(R12)(R11*1)

// func transpose8AVX2(src *float32, lds int, dst *float32, ldd int, n int)
//
// Transposes the 8×n block at src (rows lds values apart) into the n×8
// block at dst (rows ldd values apart), n a positive multiple of 8, eight
// columns at a time through an 8×8 register transpose.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R8
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), DX
	MOVQ n+32(FP), CX
	SHLQ $2, R8           // source row stride in bytes
	SHLQ $2, DX           // destination row stride in bytes
	LEAQ (R8)(R8*2), R10  // 3 source rows
	LEAQ (SI)(R8*4), BX   // source row 4
	LEAQ (DX)(DX*2), R11  // 3 destination rows
	LEAQ (DI)(DX*4), R12  // destination row 4
	MOVQ DX, R13
	SHLQ $3, R13          // 8 destination rows

t8_loop:
	LOAD8(SI, BX)
	TRANSPOSE8
	STORE8(0)

	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ R13, DI
	ADDQ R13, R12
	SUBQ $8, CX
	JNZ  t8_loop
	VZEROUPPER
	RET

// func transpose16AVX2(src *float32, lds int, dst *float32, ldd int, n int)
//
// Transposes the 16×n block at src (rows lds values apart) into the n×16
// block at dst (rows ldd values apart), n a positive multiple of 8: for
// each eight columns, rows 0-7 and then rows 8-15 through the 8×8
// register transpose, so that each destination row receives its sixteen
// values (a whole 64-byte line where dst is aligned) at once.
TEXT ·transpose16AVX2(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R8
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), DX
	MOVQ n+32(FP), CX
	SHLQ $2, R8           // source row stride in bytes
	SHLQ $2, DX           // destination row stride in bytes
	LEAQ (R8)(R8*2), R10  // 3 source rows
	LEAQ (SI)(R8*4), BX   // source row 4
	LEAQ (BX)(R8*4), R9   // source row 8
	LEAQ (R9)(R8*4), R14  // source row 12
	LEAQ (DX)(DX*2), R11  // 3 destination rows
	LEAQ (DI)(DX*4), R12  // destination row 4
	MOVQ DX, R13
	SHLQ $3, R13          // 8 destination rows

t16_loop:
	LOAD8(SI, BX)
	TRANSPOSE8
	STORE8(0)
	LOAD8(R9, R14)
	TRANSPOSE8
	STORE8(32)

	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, R9
	ADDQ $32, R14
	ADDQ R13, DI
	ADDQ R13, R12
	SUBQ $8, CX
	JNZ  t16_loop
	VZEROUPPER
	RET
