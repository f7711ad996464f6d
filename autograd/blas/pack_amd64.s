//go:build !purego

#include "textflag.h"

// iota32<> holds the int32 values 0, 1, ..., 31.
DATA iota32<>+0(SB)/4, $0
DATA iota32<>+4(SB)/4, $1
DATA iota32<>+8(SB)/4, $2
DATA iota32<>+12(SB)/4, $3
DATA iota32<>+16(SB)/4, $4
DATA iota32<>+20(SB)/4, $5
DATA iota32<>+24(SB)/4, $6
DATA iota32<>+28(SB)/4, $7
DATA iota32<>+32(SB)/4, $8
DATA iota32<>+36(SB)/4, $9
DATA iota32<>+40(SB)/4, $10
DATA iota32<>+44(SB)/4, $11
DATA iota32<>+48(SB)/4, $12
DATA iota32<>+52(SB)/4, $13
DATA iota32<>+56(SB)/4, $14
DATA iota32<>+60(SB)/4, $15
DATA iota32<>+64(SB)/4, $16
DATA iota32<>+68(SB)/4, $17
DATA iota32<>+72(SB)/4, $18
DATA iota32<>+76(SB)/4, $19
DATA iota32<>+80(SB)/4, $20
DATA iota32<>+84(SB)/4, $21
DATA iota32<>+88(SB)/4, $22
DATA iota32<>+92(SB)/4, $23
DATA iota32<>+96(SB)/4, $24
DATA iota32<>+100(SB)/4, $25
DATA iota32<>+104(SB)/4, $26
DATA iota32<>+108(SB)/4, $27
DATA iota32<>+112(SB)/4, $28
DATA iota32<>+116(SB)/4, $29
DATA iota32<>+120(SB)/4, $30
DATA iota32<>+124(SB)/4, $31
GLOBL iota32<>(SB), RODATA|NOPTR, $128

// func packGatherAVX512(dst, src *float32, ld, kcb, width int, gmask, smask uint32)
//
// For p < kcb and r < 32: dst[p*width+r] = src[r*ld+p] where bit r of gmask
// is set, 0 where it is clear; only lanes whose bit in smask is set are
// stored.
TEXT ·packGatherAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), AX
	MOVQ kcb+24(FP), CX
	MOVQ width+32(FP), R8
	SHLQ $2, R8
	MOVL gmask+40(FP), R9
	MOVL R9, R10
	SHRL $16, R10
	ANDL $0xffff, R9
	MOVL smask+44(FP), R11
	KMOVW R11, K3
	SHRL $16, R11
	KMOVW R11, K4
	VPBROADCASTD AX, Z2
	VPMULLD iota32<>+0(SB), Z2, Z0
	VPMULLD iota32<>+64(SB), Z2, Z1
	TESTL R10, R10
	JNZ gather2

gather1:
	KMOVW R9, K1
	VPXORD Z3, Z3, Z3
	VGATHERDPS (SI)(Z0*4), K1, Z3
	VMOVUPS Z3, K3, (DI)
	VPXORD Z4, Z4, Z4
	VMOVUPS Z4, K4, 64(DI)
	ADDQ $4, SI
	ADDQ R8, DI
	DECQ CX
	JNZ gather1
	VZEROUPPER
	RET

gather2:
	KMOVW R9, K1
	KMOVW R10, K2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VGATHERDPS (SI)(Z0*4), K1, Z3
	VGATHERDPS (SI)(Z1*4), K2, Z4
	VMOVUPS Z3, K3, (DI)
	VMOVUPS Z4, K4, 64(DI)
	ADDQ $4, SI
	ADDQ R8, DI
	DECQ CX
	JNZ gather2
	VZEROUPPER
	RET

// func packCopyAVX512(dst, src *float32, ld, kcb, np, w int, mask uint32)
//
// For p < kcb, t < np and c < w (the bits of mask, w <= 32):
// dst[(t*kcb+p)*w+c] = src[p*ld+t*w+c]. Each row of src is read once,
// from left to right.
TEXT ·packCopyAVX512(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), AX
	SHLQ $2, AX
	MOVQ kcb+24(FP), CX
	MOVQ np+32(FP), DX
	MOVQ w+40(FP), R8
	SHLQ $2, R8
	MOVL mask+48(FP), R9
	KMOVW R9, K1
	SHRL $16, R9
	KMOVW R9, K2
	MOVQ CX, R10
	IMULQ R8, R10

prow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ DX, R13

pcol:
	VMOVUPS.Z (R11), K1, Z0
	VMOVUPS.Z 64(R11), K2, Z1
	VMOVUPS Z0, K1, (R12)
	VMOVUPS Z1, K2, 64(R12)
	ADDQ R8, R11
	ADDQ R10, R12
	DECQ R13
	JNZ pcol
	ADDQ AX, SI
	ADDQ R8, DI
	DECQ CX
	JNZ prow
	VZEROUPPER
	RET
