// Package neonenc encodes the arm64 ASIMD (NEON) floating-point
// instructions that the Go assembler has no mnemonics for, for the
// generators of the arm64 kernels (autograd/blas/gen_kernels_arm64.go,
// autograd/internal/kernels/gen_vec_arm64.go, optim/gen_adam_arm64.go), which
// emit them as WORD directives. All operate on four single-precision lanes
// (the 4S arrangement, Q = 1); d, n and m are vector register numbers
// (0–31) and the encodings are those of the Arm Architecture Reference
// Manual.
package neonenc

import "fmt"

// three encodes a three-register instruction Vd = Vn op Vm.
func three(base uint32, d, n, m int) uint32 {
	return base | reg(m)<<16 | reg(n)<<5 | reg(d)
}

func reg(r int) uint32 {
	if r < 0 || r > 31 {
		panic(fmt.Sprintf("neonenc: register V%d out of range", r))
	}
	return uint32(r)
}

// FADD returns FADD Vd.4S, Vn.4S, Vm.4S: Vd = Vn + Vm.
func FADD(d, n, m int) uint32 { return three(0x4e20d400, d, n, m) }

// FSUB returns FSUB Vd.4S, Vn.4S, Vm.4S: Vd = Vn − Vm.
func FSUB(d, n, m int) uint32 { return three(0x4ea0d400, d, n, m) }

// FMUL returns FMUL Vd.4S, Vn.4S, Vm.4S: Vd = Vn · Vm.
func FMUL(d, n, m int) uint32 { return three(0x6e20dc00, d, n, m) }

// FDIV returns FDIV Vd.4S, Vn.4S, Vm.4S: Vd = Vn / Vm.
func FDIV(d, n, m int) uint32 { return three(0x6e20fc00, d, n, m) }

// FADD2D, FSUB2D and FMUL2D are FADD, FSUB and FMUL on two double-precision
// lanes (the 2D arrangement).
func FADD2D(d, n, m int) uint32 { return three(0x4e60d400, d, n, m) }

// FSUB2D returns FSUB Vd.2D, Vn.2D, Vm.2D: Vd = Vn − Vm.
func FSUB2D(d, n, m int) uint32 { return three(0x4ee0d400, d, n, m) }

// FMUL2D returns FMUL Vd.2D, Vn.2D, Vm.2D: Vd = Vn · Vm.
func FMUL2D(d, n, m int) uint32 { return three(0x6e60dc00, d, n, m) }

// FCVTL returns FCVTL Vd.2D, Vn.2S: lanes 0 and 1 of Vn widened to double
// precision (exactly).
func FCVTL(d, n int) uint32 { return 0x0e617800 | reg(n)<<5 | reg(d) }

// FCVTL2 returns FCVTL2 Vd.2D, Vn.4S: lanes 2 and 3 of Vn widened.
func FCVTL2(d, n int) uint32 { return 0x4e617800 | reg(n)<<5 | reg(d) }

// FSQRT returns FSQRT Vd.4S, Vn.4S.
func FSQRT(d, n int) uint32 { return 0x6ea1f800 | reg(n)<<5 | reg(d) }

// FCMGTZ returns FCMGT Vd.4S, Vn.4S, #0: all ones in the lanes where
// Vn > 0 (not for NaN).
func FCMGTZ(d, n int) uint32 { return 0x4ea0c800 | reg(n)<<5 | reg(d) }

// FCMLTZ returns FCMLT Vd.4S, Vn.4S, #0: all ones in the lanes where
// Vn < 0 (not for NaN).
func FCMLTZ(d, n int) uint32 { return 0x4ea0e800 | reg(n)<<5 | reg(d) }

// byElem encodes a vector-by-element instruction with opcode bits op
// (bits 15–12): Vd op= Vn · Vm.S[idx].
func byElem(op uint32, d, n, m, idx int) uint32 {
	if idx < 0 || idx > 3 {
		panic(fmt.Sprintf("neonenc: lane %d out of range", idx))
	}
	mm := reg(m)
	return 0x4f800000 | op<<12 | uint32(idx&1)<<21 | (mm>>4)<<20 | (mm&15)<<16 |
		uint32(idx>>1)<<11 | reg(n)<<5 | reg(d)
}

