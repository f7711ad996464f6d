//go:build ignore

// This program generates bf16_amd64.s, the AVX512_BF16 micro-kernel and
// packing routine of SgemmBF16. Run it with go generate.
//
// The Go assembler does not know the AVX512_BF16 instructions, so
// VDPBF16PS and VCVTNE2PS2BF16 are emitted as their EVEX encodings (BYTE
// directives), each preceded by a comment with the instruction in Go's
// operand order.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }

// evexRR returns the EVEX encoding of a 512-bit register-register
// instruction of map 0F38, prefix pp, opcode op: reg (the destination),
// vvvv (the first source) and rm (the second source), Z0-Z31.
func evexRR(pp, op byte, reg, vvvv, rm int) []byte {
	inv := func(x int) byte { return byte(^x & 1) }
	b1 := inv(reg>>3)<<7 | inv(rm>>4)<<6 | inv(rm>>3)<<5 | inv(reg>>4)<<4 | 0b0010
	b2 := byte(^vvvv&15)<<3 | 1<<2 | pp
	b3 := byte(0b10)<<5 | inv(vvvv>>4)<<3
	modrm := 0xC0 | byte(reg&7)<<3 | byte(rm&7)
	return []byte{0x62, b1, b2, b3, op, modrm}
}

// emit writes the encoding as BYTE directives after a comment naming it.
func emit(comment string, enc []byte) {
	p("\t// %s", comment)
	s := "\t"
	for i, b := range enc {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("BYTE $0x%02x", b)
	}
	p("%s", s)
}

// dpbf16 emits VDPBF16PS: Z[acc] += the pairwise dot products of Z[x] and
// Z[y] (F3 0F38 52).
func dpbf16(x, y, acc int) {
	emit(fmt.Sprintf("VDPBF16PS Z%d, Z%d, Z%d", x, y, acc), evexRR(0b10, 0x52, acc, y, x))
}

// cvt2 emits VCVTNE2PS2BF16: the words of Z[dst] are the bfloat16 values
// of Z[lo] (words 0-15) and Z[hi] (words 16-31) (F2 0F38 72).
func cvt2(lo, hi, dst int) {
	emit(fmt.Sprintf("VCVTNE2PS2BF16 Z%d, Z%d, Z%d", lo, hi, dst), evexRR(0b11, 0x72, dst, hi, lo))
}

const mr, nr = 8, 32

