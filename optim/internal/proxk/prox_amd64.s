//go:build !purego

#include "textflag.h"

// AVX2 kernels for the float32 fast paths of the proximal maps. They use
// no fused multiply-add, so every lane computes exactly what the Go loops
// in lqmath.go and regularizer.go compute, bit for bit; lanes that need the
// float64 path get z[i] itself (so they are unchanged when dst aliases z)
// and are reported in mask (bit j of byte b stands for element 8b+j). A
// blend and a plain store replace VMASKMOVPS, which is microcoded and
// several times slower on AMD CPUs.

DATA cabs<>+0(SB)/4, $0x7fffffff
DATA cabs<>+4(SB)/4, $0x7fffffff
DATA cabs<>+8(SB)/4, $0x7fffffff
DATA cabs<>+12(SB)/4, $0x7fffffff
DATA cabs<>+16(SB)/4, $0x7fffffff
DATA cabs<>+20(SB)/4, $0x7fffffff
DATA cabs<>+24(SB)/4, $0x7fffffff
DATA cabs<>+28(SB)/4, $0x7fffffff
GLOBL cabs<>(SB), RODATA|NOPTR, $32

DATA clo12<>+0(SB)/4, $0x2b8cbccc
DATA clo12<>+4(SB)/4, $0x2b8cbccc
DATA clo12<>+8(SB)/4, $0x2b8cbccc
DATA clo12<>+12(SB)/4, $0x2b8cbccc
DATA clo12<>+16(SB)/4, $0x2b8cbccc
DATA clo12<>+20(SB)/4, $0x2b8cbccc
DATA clo12<>+24(SB)/4, $0x2b8cbccc
DATA clo12<>+28(SB)/4, $0x2b8cbccc
GLOBL clo12<>(SB), RODATA|NOPTR, $32

DATA chi12<>+0(SB)/4, $0x5368d4a5
DATA chi12<>+4(SB)/4, $0x5368d4a5
DATA chi12<>+8(SB)/4, $0x5368d4a5
DATA chi12<>+12(SB)/4, $0x5368d4a5
DATA chi12<>+16(SB)/4, $0x5368d4a5
DATA chi12<>+20(SB)/4, $0x5368d4a5
DATA chi12<>+24(SB)/4, $0x5368d4a5
DATA chi12<>+28(SB)/4, $0x5368d4a5
GLOBL chi12<>(SB), RODATA|NOPTR, $32

DATA clo30<>+0(SB)/4, $0x0da24260
DATA clo30<>+4(SB)/4, $0x0da24260
DATA clo30<>+8(SB)/4, $0x0da24260
DATA clo30<>+12(SB)/4, $0x0da24260
DATA clo30<>+16(SB)/4, $0x0da24260
DATA clo30<>+20(SB)/4, $0x0da24260
DATA clo30<>+24(SB)/4, $0x0da24260
DATA clo30<>+28(SB)/4, $0x0da24260
GLOBL clo30<>(SB), RODATA|NOPTR, $32

DATA chi30<>+0(SB)/4, $0x7149f2ca
DATA chi30<>+4(SB)/4, $0x7149f2ca
DATA chi30<>+8(SB)/4, $0x7149f2ca
DATA chi30<>+12(SB)/4, $0x7149f2ca
DATA chi30<>+16(SB)/4, $0x7149f2ca
DATA chi30<>+20(SB)/4, $0x7149f2ca
DATA chi30<>+24(SB)/4, $0x7149f2ca
DATA chi30<>+28(SB)/4, $0x7149f2ca
GLOBL chi30<>(SB), RODATA|NOPTR, $32

DATA cfour<>+0(SB)/4, $0x40800000
DATA cfour<>+4(SB)/4, $0x40800000
DATA cfour<>+8(SB)/4, $0x40800000
DATA cfour<>+12(SB)/4, $0x40800000
DATA cfour<>+16(SB)/4, $0x40800000
DATA cfour<>+20(SB)/4, $0x40800000
DATA cfour<>+24(SB)/4, $0x40800000
DATA cfour<>+28(SB)/4, $0x40800000
GLOBL cfour<>(SB), RODATA|NOPTR, $32

