//go:build !purego

#include "textflag.h"

// AVX2 kernels of vec.go (package kernels). No fused multiply-add: every lane rounds
// exactly as the Go loops in vec.go do. n is a positive multiple of 8.

// COMBINE8 adds the eight float64 lane sums held in lo (lanes 0-3) and hi
// (lanes 4-7) in the order of combine8 and leaves the total in the low
// element of xlo (the low half of lo). xt is a scratch register.
#define COMBINE8(lo, hi, xlo, xt) \
	VADDPD       hi, lo, lo; \
	VEXTRACTF128 $1, lo, xt; \
	VADDPD       xt, xlo, xlo; \
	VUNPCKHPD    xlo, xlo, xt; \
	VADDSD       xt, xlo, xlo

// ZERO4 clears the four float64 accumulators Y0-Y3.
#define ZERO4 \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VXORPD Y2, Y2, Y2; \
	VXORPD Y3, Y3, Y3

// GSUMS adds the next 8 gradients, given as float64 in Y4 (lanes 0-3) and
// Y5 (lanes 4-7), to Y0/Y1 and their products with x − mean (x at DI, mean
// in Y15) to Y2/Y3.
#define GSUMS \
	VCVTPS2PD (DI), Y6; \
	VCVTPS2PD 16(DI), Y7; \
	VSUBPD    Y15, Y6, Y6; \
	VSUBPD    Y15, Y7, Y7; \
	VADDPD    Y4, Y0, Y0; \
	VADDPD    Y5, Y1, Y1; \
	VMULPD    Y6, Y4, Y6; \
	VMULPD    Y7, Y5, Y7; \
	VADDPD    Y6, Y2, Y2; \
	VADDPD    Y7, Y3, Y3

// WIDEN8 converts the 8 gradients in Y8 to float64 in Y4 (lanes 0-3) and
// Y5 (lanes 4-7), as GSUMS takes them.
#define WIDEN8 \
	VCVTPS2PD    X8, Y4; \
	VEXTRACTF128 $1, Y8, X5; \
	VCVTPS2PD    X5, Y5

// AFFINE computes (x − m)·a + b for the next 8 x at SI into Y0 (m, a, b
// broadcast in Y13, Y12, Y11).
#define AFFINE \
	VMOVUPS (SI), Y0;    \
	VSUBPS  Y13, Y0, Y0; \
	VMULPS  Y12, Y0, Y0; \
	VADDPS  Y11, Y0, Y0

