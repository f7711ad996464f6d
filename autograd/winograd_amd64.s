//go:build !purego

#include "textflag.h"

// AVX2 kernels of the Winograd F(2×2, 3×3) data transforms (winograd.go).
// Only additions and subtractions, in the order of the Go loops, so every
// lane rounds exactly as they do. n is a positive multiple of 8.

// DEINTERLEAVE splits the 16 floats lo:hi into their even elements (into
// ev) and odd elements (into od), in order.
#define DEINTERLEAVE(lo, hi, ev, od) \
	VSHUFPS $0x88, hi, lo, ev; \
	VSHUFPS $0xDD, hi, lo, od; \
	VPERMPD $0xD8, ev, ev;     \
	VPERMPD $0xD8, od, od

// INTERLEAVE writes x0 y0 x1 y1 … x7 y7 into lo (first 8) and hi.
#define INTERLEAVE(x, y, lo, hi, t) \
	VUNPCKLPS  y, x, t;      \
	VUNPCKHPS  y, x, hi;     \
	VPERM2F128 $0x20, hi, t, lo; \
	VPERM2F128 $0x31, hi, t, hi

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

// func winoOutRowsAVX2(row, d0, d1, d2, d3 *float32, n int, accumulate int, half, adv int)
TEXT ·winoOutRowsAVX2(SB), NOSPLIT, $0-72
	MOVQ row+0(FP), DI
	MOVQ d0+8(FP), SI
	MOVQ d1+16(FP), R11
	MOVQ d2+24(FP), R12
	MOVQ d3+32(FP), R13
	MOVQ n+40(FP), CX
	MOVQ accumulate+48(FP), DX
	MOVQ half+56(FP), R8
	MOVQ adv+64(FP), R9
	SHLQ $2, R8
	SHLQ $2, R9
	XORQ AX, AX

outrows_loop:
	ATCOLS
	INTERLEAVE(Y4, Y5, Y6, Y7, Y8)
	TESTQ   DX, DX
	JZ      outrows_store
	VADDPS  (DI), Y6, Y6
	VADDPS  (DI)(R8*1), Y7, Y7

outrows_store:
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, (DI)(R8*1)
	ADDQ    R9, DI
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     outrows_loop
	VZEROUPPER
	RET