// kernel emits the micro-kernel name for vecs (1 or 2) vectors of 16
// columns per row: vecs 2 is the full 8×32 tile, vecs 1 the 8×16 tile for
// panels whose second half is padding (C with at most 16 columns there).
//
// With inplace set, B is read where it lies instead of from a packed
// panel: pair row q of the tile is the words at b[offs[q]:], offs being
// one more argument after mask (32-bit offsets); the loads are masked by
// the columns in mask.
//
// With arows set, the rows of A are read where they lie instead: row r of
// the tile is the bfloat16 values at byte offset 2·offs[r] from a (pairs
// of consecutive values, at any even byte address), offs being one more
// argument after mask.
func kernel(name string, vecs int, inplace, arows bool) {
	acc := func(r, v int) int { return r*vecs + v }
	rowAddr := []string{"(AX)", "(AX)(R8*1)", "(AX)(R8*2)", "(AX)(R9*1)", "(AX)(R8*4)", "(AX)(R10*1)", "(AX)(R9*2)", "(AX)(R11*1)"}
	if arows {
		p("// func %s(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)", name)
		p("TEXT ·%s(SB), NOSPLIT, $0-72", name)
		p("\tMOVQ kp+0(FP), CX")
		p("\tMOVQ a+8(FP), AX")
		p("\tMOVQ b+16(FP), BX")
		p("\tMOVQ offs+64(FP), DX")
		// Row pointers R8-R13, SI, DI; AX becomes the pair index.
		bases := []string{"R8", "R9", "R10", "R11", "R12", "R13", "SI", "DI"}
		for r, reg := range bases {
			p("\tMOVLQSX %d(DX), %s", 4*r, reg)
			p("\tLEAQ (AX)(%s*2), %s", reg, reg)
		}
		p("\tXORQ AX, AX")
		for r := range bases {
			rowAddr[r] = fmt.Sprintf("(%s)(AX*4)", bases[r])
		}
		for r := 0; r < vecs*mr; r++ {
			p("\tVPXORD Z%d, Z%d, Z%d", r, r, r)
		}
	} else if inplace {
		p("// func %s(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)", name)
		p("TEXT ·%s(SB), NOSPLIT, $0-72", name)
		p("\tMOVQ offs+64(FP), R12")
		p("\tMOVL mask+56(FP), R10")
		p("\tKMOVW R10, K1")
		p("\tSHRL $16, R10")
		p("\tKMOVW R10, K2")
	} else {
		p("// func %s(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32)", name)
		p("TEXT ·%s(SB), NOSPLIT, $0-60", name)
	}
	if !arows {
		p("\tMOVQ kp+0(FP), CX")
		p("\tMOVQ a+8(FP), AX")
		p("\tMOVQ b+16(FP), BX")
		// Row r of the A panel starts r·kp words after row 0: R8 = kp·4
		// bytes, R9 = 3·R8, R10 = 5·R8, R11 = 7·R8.
		p("\tLEAQ (CX*4), R8")
		p("\tLEAQ (R8)(R8*2), R9")
		p("\tLEAQ (R8)(R8*4), R10")
		p("\tLEAQ (R9)(R8*4), R11")
		for r := 0; r < vecs*mr; r++ {
			p("\tVPXORD Z%d, Z%d, Z%d", r, r, r)
		}
	}
	p("loop:")
	kmask := []string{"K1", "K2"}
	if inplace {
		p("\tMOVLQSX (R12), R13")
		p("\tADDQ $4, R12")
		for v := 0; v < vecs; v++ {
			p("\tVMOVDQU32.Z %d(BX)(R13*4), %s, Z%d", 64*v, kmask[v], 16+v)
		}
	} else {
		for v := 0; v < vecs; v++ {
			p("\tVMOVUPS %d(BX), Z%d", 64*v, 16+v)
		}
	}
	for r := 0; r < mr; r++ {
		p("\tVPBROADCASTD %s, Z%d", rowAddr[r], 18+r)
	}
	for r := 0; r < mr; r++ {
		for v := 0; v < vecs; v++ {
			dpbf16(16+v, 18+r, acc(r, v))
		}
	}
	if arows {
		p("\tINCQ AX")
	} else {
		p("\tADDQ $4, AX")
	}
	if !inplace {
		p("\tADDQ $%d, BX", 4*nr)
	}
	p("\tDECQ CX")
	p("\tJNZ loop")
	// C = alpha·acc + beta·C for the rows and the columns in mask.
	p("\tMOVQ c+24(FP), DX")
	p("\tMOVQ ldc+32(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ rows+48(FP), R9")
	p("\tMOVL mask+56(FP), R10")
	p("\tKMOVW R10, K1")
	p("\tSHRL $16, R10")
	p("\tKMOVW R10, K2")
	p("\tVBROADCASTSS alpha+40(FP), Z30")
	p("\tVBROADCASTSS beta+44(FP), Z31")
	p("\tVXORPS X29, X29, X29")
	p("\tVUCOMISS X29, X31")
	p("\tJNE accumulate")
	p("\tJPS accumulate")
	for r := 0; r < mr; r++ {
		for v := 0; v < vecs; v++ {
			p("\tVMULPS Z30, Z%d, Z%d", acc(r, v), acc(r, v))
			p("\tVMOVUPS Z%d, %s, %d(DX)", acc(r, v), kmask[v], 64*v)
		}
		if r < mr-1 {
			p("\tDECQ R9")
			p("\tJZ done")
			p("\tADDQ R8, DX")
		}
	}
	p("\tJMP done")
	p("accumulate:")
	for r := 0; r < mr; r++ {
		for v := 0; v < vecs; v++ {
			p("\tVMOVUPS.Z %d(DX), %s, Z%d", 64*v, kmask[v], 26+v)
			p("\tVMULPS Z30, Z%d, Z%d", acc(r, v), acc(r, v))
			p("\tVMULPS Z31, Z%d, Z%d", 26+v, 26+v)
			p("\tVADDPS Z%d, Z%d, Z%d", 26+v, acc(r, v), acc(r, v))
			p("\tVMOVUPS Z%d, %s, %d(DX)", acc(r, v), kmask[v], 64*v)
		}
		if r < mr-1 {
			p("\tDECQ R9")
			p("\tJZ done")
			p("\tADDQ R8, DX")
		}
	}
	p("done:")
	p("\tVZEROUPPER")
	p("\tRET")
	p("")
}

