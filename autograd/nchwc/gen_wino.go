//go:build ignore

// This program generates wino_amd64.s, the AVX-512 and AVX2 transforms of
// package nchwc's Winograd convolution (wino.go). Run it with go generate.
//
// Every kernel processes n tiles along one tile row, each tile a 4×4
// window (input) or a 2×2 output of vectors of 16 channels, one ZMM
// register (AVX-512) or two YMM registers, one per half of the channels
// (AVX2). The additions are those of wino.go's winoInGo and winoOutGo, in
// their order, so that all three give the same values bit for bit.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

var asm bytes.Buffer

func a(format string, args ...any) { fmt.Fprintf(&asm, format+"\n", args...) }

// isa is one instruction set: its register prefix, the bytes of one
// register and how many registers make a vector of 16 channels.
type isa struct {
	name, reg string
	halves    int
}

var isas = []isa{{"AVX512", "Z", 1}, {"AVX2", "Y", 2}}

// planes are the base registers of the four planes ξ = 4i + j of column
// j (j = 0..3), and idx the index of row i (i = 0..3) from them.
var (
	planes = [4]string{"DI", "AX", "BX", "R12"}
	idx    = [4]string{"", "(R13*1)", "(R13*2)", "(R14*1)"}
)

// setupPlanes sets the registers of planes and idx from the first plane
// (base) and the distance between planes (xs), both in registers.
func setupPlanes(base, xs string) {
	a("\tLEAQ (%s)(%s*1), %s", base, xs, planes[1])
	a("\tLEAQ (%s)(%s*2), %s", base, xs, planes[2])
	a("\tLEAQ (%s)(%s*1), %s", planes[2], xs, planes[3])
	a("\tMOVQ %s, R13", xs)
	a("\tSHLQ $2, R13")
	a("\tLEAQ (R13)(R13*2), R14")
}

func plane(i, j, disp int, base [4]string) string {
	return fmt.Sprintf("%d(%s)%s", disp, base[j], idx[i])
}

