//go:build !purego

#include "textflag.h"
#include "shuffle_amd64.h"

// AVX2 kernels of the 2×2, stride-2 max pool (pool.go). The forward pass
// only compares and selects, in the order of the Go loop, so it keeps
// every bit of the values, NaN payloads included; the gradient adds as
// the Go loop adds.

// TAKE replaces the maxima in Y4 and their offsets in the window in Y8 by
// the candidates v and the offset k where v > max or v is NaN.
#define TAKE(v, k) \
	VCMPPS    $0x1e, Y4, v, Y9; \
	VCMPPS    $3, v, v, Y10;    \
	VORPS     Y10, Y9, Y9;      \
	VBLENDVPS Y9, v, Y4, Y4;    \
	VBLENDVPS Y9, k, Y8, Y8

// WINDOWS sets up the int32 vectors of both kernels from w (DX), half
// (R9), adv (R10) and start (AX): the offsets 1, w and w + 1 of a window's
// elements (Y12, Y13, Y14), the index in the plane of each window's first
// element, start + 2l for the first four windows and start + half + 2l
// for the others (Y15), and adv in every lane (Y11). It then turns w, half
// and adv into byte counts.
#define WINDOWS \
	MOVL         $1, BX;                  \
	MOVQ         BX, X12;                 \
	VPBROADCASTD X12, Y12;                \
	MOVQ         DX, X13;                 \
	VPBROADCASTD X13, Y13;                \
	VPADDD       Y12, Y13, Y14;           \
	MOVQ         AX, X15;                 \
	VPBROADCASTD X15, Y15;                \
	MOVQ         R9, X0;                  \
	VPBROADCASTD X0, Y0;                  \
	VPXOR        Y2, Y2, Y2;              \
	VPBLENDD     $0xF0, Y0, Y2, Y0;       \
	VPADDD       pool2Lanes<>(SB), Y15, Y15; \
	VPADDD       Y0, Y15, Y15;            \
	MOVQ         R10, X11;                \
	VPBROADCASTD X11, Y11;                \
	SHLQ         $2, DX;                  \
	SHLQ         $2, R9;                  \
	SHLQ         $2, R10

// func maxPool2AVX2(src, dst, arg *float32, n, w, half, adv, start int)
TEXT ·maxPool2AVX2(SB), NOSPLIT, $0-64
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ arg+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ w+32(FP), DX
	MOVQ half+40(FP), R9
	MOVQ adv+48(FP), R10
	MOVQ start+56(FP), AX
	WINDOWS

pool2_loop:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R9*1), Y1
	LEAQ    (SI)(DX*1), BX
	VMOVUPS (BX), Y2
	VMOVUPS (BX)(R9*1), Y3
	DEINTERLEAVE(Y0, Y1, Y4, Y5)   // top-left, top-right
	DEINTERLEAVE(Y2, Y3, Y6, Y7)   // bottom-left, bottom-right
	VPXOR   Y8, Y8, Y8
	TAKE(Y5, Y12)
	TAKE(Y6, Y13)
	TAKE(Y7, Y14)
	VMOVUPS Y4, (DI)
	TESTQ   R8, R8
	JZ      pool2_next
	VPADDD  Y15, Y8, Y8
	VMOVDQU Y8, (R8)
	ADDQ    $32, R8

pool2_next:
	VPADDD Y11, Y15, Y15
	ADDQ   R10, SI
	ADDQ   $32, DI
	SUBQ   $8, CX
	JNZ    pool2_loop
	VZEROUPPER
	RET

// STOREROW stores one row of the eight windows' gradients, at p (windows
// 0-3) and p + R9 (windows 4-7): the interleaved gradients in Y6/Y7 where
// the masks ml/mh are set, zero elsewhere.
#define STOREROW(p, ml, mh) \
	VANDPS  ml, Y6, Y9;     \
	VMOVUPS Y9, (p);        \
	VANDPS  mh, Y7, Y9;     \
	VMOVUPS Y9, (p)(R9*1)

// ADDROW is STOREROW adding the gradients where the masks are set and
// leaving the other elements as they are.
#define ADDROW(p, ml, mh) \
	VMOVUPS   (p), Y9;           \
	VADDPS    Y6, Y9, Y0;        \
	VBLENDVPS ml, Y0, Y9, Y9;    \
	VMOVUPS   Y9, (p);           \
	VMOVUPS   (p)(R9*1), Y9;     \
	VADDPS    Y7, Y9, Y0;        \
	VBLENDVPS mh, Y0, Y9, Y9;    \
	VMOVUPS   Y9, (p)(R9*1)

// func maxPool2GradAVX2(gx, gy, arg *float32, n, w, half, adv, start int, store bool)
TEXT ·maxPool2GradAVX2(SB), NOSPLIT, $0-65
	MOVQ    gx+0(FP), DI
	MOVQ    gy+8(FP), SI
	MOVQ    arg+16(FP), R8
	MOVQ    n+24(FP), CX
	MOVQ    w+32(FP), DX
	MOVQ    half+40(FP), R9
	MOVQ    adv+48(FP), R10
	MOVQ    start+56(FP), AX
	WINDOWS
	MOVBLZX store+64(FP), BX

pool2grad_loop:
	VMOVUPS  (SI), Y0        // the gradients of the eight windows
	VMOVDQU  (R8), Y1
	VPSUBD   Y15, Y1, Y1     // the offsets of their maxima
	VPXOR    Y10, Y10, Y10
	VPCMPEQD Y10, Y1, Y2
	VPCMPEQD Y12, Y1, Y3
	VPCMPEQD Y13, Y1, Y4
	VPCMPEQD Y14, Y1, Y5
	INTERLEAVE(Y2, Y3, Y2, Y3, Y8)  // masks of the top row
	INTERLEAVE(Y4, Y5, Y4, Y5, Y8)  // masks of the bottom row
	LEAQ     (DI)(DX*1), R11 // the bottom row
	TESTQ    BX, BX
	JZ       pool2grad_add
	VADDPS   Y10, Y0, Y0     // 0 + g, as added to a zeroed gradient
	INTERLEAVE(Y0, Y0, Y6, Y7, Y8)
	STOREROW(DI, Y2, Y3)
	STOREROW(R11, Y4, Y5)
	JMP      pool2grad_next

pool2grad_add:
	INTERLEAVE(Y0, Y0, Y6, Y7, Y8)
	ADDROW(DI, Y2, Y3)
	ADDROW(R11, Y4, Y5)

pool2grad_next:
	VPADDD Y11, Y15, Y15
	ADDQ   R10, DI
	ADDQ   $32, SI
	ADDQ   $32, R8
	SUBQ   $8, CX
	JNZ    pool2grad_loop
	VZEROUPPER
	RET

// 0, 2, 4, 6 in the low lanes: the offsets of four windows along a row.
DATA pool2Lanes<>+0(SB)/4, $0
DATA pool2Lanes<>+4(SB)/4, $2
DATA pool2Lanes<>+8(SB)/4, $4
DATA pool2Lanes<>+12(SB)/4, $6
DATA pool2Lanes<>+16(SB)/4, $0
DATA pool2Lanes<>+20(SB)/4, $2
DATA pool2Lanes<>+24(SB)/4, $4
DATA pool2Lanes<>+28(SB)/4, $6
GLOBL pool2Lanes<>(SB), RODATA|NOPTR, $32
