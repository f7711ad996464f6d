//go:build !purego

#include "textflag.h"
#include "shuffle_amd64.h"

// AVX2 kernels of the Winograd F(2×2, 3×3) data transforms (winograd.go).
// Only additions and subtractions, in the order of the Go loops, so every
// lane rounds exactly as they do. n is a positive multiple of 8.

// ATCOLS computes, for the next 8 elements at index AX of d0-d3 (SI, R11,
// R12, R13), s0 = d0 + d1 + d2 into Y4 and s1 = d1 − d2 − d3 into Y5.
#define ATCOLS \
	VMOVUPS (R11)(AX*4), Y1;    \
	VMOVUPS (R12)(AX*4), Y2;    \
	VADDPS  (SI)(AX*4), Y1, Y4; \
	VADDPS  Y2, Y4, Y4;         \
	VSUBPS  Y2, Y1, Y5;         \
	VSUBPS  (R13)(AX*4), Y5, Y5

// func winoInRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int)
TEXT ·winoInRowsAVX2(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), SI
	MOVQ o0+8(FP), DI
	MOVQ o1+16(FP), R8
	MOVQ o2+24(FP), R9
	MOVQ o3+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ half+48(FP), DX
	MOVQ adv+56(FP), R11
	SHLQ $2, DX
	SHLQ $2, R11

inrows_loop:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(DX*1), Y1
	VMOVUPS 8(SI), Y2
	VMOVUPS 8(SI)(DX*1), Y3
	DEINTERLEAVE(Y0, Y1, Y4, Y5) // a = row[2q], b = row[2q+1]
	DEINTERLEAVE(Y2, Y3, Y6, Y7) // c = row[2q+2], d = row[2q+3]
	VSUBPS  Y6, Y4, Y8           // a − c
	VADDPS  Y6, Y5, Y9           // b + c
	VSUBPS  Y5, Y6, Y10          // c − b
	VSUBPS  Y7, Y5, Y11          // b − d
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (R8)
	VMOVUPS Y10, (R9)
	VMOVUPS Y11, (R10)
	ADDQ    R11, SI
	ADDQ    $32, DI
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, R10
	SUBQ    $8, CX
	JNZ     inrows_loop
	VZEROUPPER
	RET

// func winoInColsAVX2(o0, o1, o2, o3, d0, d1, d2, d3 *float32, n int)
TEXT ·winoInColsAVX2(SB), NOSPLIT, $0-72
	MOVQ o0+0(FP), DI
	MOVQ o1+8(FP), R8
	MOVQ o2+16(FP), R9
	MOVQ o3+24(FP), R10
	MOVQ d0+32(FP), SI
	MOVQ d1+40(FP), R11
	MOVQ d2+48(FP), R12
	MOVQ d3+56(FP), R13
	MOVQ n+64(FP), CX
	XORQ AX, AX

incols_loop:
	VMOVUPS (SI)(AX*4), Y0  // a
	VMOVUPS (R11)(AX*4), Y1 // b
	VMOVUPS (R12)(AX*4), Y2 // c
	VMOVUPS (R13)(AX*4), Y3 // e
	VSUBPS  Y2, Y0, Y4      // a − c
	VADDPS  Y2, Y1, Y5      // b + c
	VSUBPS  Y1, Y2, Y6      // c − b
	VSUBPS  Y3, Y1, Y7      // b − e
	VMOVUPS Y4, (DI)(AX*4)
	VMOVUPS Y5, (R8)(AX*4)
	VMOVUPS Y6, (R9)(AX*4)
	VMOVUPS Y7, (R10)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     incols_loop
	VZEROUPPER
	RET

// func winoOutColsAVX2(o0, o1, d0, d1, d2, d3 *float32, n int)
TEXT ·winoOutColsAVX2(SB), NOSPLIT, $0-56
	MOVQ o0+0(FP), DI
	MOVQ o1+8(FP), R8
	MOVQ d0+16(FP), SI
	MOVQ d1+24(FP), R11
	MOVQ d2+32(FP), R12
	MOVQ d3+40(FP), R13
	MOVQ n+48(FP), CX
	XORQ AX, AX

outcols_loop:
	ATCOLS
	VMOVUPS Y4, (DI)(AX*4)
	VMOVUPS Y5, (R8)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     outcols_loop
	VZEROUPPER
	RET