// genIn writes winoIn<name>(src *float32, rs, n int, dst *float32, xs
// int): the input transform V = Bᵀ·d·B of n tiles whose windows start at
// src (rows rs bytes apart, tile t at src + 128t), tile t's V_ξ written at
// dst + ξ·xs + 64t. Columns first: e[r][·] = d[r][·]·B, then V[·][j] =
// Bᵀ·e[·][j].
func genIn(s isa) {
	n := "winoIn" + s.name
	a("")
	a("// func %s(src *float32, rs, n int, dst *float32, xs int)", n)
	a("TEXT ·%s(SB), NOSPLIT, $0-40", n)
	a("\tMOVQ src+0(FP), SI")
	a("\tMOVQ rs+8(FP), DX")
	a("\tMOVQ n+16(FP), CX")
	a("\tMOVQ dst+24(FP), DI")
	a("\tMOVQ xs+32(FP), R8")
	a("\tTESTQ CX, CX")
	a("\tJZ %s_done", n)
	a("\tLEAQ (SI)(DX*1), R9")
	a("\tLEAQ (SI)(DX*2), R10")
	a("\tLEAQ (R10)(DX*1), R11")
	setupPlanes("DI", "R8")
	rows := [4]string{"SI", "R9", "R10", "R11"}
	// e[r] of column j from input columns (first, op, second).
	type term struct {
		c0, c1 int
		op     string
	}
	cols := [4]term{{0, 2, "VSUBPS"}, {1, 2, "VADDPS"}, {2, 1, "VSUBPS"}, {1, 3, "VSUBPS"}}
	a("%s_loop:", n)
	for h := 0; h < s.halves; h++ {
		// AVX-512 (32 registers): the window's 16 vectors loaded once,
		// into registers 16–31; AVX2 reads them from memory.
		win := func(r, c int) string { return fmt.Sprintf("%d(%s)", c*64+h*32, rows[r]) }
		if s.reg == "Z" {
			for r := 0; r < 4; r++ {
				for c := 0; c < 4; c++ {
					a("\tVMOVUPS %s, Z%d", win(r, c), 16+4*r+c)
				}
			}
			win = func(r, c int) string { return fmt.Sprintf("Z%d", 16+4*r+c) }
		}
		for j := 0; j < 4; j++ {
			r0 := 8 * (j % 2)
			reg := func(k int) string { return fmt.Sprintf("%s%d", s.reg, r0+k) }
			t := cols[j]
			for r := 0; r < 4; r++ {
				if s.reg == "Z" {
					a("\t%s %s, %s, %s", t.op, win(r, t.c1), win(r, t.c0), reg(r))
					continue
				}
				a("\tVMOVUPS %s, %s", win(r, t.c0), reg(r))
				a("\t%s %s, %s, %s", t.op, win(r, t.c1), reg(r), reg(r))
			}
			// V[0] = e0 − e2, V[1] = e1 + e2, V[2] = e2 − e1, V[3] = e1 − e3.
			a("\tVSUBPS %s, %s, %s", reg(2), reg(0), reg(4))
			a("\tVADDPS %s, %s, %s", reg(2), reg(1), reg(5))
			a("\tVSUBPS %s, %s, %s", reg(1), reg(2), reg(6))
			a("\tVSUBPS %s, %s, %s", reg(3), reg(1), reg(7))
			for i := 0; i < 4; i++ {
				a("\tVMOVUPS %s, %s", reg(4+i), plane(i, j, h*32, planes))
			}
		}
	}
	for _, r := range rows {
		a("\tADDQ $128, %s", r)
	}
	for _, p := range planes {
		a("\tADDQ $64, %s", p)
	}
	a("\tDECQ CX")
	a("\tJNZ %s_loop", n)
	a("%s_done:", n)
	a("\tVZEROUPPER")
	a("\tRET")
}

