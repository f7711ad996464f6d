//go:build !purego

#include "textflag.h"

// AVX2 kernel of SparseRows (package kernels). Every term is one fused
// multiply-add (FMA3), rounded once, as the Go loop in spmm.go computes it.
//
// Registers: DI dst (the row's), CX n·4 (bytes), SI terms, R8 the
// row's end term, R9 b, R10 column position in bytes, R11 term index t
// (from BX, the row's first), R12 b + R10,
// R13 address of the dense row of term t, R14 init (or 0), Y15 the
// broadcast value.

// TERM adds the product of the value in Y15 and the 8 floats at disp(R13)
// to acc (tmp unused).
#define TERM(disp, acc, tmp) \
	VFMADD231PS disp(R13), Y15, acc

// NEXT loads term t's record (CSR.terms: the value's bits low, the
// offset high) into R13, broadcasts the value into Y15 from the register
// and leaves the address of its dense row at the current columns in R13:
// one load a term beside the loads of b (the value's broadcast load and
// the offset's load before).
#define NEXT \
	MOVQ         (SI)(R11*8), R13; \
	VMOVD        R13, X15; \
	VPBROADCASTD X15, Y15; \
	SHRQ         $32, R13; \
	LEAQ         (R12)(R13*4), R13

// START1 broadcasts *init into Y0 when R14 is not nil; otherwise it jumps
// to label, where the block loads its accumulators from dst.
#define START1(label) \
	TESTQ        R14, R14; \
	JZ           label; \
	VBROADCASTSS (R14), Y0

// func rowsAVX2(dst *float32, ldd int, n int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32)
//
// Row r (of rows) adds the terms rowPtr[r] to rowPtr[r+1] to its n
// columns at dst + r·ldd, from init[r] when init is not nil (R14 walks
// init); 0(SP) holds the current row's pointer, 8(SP) the rows left, BX
// the row's first term.
TEXT ·rowsAVX2(SB), NOSPLIT, $16-64
	MOVQ  dst+0(FP), DI
	MOVQ  n+16(FP), CX
	MOVQ  terms+32(FP), SI
	MOVQ  b+48(FP), R9
	MOVQ  init+56(FP), R14
	SHLQ  $2, CX
	MOVQ  rowPtr+24(FP), AX
	MOVQ  AX, 0(SP)
	MOVQ  rows+40(FP), AX
	MOVQ  AX, 8(SP)
	TESTQ AX, AX
	JZ    done

row:
	MOVQ    0(SP), AX
	MOVLQSX (AX), BX
	MOVLQSX 4(AX), R8
	XORQ    R10, R10

block64:
	MOVQ    CX, AX
	SUBQ    R10, AX
	CMPQ    AX, $256
	JLT     block32
	START1(load64)
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y0, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y0, Y7
	JMP     start64

load64:
	VMOVUPS (DI)(R10*1), Y0
	VMOVUPS 32(DI)(R10*1), Y1
	VMOVUPS 64(DI)(R10*1), Y2
	VMOVUPS 96(DI)(R10*1), Y3
	VMOVUPS 128(DI)(R10*1), Y4
	VMOVUPS 160(DI)(R10*1), Y5
	VMOVUPS 192(DI)(R10*1), Y6
	VMOVUPS 224(DI)(R10*1), Y7

start64:
	LEAQ    (R9)(R10*1), R12
	MOVQ    BX, R11
	CMPQ    R11, R8
	JGE     store64

terms64:
	NEXT
	TERM(0, Y0, Y8)
	TERM(32, Y1, Y9)
	TERM(64, Y2, Y10)
	TERM(96, Y3, Y11)
	TERM(128, Y4, Y12)
	TERM(160, Y5, Y13)
	TERM(192, Y6, Y14)
	TERM(224, Y7, Y8)
	INCQ R11
	CMPQ R11, R8
	JLT  terms64

store64:
	VMOVUPS Y0, (DI)(R10*1)
	VMOVUPS Y1, 32(DI)(R10*1)
	VMOVUPS Y2, 64(DI)(R10*1)
	VMOVUPS Y3, 96(DI)(R10*1)
	VMOVUPS Y4, 128(DI)(R10*1)
	VMOVUPS Y5, 160(DI)(R10*1)
	VMOVUPS Y6, 192(DI)(R10*1)
	VMOVUPS Y7, 224(DI)(R10*1)
	ADDQ    $256, R10
	JMP     block64

block32:
	MOVQ    CX, AX
	SUBQ    R10, AX
	CMPQ    AX, $128
	JLT     block8
	START1(load32)
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	JMP     start32

load32:
	VMOVUPS (DI)(R10*1), Y0
	VMOVUPS 32(DI)(R10*1), Y1
	VMOVUPS 64(DI)(R10*1), Y2
	VMOVUPS 96(DI)(R10*1), Y3

start32:
	LEAQ    (R9)(R10*1), R12
	MOVQ    BX, R11
	CMPQ    R11, R8
	JGE     store32

terms32:
	NEXT
	TERM(0, Y0, Y8)
	TERM(32, Y1, Y9)
	TERM(64, Y2, Y10)
	TERM(96, Y3, Y11)
	INCQ R11
	CMPQ R11, R8
	JLT  terms32

store32:
	VMOVUPS Y0, (DI)(R10*1)
	VMOVUPS Y1, 32(DI)(R10*1)
	VMOVUPS Y2, 64(DI)(R10*1)
	VMOVUPS Y3, 96(DI)(R10*1)
	ADDQ    $128, R10

block8:
	CMPQ    R10, CX
	JGE     rowdone
	START1(load8)
	JMP     start8

load8:
	VMOVUPS (DI)(R10*1), Y0

start8:
	LEAQ    (R9)(R10*1), R12
	MOVQ    BX, R11
	CMPQ    R11, R8
	JGE     store8

terms8:
	NEXT
	TERM(0, Y0, Y8)
	INCQ R11
	CMPQ R11, R8
	JLT  terms8

store8:
	VMOVUPS Y0, (DI)(R10*1)
	ADDQ    $32, R10
	JMP     block8

rowdone:
	MOVQ  ldd+8(FP), AX
	LEAQ  (DI)(AX*4), DI
	ADDQ  $4, 0(SP)
	TESTQ R14, R14
	JZ    nextrow
	ADDQ  $4, R14

nextrow:
	DECQ 8(SP)
	JNZ  row

done:
	VZEROUPPER
	RET