// func winoOutRowsAVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, half, adv int)
TEXT ·winoOutRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ         row+0(FP), DI
	MOVQ         d0+8(FP), SI
	MOVQ         d1+16(FP), R11
	MOVQ         d2+24(FP), R12
	MOVQ         d3+32(FP), R13
	MOVQ         n+40(FP), CX
	MOVQ         mode+48(FP), DX
	VBROADCASTSS bias+56(FP), Y9
	MOVQ         half+64(FP), R8
	MOVQ         adv+72(FP), R9
	SHLQ         $2, R8
	SHLQ         $2, R9
	XORQ         AX, AX

outrows_loop:
	ATCOLS
	INTERLEAVE(Y4, Y5, Y6, Y7, Y8)
	CMPQ    DX, $1
	JLT     outrows_store // outStore
	JGT     outrows_bias  // outBias
	VADDPS  (DI), Y6, Y6  // outAdd
	VADDPS  (DI)(R8*1), Y7, Y7
	JMP     outrows_store

outrows_bias:
	VADDPS Y9, Y6, Y6
	VADDPS Y9, Y7, Y7

outrows_store:
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, (DI)(R8*1)
	ADDQ    R9, DI
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     outrows_loop
	VZEROUPPER
	RET

// FILTERLOAD loads the filters of the next four output channels, lane l
// at SI + l·R8 (R9 = 2·R8, R10 = 3·R8), transposes them and converts them
// to float64: Yj holds element j of the four filters for j = 0, …, 8.
#define FILTERLOAD \
	VMOVUPS      (SI), Y0;                \
	VMOVUPS      (SI)(R8*1), Y1;          \
	VMOVUPS      (SI)(R9*1), Y2;          \
	VMOVUPS      (SI)(R10*1), Y3;         \
	VMOVSS       32(SI), X8;              \
	VINSERTPS    $0x10, 32(SI)(R8*1), X8, X8;  \
	VINSERTPS    $0x20, 32(SI)(R9*1), X8, X8;  \
	VINSERTPS    $0x30, 32(SI)(R10*1), X8, X8; \
	VUNPCKLPS    Y1, Y0, Y4;              \
	VUNPCKHPS    Y1, Y0, Y5;              \
	VUNPCKLPS    Y3, Y2, Y6;              \
	VUNPCKHPS    Y3, Y2, Y7;              \
	VSHUFPS      $0x44, Y6, Y4, Y0;       \
	VSHUFPS      $0xEE, Y6, Y4, Y1;       \
	VSHUFPS      $0x44, Y7, Y5, Y2;       \
	VSHUFPS      $0xEE, Y7, Y5, Y3;       \
	VEXTRACTF128 $1, Y0, X4;              \
	VEXTRACTF128 $1, Y1, X5;              \
	VEXTRACTF128 $1, Y2, X6;              \
	VEXTRACTF128 $1, Y3, X7;              \
	VCVTPS2PD    X0, Y0;                  \
	VCVTPS2PD    X1, Y1;                  \
	VCVTPS2PD    X2, Y2;                  \
	VCVTPS2PD    X3, Y3;                  \
	VCVTPS2PD    X4, Y4;                  \
	VCVTPS2PD    X5, Y5;                  \
	VCVTPS2PD    X6, Y6;                  \
	VCVTPS2PD    X7, Y7;                  \
	VCVTPS2PD    X8, Y8

// GCOL computes column j of g = G·f from a = f[j], b = f[3+j] and
// c = f[6+j]: g1 = ½((a + b) + c) into g and g2 = ½((a − b) + c) into b
// (½ in Y15).
#define GCOL(a, b, c, g) \
	VADDPD b, a, g;   \
	VADDPD c, g, g;   \
	VMULPD Y15, g, g; \
	VSUBPD b, a, b;   \
	VADDPD c, b, b;   \
	VMULPD Y15, b, b

