//go:build !purego

#include "textflag.h"

// AVX2 kernels of the group maps (groupk.go). float32 inputs are widened
// to float64 and every operation is the float64 operation of the Go loop,
// without fused multiply-adds, so the results are bit-identical.

// ETA_RANGE_STORE reduces the lane minima in Y4 and maxima in Y5 and
// stores them at 0(R8) and 4(R8); it uses X6.
#define ETA_RANGE_STORE \
	VEXTRACTF128 $1, Y4, X6 \
	VMINPS       X6, X4, X4 \
	VPERMILPS    $0x4e, X4, X6 \
	VMINPS       X6, X4, X4 \
	VPERMILPS    $0xb1, X4, X6 \
	VMINPS       X6, X4, X4 \
	VMOVSS       X4, 0(R8) \
	VEXTRACTF128 $1, Y5, X6 \
	VMAXPS       X6, X5, X5 \
	VPERMILPS    $0x4e, X5, X6 \
	VMAXPS       X6, X5, X5 \
	VPERMILPS    $0xb1, X5, X6 \
	VMAXPS       X6, X5, X5 \
	VMOVSS       X5, 4(R8)

// FIRST_ORDER_STORE stores z − z·(e·(1 − e)) at (DI), with e in Y0, z at
// (SI) and 1 in Y14; it uses Y1 and Y2.
#define FIRST_ORDER_STORE \
	VSUBPS  Y0, Y14, Y1 \
	VMULPS  Y1, Y0, Y1 \
	VMOVUPS (SI), Y2 \
	VMULPS  Y1, Y2, Y1 \
	VSUBPS  Y1, Y2, Y2 \
	VMOVUPS Y2, (DI)

DATA gone<>+0(SB)/8, $1.0
GLOBL gone<>(SB), RODATA|NOPTR, $8

DATA gone32<>+0(SB)/4, $1.0
GLOBL gone32<>(SB), RODATA|NOPTR, $4

// func groupSumsAVX2(z, eta *float32, n int, acc *[24]float64, mm *[2]float32)
// acc[j] += z², acc[8+j] += z²·eta, acc[16+j] += (z²·eta)·eta for element
// 8k+j; mm[0], mm[1] take the smallest and largest eta.
TEXT ·groupSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ z+0(FP), SI
	MOVQ eta+8(FP), DX
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DI
	MOVQ mm+32(FP), R8
	VMOVUPD 0(DI), Y0            // Σz², lanes 0-3
	VMOVUPD 32(DI), Y1           // Σz², lanes 4-7
	VMOVUPD 64(DI), Y2           // Σz²η, lanes 0-3
	VMOVUPD 96(DI), Y3           // Σz²η, lanes 4-7
	VMOVUPD 128(DI), Y11         // Σz²η², lanes 0-3
	VMOVUPD 160(DI), Y12         // Σz²η², lanes 4-7
	VBROADCASTSS 0(R8), Y4       // min η
	VBROADCASTSS 4(R8), Y5       // max η
	SHRQ $3, CX
	JZ   gsdone
gsloop:
	VMOVUPS   (DX), Y6
	VMINPS    Y6, Y4, Y4
	VMAXPS    Y6, Y5, Y5
	VCVTPS2PD (SI), Y7
	VCVTPS2PD 16(SI), Y8
	VCVTPS2PD (DX), Y9
	VCVTPS2PD 16(DX), Y10
	VMULPD    Y7, Y7, Y7         // z²
	VMULPD    Y8, Y8, Y8
	VADDPD    Y7, Y0, Y0
	VADDPD    Y8, Y1, Y1
	VMULPD    Y9, Y7, Y7         // z²·η
	VMULPD    Y10, Y8, Y8
	VADDPD    Y7, Y2, Y2
	VADDPD    Y8, Y3, Y3
	VMULPD    Y9, Y7, Y7         // z²·η·η
	VMULPD    Y10, Y8, Y8
	VADDPD    Y7, Y11, Y11
	VADDPD    Y8, Y12, Y12
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  gsloop
gsdone:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y11, 128(DI)
	VMOVUPD Y12, 160(DI)
	ETA_RANGE_STORE
	VZEROUPPER
	RET

// func newtonSumsAVX2(z, eta *float32, n int, rho, lam float64, acc *[16]float64)
// With inv = 1/(ρ + λ·eta) and u = z·inv: acc[j] += u², acc[8+j] += u²·inv
// for element 8k+j.
TEXT ·newtonSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ z+0(FP), SI
	MOVQ eta+8(FP), DX
	MOVQ n+16(FP), CX
	VBROADCASTSD rho+24(FP), Y15
	VBROADCASTSD lam+32(FP), Y14
	MOVQ acc+40(FP), DI
	VBROADCASTSD gone<>(SB), Y13
	VMOVUPD 0(DI), Y0            // Σu², lanes 0-3
	VMOVUPD 32(DI), Y1           // Σu², lanes 4-7
	VMOVUPD 64(DI), Y2           // Σu²·inv, lanes 0-3
	VMOVUPD 96(DI), Y3           // Σu²·inv, lanes 4-7
	SHRQ $3, CX
	JZ   nsdone