// genOut writes winoOut<name>(src *float32, xs, n int, bias, res, out
// *float32, os, relu int): the output transform Y = Aᵀ·m·A of n tiles
// whose m_ξ lie at src + ξ·xs + 64t, plus the bias (16 values), plus the
// residual (if res is not nil; at res's offsets of out), then the ReLU
// (max(v, 0), NaN and −0 to +0; if relu is not 0), stored at out + y·os
// + 64x + 128t for the tile's pixel (y, x). Columns first: f[r][·] =
// m[r][·]·A, then Y[·][c] = Aᵀ·f[·][c].
func genOut(s isa) {
	n := "winoOut" + s.name
	a("")
	a("// func %s(src *float32, xs, n int, bias, res, out *float32, os, relu int)", n)
	a("TEXT ·%s(SB), NOSPLIT, $0-64", n)
	a("\tMOVQ src+0(FP), DI")
	a("\tMOVQ xs+8(FP), R8")
	a("\tMOVQ n+16(FP), CX")
	a("\tMOVQ bias+24(FP), R9")
	a("\tMOVQ res+32(FP), R10")
	a("\tMOVQ out+40(FP), R11")
	a("\tMOVQ os+48(FP), DX")
	a("\tMOVQ relu+56(FP), SI")
	a("\tTESTQ CX, CX")
	a("\tJZ %s_done", n)
	// planes[c] holds column c's m_ξ (ξ = 4r + c): the same registers,
	// read rather than written.
	setupPlanes("DI", "R8")
	r := func(k int) string { return fmt.Sprintf("%s%d", s.reg, k) }
	// bias in registers 12 (and 13: the second half).
	for h := 0; h < s.halves; h++ {
		a("\tVMOVUPS %d(R9), %s", h*32, r(12+h))
	}
	xor := "VXORPS"
	if s.reg == "Z" {
		xor = "VPXORD"
	}
	a("\t%s %s, %s, %s", xor, r(14), r(14), r(14))
	a("%s_loop:", n)
	for h := 0; h < s.halves; h++ {
		// m[row][c]: AVX-512 loads the 16 once, into registers 16–31;
		// AVX2 reads them from memory.
		m := func(row, c int) string { return plane(row, c, h*32, planes) }
		if s.reg == "Z" {
			for row := 0; row < 4; row++ {
				for c := 0; c < 4; c++ {
					a("\tVMOVUPS %s, Z%d", m(row, c), 16+4*row+c)
				}
			}
			m = func(row, c int) string { return fmt.Sprintf("Z%d", 16+4*row+c) }
		}
		// Y[y][c] in registers 8 + 2c + y.
		for c := 0; c < 2; c++ {
			for row := 0; row < 4; row++ {
				f := r(row)
				if c == 0 { // (m0 + m1) + m2
					a("\tVADDPS %s, %s, %s", m(row, 1), load(s, m(row, 0), f), f)
					a("\tVADDPS %s, %s, %s", m(row, 2), f, f)
				} else { // (m1 − m2) − m3
					a("\tVSUBPS %s, %s, %s", m(row, 2), load(s, m(row, 1), f), f)
					a("\tVSUBPS %s, %s, %s", m(row, 3), f, f)
				}
			}
			y0, y1 := r(8+2*c), r(9+2*c)
			a("\tVADDPS %s, %s, %s", r(1), r(0), y0) // (f0 + f1) + f2
			a("\tVADDPS %s, %s, %s", r(2), y0, y0)
			a("\tVSUBPS %s, %s, %s", r(2), r(1), y1) // (f1 − f2) − f3
			a("\tVSUBPS %s, %s, %s", r(3), y1, y1)
		}
		for k := 0; k < 4; k++ {
			a("\tVADDPS %s, %s, %s", r(12+h), r(8+k), r(8+k))
		}
		mem := func(base string, k int) string {
			c, y := k/2, k%2
			if y == 1 {
				return fmt.Sprintf("%d(%s)(DX*1)", c*64+h*32, base)
			}
			return fmt.Sprintf("%d(%s)", c*64+h*32, base)
		}
		a("\tTESTQ R10, R10")
		a("\tJZ %s_nores%d", n, h)
		for k := 0; k < 4; k++ {
			a("\tVADDPS %s, %s, %s", mem("R10", k), r(8+k), r(8+k))
		}
		a("%s_nores%d:", n, h)
		a("\tTESTQ SI, SI")
		a("\tJZ %s_store%d", n, h)
		for k := 0; k < 4; k++ {
			// Intel order: max(v, 0) = v > 0 ? v : 0.
			a("\tVMAXPS %s, %s, %s", r(14), r(8+k), r(8+k))
		}
		a("%s_store%d:", n, h)
		for k := 0; k < 4; k++ {
			a("\tVMOVUPS %s, %s", r(8+k), mem("R11", k))
		}
	}
	for _, p := range planes {
		a("\tADDQ $64, %s", p)
	}
	a("\tADDQ $128, R11")
	a("\tTESTQ R10, R10")
	a("\tJZ %s_next", n)
	a("\tADDQ $128, R10")
	a("%s_next:", n)
	a("\tDECQ CX")
	a("\tJNZ %s_loop", n)
	a("%s_done:", n)
	a("\tVZEROUPPER")
	a("\tRET")
}

// load returns the register that holds src: src itself where it is a
// register, else dst after a load of src into it.
func load(s isa, src, dst string) string {
	if src[0] == s.reg[0] {
		return src
	}
	a("\tVMOVUPS %s, %s", src, dst)
	return dst
}

func main() {
	a("// Code generated by gen_wino.go; DO NOT EDIT.")
	a("")
	a("//go:build !purego")
	a("")
	a("#include \"textflag.h\"")
	for _, s := range isas {
		genIn(s)
		genOut(s)
	}
	if err := os.WriteFile("wino_amd64.s", asm.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