// pack emits the routine that packs pairs of rows of a row-major matrix:
// pair q of the kp pairs holds, for the columns of one group of 16, the
// word pairs (row 2q, row 2q+1); with odd set, one more pair holds row
// 2kp and zero.
func pack() {
	p("// func bf16PackPairsAVX512(dst *uint32, src *float32, ld, kp, odd, width, groups int, lmask, smask uint32)")
	p("TEXT ·bf16PackPairsAVX512(SB), NOSPLIT, $0-64")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ ld+16(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ width+40(FP), R11")
	p("\tSHLQ $2, R11")
	p("\tMOVQ groups+48(FP), R12")
	p("\tMOVL lmask+56(FP), R10")
	p("\tKMOVD R10, K3")
	p("\tMOVL smask+60(FP), R10")
	p("\tKMOVD R10, K4")
	p("\tVMOVDQU16 interleave16<>(SB), Z5")
	p("\tVPXORD Z6, Z6, Z6")
	// Group g covers the columns [16g, 16g+16); the masks of the group
	// are bits [16g, 16g+16) of lmask (loaded) and smask (stored).
	p("group:")
	p("\tMOVQ SI, AX")
	p("\tMOVQ DI, BX")
	p("\tMOVQ kp+24(FP), CX")
	p("\tTESTQ CX, CX")
	p("\tJZ tail")
	p("pair:")
	p("\tVMOVUPS.Z (AX), K3, Z0")
	p("\tVMOVUPS.Z (AX)(R8*1), K3, Z1")
	cvt2(0, 1, 2)
	p("\tVPERMW Z2, Z5, Z3")
	p("\tVMOVDQU32 Z3, K4, (BX)")
	p("\tLEAQ (AX)(R8*2), AX")
	p("\tADDQ R11, BX")
	p("\tDECQ CX")
	p("\tJNZ pair")
	p("tail:")
	p("\tCMPQ odd+32(FP), $0")
	p("\tJEQ next")
	p("\tVMOVUPS.Z (AX), K3, Z0")
	cvt2(0, 6, 2)
	p("\tVPERMW Z2, Z5, Z3")
	p("\tVMOVDQU32 Z3, K4, (BX)")
	p("next:")
	p("\tADDQ $64, SI")
	p("\tADDQ $64, DI")
	p("\tKSHIFTRD $16, K3, K3")
	p("\tKSHIFTRD $16, K4, K4")
	p("\tDECQ R12")
	p("\tJNZ group")
	p("\tVZEROUPPER")
	p("\tRET")
}

// panels emits the routine that packs np whole panels of 32 columns as
// pack does, walking each pair of rows once across all the panels.
func panels() {
	p("// func bf16PackPanelsAVX512(dst *uint32, src *float32, ld, kp, odd, np int)")
	p("TEXT ·bf16PackPanelsAVX512(SB), NOSPLIT, $0-48")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ ld+16(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ kp+24(FP), CX")
	p("\tMOVQ odd+32(FP), R11")
	p("\tADDQ CX, R11")
	p("\tSHLQ $7, R11") // bytes per panel: (kp+odd)·32 words
	p("\tVMOVDQU16 interleave16<>(SB), Z8")
	p("\tVPXORD Z2, Z2, Z2")
	p("\tVPXORD Z3, Z3, Z3")
	p("\tTESTQ CX, CX")
	p("\tJZ ptail")
	p("ppair:")
	p("\tMOVQ SI, AX")
	p("\tMOVQ DI, BX")
	p("\tMOVQ np+40(FP), R12")
	p("ppanel:")
	p("\tVMOVUPS (AX), Z0")
	p("\tVMOVUPS 64(AX), Z1")
	p("\tVMOVUPS (AX)(R8*1), Z2")
	p("\tVMOVUPS 64(AX)(R8*1), Z3")
	cvt2(0, 2, 4)
	cvt2(1, 3, 7)
	p("\tVPERMW Z4, Z8, Z4")
	p("\tVPERMW Z7, Z8, Z7")
	p("\tVMOVDQU32 Z4, (BX)")
	p("\tVMOVDQU32 Z7, 64(BX)")
	p("\tADDQ $128, AX")
	p("\tADDQ R11, BX")
	p("\tDECQ R12")
	p("\tJNZ ppanel")
	p("\tLEAQ (SI)(R8*2), SI")
	p("\tADDQ $128, DI")
	p("\tDECQ CX")
	p("\tJNZ ppair")
	p("\tVPXORD Z2, Z2, Z2")
	p("\tVPXORD Z3, Z3, Z3")
	p("ptail:")
	p("\tCMPQ odd+32(FP), $0")
	p("\tJEQ pdone")
	p("\tMOVQ np+40(FP), R12")
	p("ptpanel:")
	p("\tVMOVUPS (SI), Z0")
	p("\tVMOVUPS 64(SI), Z1")
	cvt2(0, 2, 4)
	cvt2(1, 3, 7)
	p("\tVPERMW Z4, Z8, Z4")
	p("\tVPERMW Z7, Z8, Z7")
	p("\tVMOVDQU32 Z4, (DI)")
	p("\tVMOVDQU32 Z7, 64(DI)")
	p("\tADDQ $128, SI")
	p("\tADDQ R11, DI")
	p("\tDECQ R12")
	p("\tJNZ ptpanel")
	p("pdone:")
	p("\tVZEROUPPER")
	p("\tRET")
}

// rows emits the routine that converts rows of a row-major matrix to
// bfloat16 in place order: row r's values 2q and 2q+1 become word pair q
// of dst row r (kp words apart), the value past an odd kcb zero.
func rows() {
	p("// func bf16PackRowsAVX512(dst *uint32, src *float32, ld, kp, rows, kcb int)")
	p("TEXT ·bf16PackRowsAVX512(SB), NOSPLIT, $0-48")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ ld+16(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ kp+24(FP), R11")
	p("\tSHLQ $2, R11")
	p("\tMOVQ rows+32(FP), R12")
	p("rrow:")
	p("\tMOVQ SI, AX")
	p("\tMOVQ DI, BX")
	p("\tMOVQ kcb+40(FP), CX")
	p("rchunk:")
	// 32 values (16 pairs) per step; the last step masks the loads by
	// the values left and the stores by the pairs left.
	p("\tCMPQ CX, $32")
	p("\tJLT rtail")
	p("\tVMOVUPS (AX), Z0")
	p("\tVMOVUPS 64(AX), Z1")
	cvt2(0, 1, 2)
	p("\tVMOVDQU32 Z2, (BX)")
	p("\tADDQ $128, AX")
	p("\tADDQ $64, BX")
	p("\tSUBQ $32, CX")
	p("\tJNZ rchunk")
	p("\tJMP rnext")
	p("rtail:")
	p("\tMOVQ $-1, DX")
	p("\tSHLXQ CX, DX, DX")
	p("\tNOTQ DX") // DX = 2^CX − 1: the values left
	p("\tKMOVQ DX, K1")
	p("\tKSHIFTRQ $16, K1, K2")
	p("\tVMOVUPS.Z (AX), K1, Z0")
	p("\tVMOVUPS.Z 64(AX), K2, Z1")
	cvt2(0, 1, 2)
	p("\tINCQ CX")
	p("\tSHRQ $1, CX") // the pairs left
	p("\tMOVQ $-1, DX")
	p("\tSHLXQ CX, DX, DX")
	p("\tNOTQ DX")
	p("\tKMOVW DX, K3")
	p("\tVMOVDQU32 Z2, K3, (BX)")
	p("rnext:")
	p("\tADDQ R8, SI")
	p("\tADDQ R11, DI")
	p("\tDECQ R12")
	p("\tJNZ rrow")
	p("\tVZEROUPPER")
	p("\tRET")
}

// planeRows emits the routine that interleaves two channels of an image
// into pairs row by row: for each of rows rows of w values, word j of
// destination row r is the pair of src[r*sstride+j] and
// src[ld+r*sstride+j] (zero with single set), destination rows dstride
// words apart.
func planeRows() {
	p("// func bf16PlaneRowsAVX512(dst *uint32, src *float32, dstride, sstride, ld, rows, w, single int)")
	p("TEXT ·bf16PlaneRowsAVX512(SB), NOSPLIT, $0-64")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ dstride+16(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ sstride+24(FP), R9")
	p("\tSHLQ $2, R9")
	p("\tMOVQ ld+32(FP), R10")
	p("\tSHLQ $2, R10")
	p("\tMOVQ rows+40(FP), R11")
	p("\tMOVQ w+48(FP), R12")
	p("\tVMOVDQU16 interleave16<>(SB), Z8")
	p("\tVPXORD Z6, Z6, Z6")
	// K1: the columns of the last chunk of up to 16 (w mod 16, or 16).
	p("\tMOVQ R12, CX")
	p("\tANDQ $15, CX")
	p("\tJNZ prmask")
	p("\tMOVQ $16, CX")
	p("prmask:")
	p("\tMOVQ $-1, DX")
	p("\tSHLXQ CX, DX, DX")
	p("\tNOTQ DX")
	p("\tKMOVW DX, K1")
	p("\tMOVQ $0xffff, DX")
	p("\tKMOVW DX, K2")
	p("prrow:")
	p("\tMOVQ SI, AX")
	p("\tMOVQ DI, BX")
	p("\tMOVQ R12, CX")
	p("prchunk:")
	p("\tKMOVW K2, K3")
	p("\tCMPQ CX, $16")
	p("\tJGT prfull")
	p("\tKMOVW K1, K3")
	p("prfull:")
	p("\tVMOVUPS.Z (AX), K3, Z0")
	p("\tCMPQ single+56(FP), $0")
	p("\tJNE prsingle")
	p("\tVMOVUPS.Z (AX)(R10*1), K3, Z1")
	p("\tJMP prcvt")
	p("prsingle:")
	p("\tVMOVDQA64 Z6, Z1")
	p("prcvt:")
	cvt2(0, 1, 2)
	p("\tVPERMW Z2, Z8, Z3")
	p("\tVMOVDQU32 Z3, K3, (BX)")
	p("\tADDQ $64, AX")
	p("\tADDQ $64, BX")
	p("\tSUBQ $16, CX")
	p("\tJGT prchunk")
	p("\tADDQ R9, SI")
	p("\tADDQ R8, DI")
	p("\tDECQ R11")
	p("\tJNZ prrow")
	p("\tVZEROUPPER")
	p("\tRET")
}

func main() {
	p("// Code generated by gen_bf16.go; DO NOT EDIT.")
	p("")
	p("//go:build !purego")
	p("")
	p(`#include "textflag.h"`)
	p("")
	p("// interleave16<> is the VPERMW index that interleaves the words of the")
	p("// two 256-bit halves of a register: word 2j from word j, word 2j+1")
	p("// from word 16+j.")
	for j := 0; j < 16; j++ {
		p("DATA interleave16<>+%d(SB)/2, $%d", 4*j, j)
		p("DATA interleave16<>+%d(SB)/2, $%d", 4*j+2, 16+j)
	}
	p("GLOBL interleave16<>(SB), RODATA|NOPTR, $64")
	p("")
	kernel("bf16KernelAVX512", 2, false, false)
	kernel("bf16KernelHalfAVX512", 1, false, false)
	kernel("bf16KernelRowsAVX512", 2, true, false)
	kernel("bf16KernelRowsHalfAVX512", 1, true, false)
	kernel("bf16KernelARowsAVX512", 2, false, true)
	kernel("bf16KernelARowsHalfAVX512", 1, false, true)
	pack()
	p("")
	panels()
	p("")
	rows()
	p("")
	planeRows()
	if err := os.WriteFile("bf16_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