nsloop:
	VCVTPS2PD (DX), Y4
	VCVTPS2PD 16(DX), Y5
	VMULPD    Y14, Y4, Y4        // λ·η
	VMULPD    Y14, Y5, Y5
	VADDPD    Y15, Y4, Y4        // ρ + λ·η
	VADDPD    Y15, Y5, Y5
	VDIVPD    Y4, Y13, Y4        // inv
	VDIVPD    Y5, Y13, Y5
	VCVTPS2PD (SI), Y6
	VCVTPS2PD 16(SI), Y7
	VMULPD    Y4, Y6, Y6         // u
	VMULPD    Y5, Y7, Y7
	VMULPD    Y6, Y6, Y6         // u²
	VMULPD    Y7, Y7, Y7
	VADDPD    Y6, Y0, Y0
	VADDPD    Y7, Y1, Y1
	VMULPD    Y4, Y6, Y6         // u²·inv
	VMULPD    Y5, Y7, Y7
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  nsloop
nsdone:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func groupSums32AVX2(z, eta *float32, n int, acc *[32]float32, mm *[2]float32)
// acc[j] += z[16k+j]², acc[16+j] += z[16k+j]²·eta[16k+j] in float32; mm[0],
// mm[1] take the smallest and largest eta.
TEXT ·groupSums32AVX2(SB), NOSPLIT, $0-40
	MOVQ z+0(FP), SI
	MOVQ eta+8(FP), DX
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DI
	MOVQ mm+32(FP), R8
	VMOVUPS 0(DI), Y0            // Σz², lanes 0-7
	VMOVUPS 32(DI), Y1           // Σz², lanes 8-15
	VMOVUPS 64(DI), Y2           // Σz²η, lanes 0-7
	VMOVUPS 96(DI), Y3           // Σz²η, lanes 8-15
	VBROADCASTSS 0(R8), Y4       // min η
	VBROADCASTSS 4(R8), Y5       // max η
	SHRQ $4, CX
	JZ   g3done
g3loop:
	VMOVUPS (SI), Y6
	VMOVUPS 32(SI), Y7
	VMOVUPS (DX), Y8
	VMOVUPS 32(DX), Y9
	VMINPS  Y8, Y4, Y4
	VMAXPS  Y8, Y5, Y5
	VMINPS  Y9, Y4, Y4
	VMAXPS  Y9, Y5, Y5
	VMULPS  Y6, Y6, Y6           // z²
	VMULPS  Y7, Y7, Y7
	VADDPS  Y6, Y0, Y0
	VADDPS  Y7, Y1, Y1
	VMULPS  Y8, Y6, Y6           // z²·η
	VMULPS  Y9, Y7, Y7
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  g3loop
g3done:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ETA_RANGE_STORE
	VZEROUPPER
	RET

// func scaleFirstOrderAVX2(dst, z, eta *float32, n int, c float32)
// dst = z − z·(e·(1 − e)) with e = c·eta, in float32.
TEXT ·scaleFirstOrderAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS c+32(FP), Y15
	VBROADCASTSS gone32<>(SB), Y14
	SHRQ $3, CX
	JZ   sfdone
sfloop:
	VMULPS  (DX), Y15, Y0        // e = c·η
	FIRST_ORDER_STORE
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  sfloop
sfdone:
	VZEROUPPER
	RET

// func scaleRhoAVX2(dst, z, eta *float32, n int, rho, lam float64)
// dst = z·(ρ/(ρ + λ·eta)) in float64.
TEXT ·scaleRhoAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSD rho+32(FP), Y15
	VBROADCASTSD lam+40(FP), Y14
	SHRQ $3, CX
	JZ   srdone
srloop:
	VCVTPS2PD  (DX), Y0
	VCVTPS2PD  16(DX), Y4
	VMULPD     Y14, Y0, Y0       // λ·η
	VMULPD     Y14, Y4, Y4
	VADDPD     Y15, Y0, Y0       // ρ + λ·η
	VADDPD     Y15, Y4, Y4
	VDIVPD     Y0, Y15, Y0       // ρ/(ρ + λ·η)
	VDIVPD     Y4, Y15, Y4
	VCVTPS2PD  (SI), Y2
	VCVTPS2PD  16(SI), Y6
	VMULPD     Y0, Y2, Y2
	VMULPD     Y4, Y6, Y6
	VCVTPD2PSY Y2, X2
	VCVTPD2PSY Y6, X6
	VMOVUPS    X2, (DI)
	VMOVUPS    X6, 16(DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  srloop
srdone:
	VZEROUPPER
	RET

// func accumSums32AVX2(z, eta, a2, ae, lo, hi *float32, n int)
// a2 += z², ae += z²·eta, lo = min(lo, eta), hi = max(hi, eta), element by
// element, in float32.
TEXT ·accumSums32AVX2(SB), NOSPLIT, $0-56
	MOVQ z+0(FP), SI
	MOVQ eta+8(FP), DX
	MOVQ a2+16(FP), DI
	MOVQ ae+24(FP), R8
	MOVQ lo+32(FP), R9
	MOVQ hi+40(FP), R10
	MOVQ n+48(FP), CX
	SHRQ $3, CX
	JZ   acdone
acloop:
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	VMULPS  Y0, Y0, Y0           // z²
	VADDPS  (DI), Y0, Y2
	VMOVUPS Y2, (DI)
	VMULPS  Y1, Y0, Y0           // z²·η
	VADDPS  (R8), Y0, Y0
	VMOVUPS Y0, (R8)
	VMINPS  (R9), Y1, Y3         // min(η, lo): η is never NaN
	VMOVUPS Y3, (R9)
	VMAXPS  (R10), Y1, Y4
	VMOVUPS Y4, (R10)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  acloop
acdone:
	VZEROUPPER
	RET

// func scaleFirstOrderVecAVX2(dst, z, eta, c *float32, n int)
// dst = z − z·(e·(1 − e)) with e = c·eta, in float32.
TEXT ·scaleFirstOrderVecAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ c+24(FP), R8
	MOVQ n+32(FP), CX
	VBROADCASTSS gone32<>(SB), Y14
	SHRQ $3, CX
	JZ   svdone
svloop:
	VMOVUPS (R8), Y0
	VMULPS  (DX), Y0, Y0         // e = c·η
	FIRST_ORDER_STORE
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  svloop
svdone:
	VZEROUPPER
	RET
