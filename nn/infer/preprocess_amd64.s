//go:build !purego

#include "textflag.h"

// AVX2 kernels of RawImage (preprocess.go): the Y'CbCr conversion of a
// source row into int32 planes and the two passes of the resampling. All
// arithmetic is the Go loops' int32 arithmetic (products and sums modulo
// 2³², clamps as comparisons), so the results are the same bit for bit.

// YCCSETUP loads the constants of both conversion kernels: 128 (Y15), the
// chroma factors 91881, −22554, −46802, 116130 (Y14..Y11), 0xffffff (Y10),
// zero (Y9) and the VPSHUFB control of y·0x10101 (Y8), with AX pointing at
// preprocessConst.
#define YCCSETUP \
	LEAQ         ·preprocessConst(SB), AX; \
	VPBROADCASTD 0(AX), Y15;               \
	VPBROADCASTD 4(AX), Y14;               \
	VPBROADCASTD 8(AX), Y13;               \
	VPBROADCASTD 12(AX), Y12;              \
	VPBROADCASTD 16(AX), Y11;              \
	VPBROADCASTD 20(AX), Y10;              \
	VPXOR        Y9, Y9, Y9;               \
	VMOVDQU      128(AX), Y8

// CHROMA computes the chroma terms of eight samples at (R9) and (R10):
// 91881·cr (Y2), −22554·cb − 46802·cr (Y3) and 116130·cb (Y4), with
// cb, cr the samples less 128.
#define CHROMA \
	VPMOVZXBD (R9), Y0;      \
	VPMOVZXBD (R10), Y1;     \
	VPSUBD    Y15, Y0, Y0;   \
	VPSUBD    Y15, Y1, Y1;   \
	VPMULLD   Y14, Y1, Y2;   \
	VPMULLD   Y11, Y0, Y4;   \
	VPMULLD   Y13, Y0, Y0;   \
	VPMULLD   Y12, Y1, Y1;   \
	VPADDD    Y1, Y0, Y3

// LUMA sets Y0 to y·0x10101 for the eight luma bytes at off(R8).
#define LUMA(off) \
	VPBROADCASTQ off(R8), Y0; \
	VPSHUFB      Y8, Y0, Y0

// STORE stores clamp(Y0 + d, 0, 0xffffff) >> 16 at dst, using Y1.
#define STORE(d, dst) \
	VPADDD  Y0, d, Y1;   \
	VPMAXSD Y9, Y1, Y1;  \
	VPMINSD Y10, Y1, Y1; \
	VPSRLD  $16, Y1, Y1; \
	VMOVDQU Y1, dst

// func ycc1AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int)
TEXT ·ycc1AVX2(SB), NOSPLIT, $0-56
	MOVQ pr+0(FP), DI
	MOVQ pg+8(FP), SI
	MOVQ pb+16(FP), DX
	MOVQ y+24(FP), R8
	MOVQ cb+32(FP), R9
	MOVQ cr+40(FP), R10
	MOVQ n+48(FP), CX
	YCCSETUP

ycc1_loop:
	CHROMA
	LUMA(0)
	STORE(Y2, (DI))
	STORE(Y3, (SI))
	STORE(Y4, (DX))
	ADDQ $8, R8
	ADDQ $8, R9
	ADDQ $8, R10
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ  ycc1_loop
	VZEROUPPER
	RET

// func ycc2AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int)
//
// Sixteen pixels per iteration: the chroma terms of eight samples, each
// duplicated into the lanes of its two pixels by VPERMD (Y7: samples 0..3,
// Y6: samples 4..7).
TEXT ·ycc2AVX2(SB), NOSPLIT, $0-56
	MOVQ    pr+0(FP), DI
	MOVQ    pg+8(FP), SI
	MOVQ    pb+16(FP), DX
	MOVQ    y+24(FP), R8
	MOVQ    cb+32(FP), R9
	MOVQ    cr+40(FP), R10
	MOVQ    n+48(FP), CX
	YCCSETUP
	VMOVDQU 32(AX), Y7
	VMOVDQU 64(AX), Y6

ycc2_loop:
	CHROMA
	LUMA(0)
	VPERMD Y2, Y7, Y5
	STORE(Y5, (DI))
	VPERMD Y3, Y7, Y5
	STORE(Y5, (SI))
	VPERMD Y4, Y7, Y5
	STORE(Y5, (DX))
	LUMA(8)
	VPERMD Y2, Y6, Y5
	STORE(Y5, 32(DI))
	VPERMD Y3, Y6, Y5
	STORE(Y5, 32(SI))
	VPERMD Y4, Y6, Y5
	STORE(Y5, 32(DX))
	ADDQ   $16, R8
	ADDQ   $8, R9
	ADDQ   $8, R10
	ADDQ   $64, DI
	ADDQ   $64, SI
	ADDQ   $64, DX
	SUBQ   $16, CX
	JNZ    ycc2_loop
	VZEROUPPER
	RET