DATA cone<>+0(SB)/4, $0x3f800000
DATA cone<>+4(SB)/4, $0x3f800000
DATA cone<>+8(SB)/4, $0x3f800000
DATA cone<>+12(SB)/4, $0x3f800000
DATA cone<>+16(SB)/4, $0x3f800000
DATA cone<>+20(SB)/4, $0x3f800000
DATA cone<>+24(SB)/4, $0x3f800000
DATA cone<>+28(SB)/4, $0x3f800000
GLOBL cone<>(SB), RODATA|NOPTR, $32

DATA ccut12<>+0(SB)/4, $0x3e8b5951
DATA ccut12<>+4(SB)/4, $0x3e8b5951
DATA ccut12<>+8(SB)/4, $0x3e8b5951
DATA ccut12<>+12(SB)/4, $0x3e8b5951
DATA ccut12<>+16(SB)/4, $0x3e8b5951
DATA ccut12<>+20(SB)/4, $0x3e8b5951
DATA ccut12<>+24(SB)/4, $0x3e8b5951
DATA ccut12<>+28(SB)/4, $0x3e8b5951
GLOBL ccut12<>(SB), RODATA|NOPTR, $32

DATA clo18<>+0(SB)/4, $0x219392ef
DATA clo18<>+4(SB)/4, $0x219392ef
DATA clo18<>+8(SB)/4, $0x219392ef
DATA clo18<>+12(SB)/4, $0x219392ef
DATA clo18<>+16(SB)/4, $0x219392ef
DATA clo18<>+20(SB)/4, $0x219392ef
DATA clo18<>+24(SB)/4, $0x219392ef
DATA clo18<>+28(SB)/4, $0x219392ef
GLOBL clo18<>(SB), RODATA|NOPTR, $32

DATA chi18<>+0(SB)/4, $0x5d5e0b6b
DATA chi18<>+4(SB)/4, $0x5d5e0b6b
DATA chi18<>+8(SB)/4, $0x5d5e0b6b
DATA chi18<>+12(SB)/4, $0x5d5e0b6b
DATA chi18<>+16(SB)/4, $0x5d5e0b6b
DATA chi18<>+20(SB)/4, $0x5d5e0b6b
DATA chi18<>+24(SB)/4, $0x5d5e0b6b
DATA chi18<>+28(SB)/4, $0x5d5e0b6b
GLOBL chi18<>(SB), RODATA|NOPTR, $32

DATA clo35<>+0(SB)/4, $0x0554ad2e
DATA clo35<>+4(SB)/4, $0x0554ad2e
DATA clo35<>+8(SB)/4, $0x0554ad2e
DATA clo35<>+12(SB)/4, $0x0554ad2e
DATA clo35<>+16(SB)/4, $0x0554ad2e
DATA clo35<>+20(SB)/4, $0x0554ad2e
DATA clo35<>+24(SB)/4, $0x0554ad2e
DATA clo35<>+28(SB)/4, $0x0554ad2e
GLOBL clo35<>(SB), RODATA|NOPTR, $32

DATA chi35<>+0(SB)/4, $0x799a130c
DATA chi35<>+4(SB)/4, $0x799a130c
DATA chi35<>+8(SB)/4, $0x799a130c
DATA chi35<>+12(SB)/4, $0x799a130c
DATA chi35<>+16(SB)/4, $0x799a130c
DATA chi35<>+20(SB)/4, $0x799a130c
DATA chi35<>+24(SB)/4, $0x799a130c
DATA chi35<>+28(SB)/4, $0x799a130c
GLOBL chi35<>(SB), RODATA|NOPTR, $32

// func proxL1AVX2(dst, z, eta *float32, n int, l float32)
// dst[i] = copysign(max(|z[i]| − l·eta[i], 0), z[i]) for n a multiple of 8.
TEXT ·proxL1AVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS l+32(FP), Y14
	VMOVUPS cabs<>(SB), Y15
	VXORPS Y13, Y13, Y13
	SHRQ $3, CX
	JZ   l1done