// UROW converts row (a, b, c) of g to float32 and stores U = g·Gᵀ's row
// a, ½((a + b) + c), ½((a − b) + c), c at BX, BX + DX, BX + 2·DX and
// BX + R11 (R11 = 3·DX), then moves BX on by four rows.
#define UROW(a, b, c) \
	VCVTPD2PSY a, X12;         \
	VMOVUPS    X12, (BX);      \
	VADDPD     b, a, Y12;      \
	VADDPD     c, Y12, Y12;    \
	VMULPD     Y15, Y12, Y12;  \
	VCVTPD2PSY Y12, X12;       \
	VMOVUPS    X12, (BX)(DX*1); \
	VSUBPD     b, a, Y13;      \
	VADDPD     c, Y13, Y13;    \
	VMULPD     Y15, Y13, Y13;  \
	VCVTPD2PSY Y13, X13;       \
	VMOVUPS    X13, (BX)(DX*2); \
	VCVTPD2PSY c, X14;         \
	VMOVUPS    X14, (BX)(R11*1); \
	LEAQ       (BX)(DX*4), BX

// FILTER transforms the four filters f0, …, f8 (registers) and stores
// the 16 rows of U, four floats each, at DI + ξ·DX.
#define FILTER(f0, f1, f2, f3, f4, f5, f6, f7, f8) \
	GCOL(f0, f3, f6, Y9);  \
	GCOL(f1, f4, f7, Y10); \
	GCOL(f2, f5, f8, Y11); \
	MOVQ DI, BX;           \
	UROW(f0, f1, f2);      \
	UROW(Y9, Y10, Y11);    \
	UROW(f3, f4, f5);      \
	UROW(f6, f7, f8)

// func winoFilterAVX2(dst *float32, pitch int, src *float32, stride, n int, swap bool)
TEXT ·winoFilterAVX2(SB), NOSPLIT, $0-41
	MOVQ         dst+0(FP), DI
	MOVQ         pitch+8(FP), DX
	MOVQ         src+16(FP), SI
	MOVQ         stride+24(FP), R8
	MOVQ         n+32(FP), CX
	MOVBLZX      swap+40(FP), AX
	SHLQ         $2, DX
	SHLQ         $2, R8
	LEAQ         (R8)(R8*1), R9
	LEAQ         (R9)(R8*1), R10
	LEAQ         (DX)(DX*2), R11
	LEAQ         (R8)(R8*1), R12
	SHLQ         $1, R12 // four lanes of source
	MOVQ         $0x3FE0000000000000, BX
	MOVQ         BX, X15
	VBROADCASTSD X15, Y15
	TESTQ        AX, AX
	JNZ          filter_swap