// func hdotAVX2(out *uint8, pr, pg, pb *int32, first *int, k *int32, taps int)
//
// Per output: three sums of eight lanes over the window, reduced by
// VPHADDD to [r g b b], rounded, shifted, saturated to bytes by the packs.
TEXT ·hdotAVX2(SB), NOSPLIT, $0-56
	MOVQ         out+0(FP), DI
	MOVQ         pr+8(FP), R8
	MOVQ         pg+16(FP), R9
	MOVQ         pb+24(FP), R10
	MOVQ         first+32(FP), SI
	MOVQ         k+40(FP), DX
	MOVQ         taps+48(FP), CX
	SHLQ         $2, CX              // bytes of a window
	LEAQ         ·preprocessConst(SB), AX
	VPBROADCASTD 24(AX), X15         // the rounding half
	XORQ         BX, BX              // the output

hdot_output:
	MOVQ  (SI)(BX*8), AX
	LEAQ  (R8)(AX*4), R11
	LEAQ  (R9)(AX*4), R12
	LEAQ  (R10)(AX*4), R13
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	XORQ  AX, AX

hdot_tap:
	VMOVDQU (DX)(AX*1), Y3
	VPMULLD (R11)(AX*1), Y3, Y4
	VPADDD  Y4, Y0, Y0
	VPMULLD (R12)(AX*1), Y3, Y5
	VPADDD  Y5, Y1, Y1
	VPMULLD (R13)(AX*1), Y3, Y6
	VPADDD  Y6, Y2, Y2
	ADDQ    $32, AX
	CMPQ    AX, CX
	JNE     hdot_tap

	ADDQ         CX, DX              // the next window's weights
	VPHADDD      Y1, Y0, Y0          // r01 r23 g01 g23 | r45 r67 g45 g67
	VPHADDD      Y2, Y2, Y2          // b01 b23 b01 b23 | b45 b67 b45 b67
	VPHADDD      Y2, Y0, Y0          // r0123 g0123 b0123 b0123 | r4567 ...
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0          // r g b b
	VPADDD       X15, X0, X0
	VPSRAD       $22, X0, X0         // precision
	VPACKSSDW    X0, X0, X0          // in −512..511: exact
	VPACKUSWB    X0, X0, X0          // clamped to 0..255
	MOVQ         X0, AX
	MOVB         AX, (DI)(BX*1)
	SHRL         $8, AX
	MOVB         AX, 32(DI)(BX*1)
	SHRL         $8, AX
	MOVB         AX, 64(DI)(BX*1)
	INCQ         BX
	CMPQ         BX, $32
	JNE          hdot_output
	VZEROUPPER
	RET

// MAC adds k·mid[off:off+8] (bytes at SI, weight in Y12) to acc.
#define MAC(off, acc) \
	VPMOVZXBD off(SI), Y13; \
	VPMULLD   Y12, Y13, Y13; \
	VPADDD    Y13, acc, acc

// PACK rounds and shifts the sums a, b, c, d (32 columns of a plane, in
// order), saturates them to bytes and stores them at dst.
#define PACK(a, b, c, d, dst) \
	VPADDD    Y12, a, a;   \
	VPADDD    Y12, b, b;   \
	VPADDD    Y12, c, c;   \
	VPADDD    Y12, d, d;   \
	VPSRAD    $22, a, a;   \
	VPSRAD    $22, b, b;   \
	VPSRAD    $22, c, c;   \
	VPSRAD    $22, d, d;   \
	VPACKSSDW b, a, a;     \
	VPACKSSDW d, c, c;     \
	VPACKUSWB c, a, a;     \
	VPERMD    a, Y13, a;   \
	VMOVDQU   a, dst

// func vdotAVX2(dst, mid *uint8, k *int32, taps int)
TEXT ·vdotAVX2(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  mid+8(FP), SI
	MOVQ  k+16(FP), DX
	MOVQ  taps+24(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11

vdot_row:
	VPBROADCASTD (DX), Y12
	MAC(0, Y0)
	MAC(8, Y1)
	MAC(16, Y2)
	MAC(24, Y3)
	MAC(32, Y4)
	MAC(40, Y5)
	MAC(48, Y6)
	MAC(56, Y7)
	MAC(64, Y8)
	MAC(72, Y9)
	MAC(80, Y10)
	MAC(88, Y11)
	ADDQ $4, DX
	ADDQ $96, SI
	DECQ CX
	JNZ  vdot_row

	LEAQ         ·preprocessConst(SB), AX
	VPBROADCASTD 24(AX), Y12
	VMOVDQU      96(AX), Y13
	PACK(Y0, Y1, Y2, Y3, (DI))
	PACK(Y4, Y5, Y6, Y7, 1024(DI))
	PACK(Y8, Y9, Y10, Y11, 2048(DI))
	VZEROUPPER
	RET