l1loop:
	VMOVUPS (SI), Y0
	VANDPS  Y15, Y0, Y1          // t = |z|
	VANDNPS Y0, Y15, Y2          // sign bits of z
	VMULPS  (DX), Y14, Y3        // thr = l·eta
	VSUBPS  Y3, Y1, Y1           // t − thr
	VMAXPS  Y13, Y1, Y1          // max(t − thr, 0)
	VORPS   Y2, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JNZ  l1loop
l1done:
	VZEROUPPER
	RET

// func proxL0AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8) (slow int)
// Keeps z where z² > l2·eta, for 1e-18 < |z| < 1e18 and 1e-35 < l2·eta < 1e35;
// elsewhere it leaves z and sets the lane's bit in mask. slow is the OR of
// the mask bytes.
TEXT ·proxL0AVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS l2+32(FP), Y14
	MOVQ mask+40(FP), R8
	VMOVUPS cabs<>(SB), Y15
	XORL BX, BX
	SHRQ $3, CX
	JZ   l0done
l0loop:
	VMOVUPS (SI), Y0
	VANDPS  Y15, Y0, Y1          // t
	VMULPS  (DX), Y14, Y2        // k = l2·eta
	VCMPPS  $0x1e, clo18<>(SB), Y1, Y3
	VCMPPS  $0x11, chi18<>(SB), Y1, Y4
	VANDPS  Y4, Y3, Y3
	VCMPPS  $0x1e, clo35<>(SB), Y2, Y4
	VANDPS  Y4, Y3, Y3
	VCMPPS  $0x11, chi35<>(SB), Y2, Y4
	VANDPS  Y4, Y3, Y3           // fast lanes
	VMULPS  Y0, Y0, Y5           // z²
	VCMPPS  $0x1e, Y2, Y5, Y6    // z² > k
	VANDPS  Y0, Y6, Y6           // z or +0
	VBLENDVPS Y3, Y6, Y0, Y6     // z itself in the slow lanes
	VMOVUPS Y6, (DI)
	VMOVMSKPS Y3, AX
	XORL $0xff, AX
	MOVB AX, (R8)
	ORL  AX, BX
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	INCQ R8
	DECQ CX
	JNZ  l0loop
l0done:
	MOVQ BX, slow+48(FP)
	VZEROUPPER
	RET

// The ℓ1/2 kernels evaluate the float32 fast path of proxL12Loop in two
// passes over a block, as the Go loop does per element: l12SAVX2 (or
// adamL12SAVX2, after the Adam update) computes s = k/((4t)·sqrt(t)) with
// k = l2·eta and t = |z| for the guarded lanes and NaN (all ones) for the
// others; l12XAVX2 then gives 0 where s is above the threshold,
// x = t − t·(s·(1 + s·h(s))) with the sign of z elsewhere, h = P/Q the
// rational function of l12Rat, and z itself in the NaN lanes, which it
// reports in mask. Two loops rather than one: the square root and
// division of the first and the multiplications of the second then each
// keep their execution units busy, while one loop with both (a chain of
// over 60 cycles per block) left most units idle.

// L12S leaves in r4 s for the guarded lanes and NaN elsewhere, for z in r0
// and k in r2; it uses r1, r3, r5 and Y15 (the |·| mask).
#define L12S(r0, r1, r2, r3, r4, r5) \
	VANDPS  Y15, r0, r1; \
	VCMPPS  $0x1a, clo12<>(SB), r1, r3; \
	VCMPPS  $0x15, chi12<>(SB), r1, r4; \
	VORPS   r4, r3, r3; \
	VCMPPS  $0x1a, clo30<>(SB), r2, r4; \
	VORPS   r4, r3, r3; \
	VCMPPS  $0x15, chi30<>(SB), r2, r4; \
	VORPS   r4, r3, r3; \
	VSQRTPS r1, r4; \
	VMULPS  cfour<>(SB), r1, r5; \
	VMULPS  r4, r5, r5; \
	VDIVPS  r5, r2, r4; \
	VORPS   r3, r4, r4

