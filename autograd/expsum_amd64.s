//go:build !purego

#include "textflag.h"

// func expBlocksAVX2(dst, row *float32, n int, m float32, s *[4]float64)
//
// Four elements per iteration, each as exp32(row[j] − m) computes it in
// float64 (clamp, k and r, 2**(k/32) from expTable and the exponent bits,
// the cubic), rounded to float32, stored to dst unless it is nil and added
// to lane j mod 4 of s.
TEXT ·expBlocksAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         row+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS m+24(FP), X15
	MOVQ         s+32(FP), DX
	LEAQ         ·expK(SB), R9
	LEAQ         ·expTable(SB), R8
	VBROADCASTSD 0(R9), Y14      // expN/ln 2
	VBROADCASTSD 8(R9), Y13      // expShift
	VBROADCASTSD 16(R9), Y12     // expC0
	VBROADCASTSD 24(R9), Y11     // expC1
	VBROADCASTSD 32(R9), Y10     // expC2
	VBROADCASTSD 40(R9), Y9      // 1
	VBROADCASTSD 48(R9), Y8      // −150
	VBROADCASTSD 56(R9), Y7      // 89
	VPBROADCASTQ 64(R9), Y6      // expN−1, the table index mask
	VMOVUPD      (DX), Y0

loop:
	VMOVUPS    (SI), X1
	VSUBPS     X15, X1, X1       // x = row[j] − m in float32
	VCVTPS2PD  X1, Y1
	VMAXPD     Y1, Y8, Y1        // max(−150, x), NaN passes
	VMINPD     Y1, Y7, Y1        // min(89, x), NaN passes
	VMULPD     Y14, Y1, Y2       // z
	VADDPD     Y13, Y2, Y3       // kd = z + expShift; ki its bits
	VSUBPD     Y13, Y3, Y4
	VSUBPD     Y4, Y2, Y4        // r = z − (kd − expShift)
	VPAND      Y6, Y3, Y5        // ki mod expN
	VPCMPEQQ   Y1, Y1, Y1
	VPGATHERQQ Y1, (R8)(Y5*8), Y2
	VPSLLQ     $47, Y3, Y3
	VPADDQ     Y3, Y2, Y2        // s = 2**(k/expN)
	VMULPD     Y12, Y4, Y5
	VADDPD     Y11, Y5, Y5       // expC0·r + expC1
	VMULPD     Y4, Y4, Y3
	VMULPD     Y3, Y5, Y5        // ·r²
	VMULPD     Y10, Y4, Y3
	VADDPD     Y9, Y3, Y3        // expC2·r + 1
	VADDPD     Y3, Y5, Y5
	VMULPD     Y2, Y5, Y5
	VCVTPD2PSY Y5, X5            // e, rounded to float32
	TESTQ      DI, DI
	JZ         sum
	VMOVUPS    X5, (DI)
	ADDQ       $16, DI

sum:
	VCVTPS2PD X5, Y5
	VADDPD    Y5, Y0, Y0
	ADDQ      $16, SI
	SUBQ      $4, CX
	JNZ       loop
	VMOVUPD   Y0, (DX)
	VZEROUPPER
	RET