filter_loop:
	FILTERLOAD
	FILTER(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
	ADDQ R12, SI
	ADDQ $16, DI
	SUBQ $4, CX
	JNZ  filter_loop
	VZEROUPPER
	RET

filter_swap:
	FILTERLOAD
	FILTER(Y8, Y7, Y6, Y5, Y4, Y3, Y2, Y1, Y0)
	ADDQ R12, SI
	ADDQ $16, DI
	SUBQ $4, CX
	JNZ  filter_swap
	VZEROUPPER
	RET

// func winoInRows2AVX2(row, o0, o1, o2, o3 *float32, n, wp int)
TEXT ·winoInRows2AVX2(SB), NOSPLIT, $0-56
	MOVQ row+0(FP), SI
	MOVQ o0+8(FP), DI
	MOVQ o1+16(FP), R8
	MOVQ o2+24(FP), R9
	MOVQ o3+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ wp+48(FP), DX
	SHLQ $3, DX           // two plane rows, in bytes
	XORQ AX, AX

inrows2_loop:
	// The windows of tiles (i, 0), (i, 1), (i+1, 0) and (i+1, 1).
	VMOVUPS   (SI), X0
	VMOVUPS   8(SI), X1
	VMOVUPS   (SI)(DX*1), X2
	VMOVUPS   8(SI)(DX*1), X3
	VUNPCKLPS X1, X0, X4
	VUNPCKHPS X1, X0, X5
	VUNPCKLPS X3, X2, X6
	VUNPCKHPS X3, X2, X7
	VMOVLHPS  X6, X4, X0  // a
	VMOVHLPS  X4, X6, X1  // b
	VMOVLHPS  X7, X5, X2  // c
	VMOVHLPS  X5, X7, X3  // d
	VSUBPS    X2, X0, X4  // a − c
	VADDPS    X2, X1, X5  // b + c
	VSUBPS    X1, X2, X6  // c − b
	VSUBPS    X3, X1, X7  // b − d
	VMOVUPS   X4, (DI)(AX*4)
	VMOVUPS   X5, (R8)(AX*4)
	VMOVUPS   X6, (R9)(AX*4)
	VMOVUPS   X7, (R10)(AX*4)
	LEAQ      (SI)(DX*2), SI
	ADDQ      $4, AX
	CMPQ      AX, CX
	JLT       inrows2_loop
	VZEROUPPER
	RET

// func winoOutRows2AVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, wo int)
TEXT ·winoOutRows2AVX2(SB), NOSPLIT, $0-72
	MOVQ         row+0(FP), DI
	MOVQ         d0+8(FP), SI
	MOVQ         d1+16(FP), R11
	MOVQ         d2+24(FP), R12
	MOVQ         d3+32(FP), R13
	MOVQ         n+40(FP), CX
	MOVQ         mode+48(FP), DX
	VBROADCASTSS bias+56(FP), X9
	MOVQ         wo+64(FP), R8
	SHLQ         $3, R8            // two output rows, in bytes
	XORQ         AX, AX

outrows2_loop:
	VMOVUPS   (R11)(AX*4), X1
	VMOVUPS   (R12)(AX*4), X2
	VADDPS    (SI)(AX*4), X1, X4
	VADDPS    X2, X4, X4           // s0 = d0 + d1 + d2
	VSUBPS    X2, X1, X5
	VSUBPS    (R13)(AX*4), X5, X5  // s1 = d1 − d2 − d3
	VUNPCKLPS X5, X4, X6           // output row 2i+x
	VUNPCKHPS X5, X4, X7           // output row 2i+2+x
	CMPQ      DX, $1
	JLT       outrows2_store       // outStore
	JGT       outrows2_bias        // outBias
	VADDPS    (DI), X6, X6         // outAdd
	VADDPS    (DI)(R8*1), X7, X7
	JMP       outrows2_store

outrows2_bias:
	VADDPS X9, X6, X6
	VADDPS X9, X7, X7

outrows2_store:
	VMOVUPS X6, (DI)
	VMOVUPS X7, (DI)(R8*1)
	LEAQ    (DI)(R8*2), DI
	ADDQ    $4, AX
	CMPQ    AX, CX
	JLT     outrows2_loop
	VZEROUPPER
	RET

// func winoGradRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int)
TEXT ·winoGradRowsAVX2(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), SI
	MOVQ o0+8(FP), DI
	MOVQ o1+16(FP), R8
	MOVQ o2+24(FP), R9
	MOVQ o3+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ half+48(FP), DX
	MOVQ adv+56(FP), R11
	SHLQ $2, DX
	SHLQ $2, R11

gradrows_loop:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(DX*1), Y1
	DEINTERLEAVE(Y0, Y1, Y4, Y5) // a = row[2q], b = row[2q+1]
	VADDPS  Y5, Y4, Y6           // a + b
	VSUBPS  Y5, Y4, Y7           // a − b
	VMOVUPS Y4, (DI)
	VMOVUPS Y6, (R8)
	VMOVUPS Y7, (R9)
	VMOVUPS Y5, (R10)
	ADDQ    R11, SI
	ADDQ    $32, DI
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, R10
	SUBQ    $8, CX
	JNZ     gradrows_loop
	VZEROUPPER
	RET

// func winoGradColsAVX2(o0, o1, o2, o3, d0, d1 *float32, n int)
TEXT ·winoGradColsAVX2(SB), NOSPLIT, $0-56
	MOVQ o0+0(FP), DI
	MOVQ o1+8(FP), R8
	MOVQ o2+16(FP), R9
	MOVQ o3+24(FP), R10
	MOVQ d0+32(FP), SI
	MOVQ d1+40(FP), R11
	MOVQ n+48(FP), CX
	XORQ AX, AX

gradcols_loop:
	VMOVUPS (SI)(AX*4), Y0  // a
	VMOVUPS (R11)(AX*4), Y1 // b
	VADDPS  Y1, Y0, Y2      // a + b
	VSUBPS  Y1, Y0, Y3      // a − b
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y2, (R8)(AX*4)
	VMOVUPS Y3, (R9)(AX*4)
	VMOVUPS Y1, (R10)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     gradcols_loop
	VZEROUPPER
	RET