// func l12SAVX2(s, z, eta *float32, n int, l2 float32)
// s = the ℓ1/2 kernels' s for n a multiple of 8.
TEXT ·l12SAVX2(SB), NOSPLIT, $0-36
	MOVQ s+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ eta+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS l2+32(FP), Y14
	VMOVUPS cabs<>(SB), Y15
	SHRQ $3, CX
	JZ   l12sdone
l12sloop:
	VMOVUPS (SI), Y0
	VMULPS  (DX), Y14, Y2
	L12S(Y0, Y1, Y2, Y3, Y4, Y5)
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JNZ  l12sloop
l12sdone:
	VZEROUPPER
	RET

// func l12XAVX2(dst, z, s *float32, n int, mask *uint8, rat *[7]float32) (slow int)
// dst = the ℓ1/2 prox of z from s for n a multiple of 8, with z itself in
// the NaN lanes of s, marked in mask (dst may alias z); slow is the OR of
// the mask bytes. rat points at l12Rat.
TEXT ·L12XAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ s+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ mask+32(FP), R8
	MOVQ rat+40(FP), R9
	VMOVUPS cone<>(SB), Y14
	VBROADCASTSS 0(R9), Y7       // p0
	VBROADCASTSS 4(R9), Y8       // p1
	VBROADCASTSS 8(R9), Y9       // p2
	VBROADCASTSS 12(R9), Y10     // p3
	VBROADCASTSS 16(R9), Y11     // q1
	VBROADCASTSS 20(R9), Y12     // q2
	VBROADCASTSS 24(R9), Y13     // q3
	XORL BX, BX
	SHRQ $3, CX
	JZ   l12xdone
l12xloop:
	VMOVUPS (DX), Y3             // s
	VMULPS  Y3, Y3, Y2           // s²
	VMULPS  Y8, Y3, Y4
	VADDPS  Y7, Y4, Y4           // p0 + p1·s
	VMULPS  Y10, Y3, Y5
	VADDPS  Y9, Y5, Y5           // p2 + p3·s
	VMULPS  Y2, Y5, Y5
	VADDPS  Y5, Y4, Y4           // P
	VMULPS  Y11, Y3, Y5
	VADDPS  Y14, Y5, Y5          // 1 + q1·s
	VMULPS  Y13, Y3, Y6
	VADDPS  Y12, Y6, Y6          // q2 + q3·s
	VMULPS  Y2, Y6, Y6
	VADDPS  Y6, Y5, Y5           // Q
	VDIVPS  Y5, Y4, Y4           // h = P/Q
	VMULPS  Y3, Y4, Y4
	VADDPS  Y14, Y4, Y4          // 1 + s·h
	VMULPS  Y3, Y4, Y4           // w = s·(1 + s·h)
	VMOVUPS (SI), Y0             // z
	VMULPS  Y4, Y0, Y4           // z·w
	VSUBPS  Y4, Y0, Y4           // z − z·w
	VCMPPS  $0x1e, ccut12<>(SB), Y3, Y5
	VANDNPS Y4, Y5, Y4           // 0 above the threshold
	VCMPPS  $3, Y3, Y3, Y5       // NaN lanes
	VBLENDVPS Y5, Y0, Y4, Y4     // z itself there
	VMOVUPS Y4, (DI)
	VMOVMSKPS Y5, AX
	MOVB AX, (R8)
	ORL  AX, BX
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	INCQ R8
	DECQ CX
	JNZ  l12xloop
l12xdone:
	MOVQ BX, slow+48(FP)
	VZEROUPPER
	RET

