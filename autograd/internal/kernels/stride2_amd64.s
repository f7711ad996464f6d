//go:build !purego

#include "textflag.h"

// AVX2 kernel of Stride2Rows (stride2.go): a copy, so every bit of every
// value is kept.

// func stride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int)
//
// For each of rows rows (dst rows ldd bytes apart, src rows lds bytes
// apart), n a positive multiple of 8: eight values at a time, the even
// ones of 16 loaded (VSHUFPS takes them within each 128-bit lane,
// VPERMPD puts the lanes' pairs in order).
TEXT ·stride2AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), DX
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	MOVQ rows+32(FP), BX
	MOVQ n+40(FP), R9

s2_row:
	MOVQ DI, R10
	MOVQ SI, R11
	MOVQ R9, CX

s2_col:
	VMOVUPS (R11), Y0
	VMOVUPS 32(R11), Y1
	VSHUFPS $0x88, Y1, Y0, Y2 // per lane: a0 a2 b0 b2
	VPERMPD $0xD8, Y2, Y2     // 64-bit pairs 0 2 1 3
	VMOVUPS Y2, (R10)
	ADDQ    $64, R11
	ADDQ    $32, R10
	SUBQ    $8, CX
	JNZ     s2_col

	ADDQ DX, DI
	ADDQ R8, SI
	DECQ BX
	JNZ  s2_row
	VZEROUPPER
	RET