// func statsAsm(x *float32, n int, k float64) (s1, s2 float64)
TEXT ·statsAsm(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD k+16(FP), Y15
	ZERO4

stats_loop:
	VCVTPS2PD (SI), Y4
	VCVTPS2PD 16(SI), Y5
	VSUBPD    Y15, Y4, Y4
	VSUBPD    Y15, Y5, Y5
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VMULPD    Y4, Y4, Y4
	VMULPD    Y5, Y5, Y5
	VADDPD    Y4, Y2, Y2
	VADDPD    Y5, Y3, Y3
	ADDQ      $32, SI
	SUBQ      $8, CX
	JNZ       stats_loop

	COMBINE8(Y0, Y1, X0, X4)
	COMBINE8(Y2, Y3, X2, X4)
	VMOVSD X0, s1+24(FP)
	VMOVSD X2, s2+32(FP)
	VZEROUPPER
	RET

// func gradSumsAsm(dy, x *float32, n int, mean float64) (sdy, sdyx float64)
TEXT ·gradSumsAsm(SB), NOSPLIT, $0-48
	MOVQ         dy+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSD mean+24(FP), Y15
	ZERO4

gsums_loop:
	VCVTPS2PD (SI), Y4
	VCVTPS2PD 16(SI), Y5
	GSUMS
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       gsums_loop

	COMBINE8(Y0, Y1, X0, X4)
	COMBINE8(Y2, Y3, X2, X4)
	VMOVSD X0, sdy+32(FP)
	VMOVSD X2, sdyx+40(FP)
	VZEROUPPER
	RET

// func gradSumsMaskedAsm(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64)
TEXT ·gradSumsMaskedAsm(SB), NOSPLIT, $0-56
	MOVQ         dy+0(FP), SI
	MOVQ         y+8(FP), DX
	MOVQ         x+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSD mean+32(FP), Y15
	VXORPS       Y14, Y14, Y14
	ZERO4

gsumsm_loop:
	VMOVUPS      (SI), Y8
	VMOVUPS      (DX), Y9
	VCMPPS       $0x1e, Y14, Y9, Y9 // y > 0
	VANDPS       Y9, Y8, Y8
	WIDEN8
	GSUMS
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	SUBQ         $8, CX
	JNZ          gsumsm_loop

	COMBINE8(Y0, Y1, X0, X4)
	COMBINE8(Y2, Y3, X2, X4)
	VMOVSD X0, sdy+40(FP)
	VMOVSD X2, sdyx+48(FP)
	VZEROUPPER
	RET

// func affineAsm(dst, x, r *float32, n int, m, a, b float32, mode int)
TEXT ·affineAsm(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         r+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS m+32(FP), Y13
	VBROADCASTSS a+36(FP), Y12
	VBROADCASTSS b+40(FP), Y11
	MOVQ         mode+48(FP), AX
	VXORPS       Y14, Y14, Y14
	CMPQ         AX, $1
	JEQ          affine_relu
	JGT          affine_addrelu

affine_plain:
	AFFINE
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     affine_plain
	VZEROUPPER
	RET

affine_relu:
	AFFINE
	VMAXPS  Y0, Y14, Y0 // 0 > v ? 0 : v
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     affine_relu
	VZEROUPPER
	RET

affine_addrelu:
	AFFINE
	VADDPS  (DX), Y0, Y0
	VMAXPS  Y0, Y14, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     affine_addrelu
	VZEROUPPER
	RET

// GRADVAL leaves k1·g + k2·(x − m) + k3 for the next 8 elements in Y0,
// where g (in Y0 on entry) has already been loaded and masked.
#define GRADVAL \
	VMULPS  Y12, Y0, Y0; \
	VMOVUPS (BX), Y2; \
	VSUBPS  Y13, Y2, Y2; \
	VMULPS  Y11, Y2, Y2; \
	VADDPS  Y2, Y0, Y0; \
	VADDPS  Y10, Y0, Y0

// MASKG loads the next 8 gradients into Y0, zeroed where y <= 0.
#define MASKG \
	VMOVUPS (SI), Y0; \
	VMOVUPS (DX), Y1; \
	VCMPPS  $0x1e, Y14, Y1, Y1; \
	VANDPS  Y1, Y0, Y0

// func affineGradAsm(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int)
TEXT ·affineGradAsm(SB), NOSPLIT, $0-64
	MOVQ         dst+0(FP), DI
	MOVQ         dy+8(FP), SI
	MOVQ         y+16(FP), DX
	MOVQ         x+24(FP), BX
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Y13
	VBROADCASTSS k1+44(FP), Y12
	VBROADCASTSS k2+48(FP), Y11
	VBROADCASTSS k3+52(FP), Y10
	MOVQ         mode+56(FP), AX
	VXORPS       Y14, Y14, Y14
	CMPQ         AX, $1
	JEQ          agrad_mask_add
	JGT          agrad_store

agrad_add:
	VMOVUPS (SI), Y0
	GRADVAL
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     agrad_add
	VZEROUPPER
	RET

agrad_mask_add:
	MASKG
	GRADVAL
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     agrad_mask_add
	VZEROUPPER
	RET

agrad_store:
	CMPQ AX, $3
	JEQ  agrad_mask_store

agrad_store_loop:
	VMOVUPS (SI), Y0
	GRADVAL
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     agrad_store_loop
	VZEROUPPER
	RET

agrad_mask_store:
	MASKG
	GRADVAL
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     agrad_mask_store
	VZEROUPPER
	RET

// func maskedGradAsm(dst, dy, y *float32, n int, mode int)
TEXT ·maskedGradAsm(SB), NOSPLIT, $0-40
	MOVQ   dst+0(FP), DI
	MOVQ   dy+8(FP), SI
	MOVQ   y+16(FP), DX
	MOVQ   n+24(FP), CX
	MOVQ   mode+32(FP), AX
	VXORPS Y14, Y14, Y14
	CMPQ   AX, $2
	JEQ    mgrad_store

mgrad_add:
	MASKG
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     mgrad_add
	VZEROUPPER
	RET

mgrad_store:
	MASKG
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     mgrad_store
	VZEROUPPER
	RET

// func reluAsm(dst, x *float32, n int)
TEXT ·reluAsm(SB), NOSPLIT, $0-24
	MOVQ   dst+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y14, Y14, Y14

relu_loop:
	VMOVUPS (SI), Y0
	VMAXPS  Y0, Y14, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     relu_loop
	VZEROUPPER
	RET

// RELUMASK leaves in dst the mask (x − m)·a + b > 0 of the 8 values of x
// in xv (m, a, b broadcast in Y13, ma, mb; zero in Y14): where the output
// of Affine with the ReLU epilogue is > 0, rounded as affineAsm rounds it.
#define RELUMASK(xv, ma, mb, dst) \
	VSUBPS Y13, xv, dst; \
	VMULPS ma, dst, dst; \
	VADDPS mb, dst, dst; \
	VCMPPS $0x1e, Y14, dst, dst

// func gradSumsReLUAsm(dy, x *float32, n int, mean float64, m, a, b float32) (sdy, sdyx float64)
TEXT ·gradSumsReLUAsm(SB), NOSPLIT, $0-64
	MOVQ         dy+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSD mean+24(FP), Y15
	VBROADCASTSS m+32(FP), Y13
	VBROADCASTSS a+36(FP), Y12
	VBROADCASTSS b+40(FP), Y11
	VXORPS       Y14, Y14, Y14
	ZERO4

gsumsr_loop:
	VMOVUPS      (DI), Y9
	RELUMASK(Y9, Y12, Y11, Y9)
	VANDPS       (SI), Y9, Y8
	WIDEN8
	GSUMS
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $8, CX
	JNZ          gsumsr_loop

	COMBINE8(Y0, Y1, X0, X4)
	COMBINE8(Y2, Y3, X2, X4)
	VMOVSD X0, sdy+48(FP)
	VMOVSD X2, sdyx+56(FP)
	VZEROUPPER
	RET

// RGRADVAL leaves k1·g + k2·(x − m) + k3 for the next 8 elements in Y0,
// g (at SI) masked by RELUMASK (a, b in Y9, Y8).
#define RGRADVAL \
	VMOVUPS (BX), Y2; \
	RELUMASK(Y2, Y9, Y8, Y3); \
	VSUBPS  Y13, Y2, Y2; \
	VANDPS  (SI), Y3, Y0; \
	VMULPS  Y12, Y0, Y0; \
	VMULPS  Y11, Y2, Y2; \
	VADDPS  Y2, Y0, Y0; \
	VADDPS  Y10, Y0, Y0

// func affineGradReLUAsm(dst, dy, x *float32, n int, m, k1, k2, k3, a, b float32, mode int)
TEXT ·affineGradReLUAsm(SB), NOSPLIT, $0-64
	MOVQ         dst+0(FP), DI
	MOVQ         dy+8(FP), SI
	MOVQ         x+16(FP), BX
	MOVQ         n+24(FP), CX
	VBROADCASTSS m+32(FP), Y13
	VBROADCASTSS k1+36(FP), Y12
	VBROADCASTSS k2+40(FP), Y11
	VBROADCASTSS k3+44(FP), Y10
	VBROADCASTSS a+48(FP), Y9
	VBROADCASTSS b+52(FP), Y8
	MOVQ         mode+56(FP), AX
	VXORPS       Y14, Y14, Y14
	CMPQ         AX, $2
	JEQ          rgrad_store

rgrad_add:
	RGRADVAL
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     rgrad_add
	VZEROUPPER
	RET

rgrad_store:
	RGRADVAL
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     rgrad_store
	VZEROUPPER
	RET