// Adam update of 8 lanes, as adamEMA's Go loops compute it (the same
// operations in the same order, no fused multiply-add): R11 points at the
// scalars β, 1−β, ρ, 1−ρ, 1/sqrt(1−β^t), δ, lrm, decay, α, each repeated
// 8 times (offsets 0, 32, ..., 256), and SI, DX, BX, DI at g, m, v, θ.
// ADAM_D stores v and m and leaves m in Y3 and d = sqrt(v)·isbc + δ in Y2;
// ADAM_ETA then leaves θ·decay − lrm·(m·(1/d)) in Y0 and α·(1/d) in Y4.
#define ADAM_D \
	VMOVUPS (SI), Y0; \
	VMULPS  32(R11), Y0, Y1; \
	VMULPS  Y0, Y1, Y1; \
	VMOVUPS (BX), Y2; \
	VMULPS  0(R11), Y2, Y2; \
	VADDPS  Y1, Y2, Y2; \
	VMOVUPS Y2, (BX); \
	VMOVUPS (DX), Y3; \
	VMULPS  64(R11), Y3, Y3; \
	VMULPS  96(R11), Y0, Y4; \
	VADDPS  Y4, Y3, Y3; \
	VMOVUPS Y3, (DX); \
	VSQRTPS Y2, Y2; \
	VMULPS  128(R11), Y2, Y2; \
	VADDPS  160(R11), Y2, Y2

#define ADAM_ETA \
	VDIVPS  Y2, Y13, Y4; \
	VMULPS  Y4, Y3, Y5; \
	VMULPS  192(R11), Y5, Y5; \
	VMOVUPS (DI), Y0; \
	VMULPS  224(R11), Y0, Y0; \
	VSUBPS  Y5, Y0, Y0; \
	VMULPS  256(R11), Y4, Y4

// func adamAVX2(th, grad, m, v *float32, n int, c *float32)
// θ ← θ·decay − lrm·(m/d) for n elements, n a multiple of 8.
TEXT ·AdamAVX2(SB), NOSPLIT, $0-48
	MOVQ th+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), R11
	SHRQ $3, CX
	JZ   adone
aloop:
	ADAM_D
	VDIVPS  Y2, Y3, Y5           // m/d
	VMULPS  192(R11), Y5, Y5     // lrm·(m/d)
	VMOVUPS (DI), Y0
	VMULPS  224(R11), Y0, Y0     // θ·decay
	VSUBPS  Y5, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	DECQ CX
	JNZ  aloop
adone:
	VZEROUPPER
	RET

// func adamEtaAVX2(th, grad, m, v, eta *float32, n int, c *float32)
// θ ← θ·decay − lrm·(m·(1/d)) and eta = α·(1/d) for n elements, n a
// multiple of 8.
TEXT ·AdamEtaAVX2(SB), NOSPLIT, $0-56
	MOVQ th+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), BX
	MOVQ eta+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ c+48(FP), R11
	VMOVUPS cone<>(SB), Y13
	SHRQ $3, CX
	JZ   aedone
aeloop:
	ADAM_D
	ADAM_ETA
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, (R10)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R10
	DECQ CX
	JNZ  aeloop
aedone:
	VZEROUPPER
	RET

// func adamL12SAVX2(th, grad, m, v, eta, s *float32, n int, c *float32, l2 float32)
// adamEtaAVX2 followed by l12SAVX2(s, th, eta, ...) in one pass over n
// elements, n a multiple of 8.
TEXT ·AdamL12SAVX2(SB), NOSPLIT, $0-68
	MOVQ th+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), BX
	MOVQ eta+32(FP), R10
	MOVQ s+40(FP), R12
	MOVQ n+48(FP), CX
	MOVQ c+56(FP), R11
	VBROADCASTSS l2+64(FP), Y14
	VMOVUPS cabs<>(SB), Y15
	VMOVUPS cone<>(SB), Y13
	SHRQ $3, CX
	JZ   asdone
asloop:
	ADAM_D
	ADAM_ETA
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, (R10)
	VMULPS  Y4, Y14, Y2          // k
	L12S(Y0, Y1, Y2, Y3, Y4, Y5)
	VMOVUPS Y4, (R12)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R10
	ADDQ $32, R12
	DECQ CX
	JNZ  asloop
asdone:
	VZEROUPPER
	RET