// FMLAElem returns FMLA Vd.4S, Vn.4S, Vm.S[idx]: Vd += Vn · Vm[idx], fused.
func FMLAElem(d, n, m, idx int) uint32 { return byElem(0x1, d, n, m, idx) }

// FMULElem returns FMUL Vd.4S, Vn.4S, Vm.S[idx]: Vd = Vn · Vm[idx].
func FMULElem(d, n, m, idx int) uint32 { return byElem(0x9, d, n, m, idx) }

// Word returns the assembler line for the encoded instruction enc, with
// comment (the instruction in the usual syntax) after it.
func Word(enc uint32, comment string) string {
	return fmt.Sprintf("\tWORD $0x%08x // %s", enc, comment)
}

var (
	ops3 = map[string]struct {
		enc func(d, n, m int) uint32
		sym string
	}{"FADD": {FADD, "+"}, "FSUB": {FSUB, "-"}, "FMUL": {FMUL, "*"}, "FDIV": {FDIV, "/"},
		"FADD2D": {FADD2D, "+"}, "FSUB2D": {FSUB2D, "-"}, "FMUL2D": {FMUL2D, "*"}}
	ops2 = map[string]struct {
		enc  func(d, n int) uint32
		asm  string // Go syntax, with the source and destination registers
		what string
	}{
		"FSQRT":  {FSQRT, "FSQRT V%[2]d.S4, V%[1]d.S4", "V%[1]d = sqrt(V%[2]d)"},
		"FCMGTZ": {FCMGTZ, "FCMGT $0, V%[2]d.S4, V%[1]d.S4", "V%[1]d = V%[2]d > 0"},
		"FCMLTZ": {FCMLTZ, "FCMLT $0, V%[2]d.S4, V%[1]d.S4", "V%[1]d = V%[2]d < 0"},
		"FCVTL":  {FCVTL, "FCVTL V%[2]d.S2, V%[1]d.D2", "V%[1]d = float64(V%[2]d[0:2])"},
		"FCVTL2": {FCVTL2, "FCVTL2 V%[2]d.S4, V%[1]d.D2", "V%[1]d = float64(V%[2]d[2:4])"},
	}
	opsElem = map[string]struct {
		enc func(d, n, m, idx int) uint32
		op  string
	}{"FMLA": {FMLAElem, "+="}, "FMUL": {FMULElem, "="}}
)

// Op3 returns the WORD line for name (FADD, FSUB, FMUL or FDIV, or FADD2D,
// FSUB2D or FMUL2D) Vd = Vn op Vm, commented in Go's operand order.
func Op3(name string, d, n, m int) string {
	o, ok := ops3[name]
	if !ok {
		panic("neonenc: unknown instruction " + name)
	}
	mn, arr := name, "S4"
	if len(name) > 2 && name[len(name)-2:] == "2D" {
		mn, arr = name[:len(name)-2], "D2"
	}
	return Word(o.enc(d, n, m), fmt.Sprintf("%s V%d.%s, V%d.%s, V%d.%s (V%d = V%d %s V%d)", mn, m, arr, n, arr, d, arr, d, n, o.sym, m))
}

// Op2 returns the WORD line for name (FSQRT, FCMGTZ, FCMLTZ, FCVTL or
// FCVTL2) with
// destination Vd and source Vn.
func Op2(name string, d, n int) string {
	o, ok := ops2[name]
	if !ok {
		panic("neonenc: unknown instruction " + name)
	}
	return Word(o.enc(d, n), fmt.Sprintf(o.asm+" ("+o.what+")", d, n))
}

// OpElem returns the WORD line for name (FMLA or FMUL) by element:
// Vd op Vn · Vm.S[idx].
func OpElem(name string, d, n, m, idx int) string {
	o, ok := opsElem[name]
	if !ok {
		panic("neonenc: unknown instruction " + name)
	}
	return Word(o.enc(d, n, m, idx), fmt.Sprintf("%s V%d.S[%d], V%d.S4, V%d.S4 (V%d %s V%d · V%d[%d])", name, m, idx, n, d, d, o.op, n, m, idx))
}
