//go:build !purego

#include "textflag.h"

// AVX2 kernels of Stride2Rows, AddStride2Rows and AddInterleaveRows
// (stride2.go): a copy,
// which keeps every bit of every value, and single additions rounded as
// the Go loop rounds them.

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

// func addStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int)
//
// For each of rows rows (dst rows ldd bytes apart, src rows lds bytes
// apart), n a positive multiple of 8: eight values of src at a time,
// spread over the even lanes of two vectors (VUNPCKLPS/VUNPCKHPS with
// zeros, VPERM2F128 to put the halves in order), added to 16 values of
// dst, whose odd lanes VBLENDPS then takes back unchanged.
TEXT ·addStride2AVX2(SB), NOSPLIT, $0-48
	MOVQ   dst+0(FP), DI
	MOVQ   ldd+8(FP), DX
	MOVQ   src+16(FP), SI
	MOVQ   lds+24(FP), R8
	MOVQ   rows+32(FP), BX
	MOVQ   n+40(FP), R9
	VXORPS Y15, Y15, Y15

as2_row:
	MOVQ DI, R10
	MOVQ SI, R11
	MOVQ R9, CX

as2_col:
	VMOVUPS    (R11), Y0
	VUNPCKLPS  Y15, Y0, Y1        // per lane: s0 0 s1 0 | s4 0 s5 0
	VUNPCKHPS  Y15, Y0, Y2        // per lane: s2 0 s3 0 | s6 0 s7 0
	VPERM2F128 $0x20, Y2, Y1, Y3  // s0 0 s1 0 s2 0 s3 0
	VPERM2F128 $0x31, Y2, Y1, Y4  // s4 0 s5 0 s6 0 s7 0
	VMOVUPS    (R10), Y5
	VMOVUPS    32(R10), Y6
	VADDPS     Y3, Y5, Y3
	VADDPS     Y4, Y6, Y4
	VBLENDPS   $0x55, Y3, Y5, Y3  // the sums in the even lanes
	VBLENDPS   $0x55, Y4, Y6, Y4
	VMOVUPS    Y3, (R10)
	VMOVUPS    Y4, 32(R10)
	ADDQ       $32, R11
	ADDQ       $64, R10
	SUBQ       $8, CX
	JNZ        as2_col

	ADDQ DX, DI
	ADDQ R8, SI
	DECQ BX
	JNZ  as2_row
	VZEROUPPER
	RET

// func addInterleaveAVX2(dst *float32, ldd int, a, b *float32, lds int, rows, n int)
//
// For each of rows rows (dst rows ldd bytes apart, a and b rows lds bytes
// apart), n a positive multiple of 8: eight values of a and of b at a
// time, interleaved (VUNPCKLPS/VUNPCKHPS, VPERM2F128 to put the halves in
// order) and added to 16 values of dst.
TEXT ·addInterleaveAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), DX
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), R12
	MOVQ lds+32(FP), R8
	MOVQ rows+40(FP), BX
	MOVQ n+48(FP), R9

ai_row:
	MOVQ DI, R10
	XORQ R11, R11
	MOVQ R9, CX

ai_col:
	VMOVUPS    (SI)(R11*1), Y0
	VMOVUPS    (R12)(R11*1), Y1
	VUNPCKLPS  Y1, Y0, Y2         // per lane: a0 b0 a1 b1 | a4 b4 a5 b5
	VUNPCKHPS  Y1, Y0, Y3         // per lane: a2 b2 a3 b3 | a6 b6 a7 b7
	VPERM2F128 $0x20, Y3, Y2, Y4  // a0 b0 a1 b1 a2 b2 a3 b3
	VPERM2F128 $0x31, Y3, Y2, Y5  // a4 b4 ... a7 b7
	VMOVUPS    (R10), Y6
	VMOVUPS    32(R10), Y7
	VADDPS     Y4, Y6, Y4         // dst + a, dst + b: the Go loop's operand order
	VADDPS     Y5, Y7, Y5
	VMOVUPS    Y4, (R10)
	VMOVUPS    Y5, 32(R10)
	ADDQ       $32, R11
	ADDQ       $64, R10
	SUBQ       $8, CX
	JNZ        ai_col

	ADDQ DX, DI
	ADDQ R8, SI
	ADDQ R8, R12
	DECQ BX
	JNZ  ai_row
	VZEROUPPER
	RET
