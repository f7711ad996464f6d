package blas

import (
	"math"
	"unsafe"

	"github.com/proxgen/proxgen/internal/parallel"
)

// The bfloat16 GEMM: SgemmBF16 rounds both operands to bfloat16 (8 bits
// of significand, the exponent range of float32) and accumulates their
// products in float32, as the AVX512_BF16 instructions do: the packing
// routines convert panels of op(A) and op(B) to pairs of bfloat16 values
// along K (VCVTNE2PS2BF16), and the micro-kernel multiplies pairs and adds
// both products to float32 accumulators (VDPBF16PS), twice as many
// multiplications per instruction as the float32 kernel. The pure-Go
// kernel computes the same values bit for bit (see SgemmBF16 for the exact
// contract); it is the reference the tests compare the assembly with and
// runs where the CPU lacks AVX512_BF16, far slower than Sgemm there, which
// is why callers ask BF16Native first.

// Blocking of the bfloat16 GEMM: an 8×32 register tile (16 accumulators),
// K in blocks of bf16KC values (an even number, so that no pair straddles
// two blocks; a packed panel of B is 24 KiB and stays in L1), row blocks
// of bf16MC and column blocks of bf16NC.
const (
	bf16MR = 8
	bf16NR = 32
	bf16KC = 384
	bf16MC = 192
	bf16NC = 3072
)

// BF16TileCols is the width of the column tiles of the bfloat16 products
// (MulPairRows, SgemmBF16): one whose column count is a multiple of it
// leaves no lane of a tile idle.
const BF16TileCols = bf16NR

// BF16Native reports whether SgemmBF16 runs on the CPU's bfloat16
// instructions (AVX512_BF16 with AVX512BW: implementation "avx512bf16"
// of package "blasbf16" in internal/impl). Where it does not, SgemmBF16 runs the
// pure-Go reference, which computes the same values but many times slower
// than Sgemm, so callers that only want speed compute in float32 instead.
func BF16Native() bool { return useBF16 }

// SgemmBF16 computes C = alpha·op(A)·op(B) + beta·C like Sgemm, with the
// operands rounded to bfloat16 and their products accumulated in float32:
//
//   - every element of op(A) and op(B) is rounded to bfloat16 as
//     VCVTNE2PS2BF16 does (to nearest, ties to even; denormals become
//     zeros of the same sign; NaNs stay NaN, made quiet);
//   - K is cut into blocks of 384 from the start, and each block into
//     pairs of consecutive values (2q, 2q+1), the last padded with zero;
//   - each element of C accumulates one block in a float32 acc starting
//     at zero, pair after pair, as VDPBF16PS does: acc += a₂q₊₁·b₂q₊₁,
//     rounded, then acc += a₂q·b₂q, rounded (the products of two
//     bfloat16 values are exact in float32), each sum rounded to nearest
//     even with results below the smallest normal float32 flushed to
//     zero;
//   - after each block, C = alpha·acc + beta·C, with alpha·acc and
//     beta·C rounded separately (no fused multiply-add); beta == 0 does
//     not read C, and every block after the first adds with beta = 1.
//
// The pure-Go loop follows these steps exactly and so equals the
// assembly bit for bit, except that a product below the smallest normal
// float32 (which only values under about 1e-19 in magnitude give) may
// round differently. Results do not depend on the number of workers.
// Arguments are checked as by Sgemm.
func SgemmBF16(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check("SgemmBF16", transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemmBF16(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmBF16Serial is SgemmBF16 run entirely on the calling goroutine, with
// identical results.
func SgemmBF16Serial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check("SgemmBF16Serial", transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemmBF16(false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// ToBF16 returns the bfloat16 bits of x rounded as VCVTNE2PS2BF16 rounds
// it: to nearest, ties to even; a denormal x becomes a zero of its sign,
// a NaN a quiet NaN with the upper bits of x.
func ToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	switch {
	case u&0x7f800000 == 0: // zero or denormal
		return uint16(u>>16) & 0x8000
	case u&0x7fffffff > 0x7f800000: // NaN
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// FromBF16 returns the float32 value of the bfloat16 bits h.
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16Operand returns the float32 value of the bfloat16 bits h as
// VDPBF16PS reads it: denormals as zeros of their sign.
func bf16Operand(h uint32) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return math.Float32frombits(h << 16)
}

// ftz flushes a float32 below the smallest normal magnitude to a zero of
// its sign.
func ftz(x float32) float32 {
	if u := math.Float32bits(x); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return x
}

// dotPair returns acc plus the dot product of the pairs of bfloat16
// values a and b (element 2q in the low half, 2q+1 in the high half), in
// VDPBF16PS's order: the high products first. The conversions to float32
// keep the compiler from fusing the multiply and the add.
func dotPair(acc float32, a, b uint32) float32 {
	acc = ftz(acc + float32(bf16Operand(a>>16)*bf16Operand(b>>16)))
	return ftz(acc + float32(bf16Operand(a&0xffff)*bf16Operand(b&0xffff)))
}

// pairOf packs x (element 2q) and y (element 2q+1) as one pair.
func pairOf(x, y float32) uint32 { return uint32(ToBF16(x)) | uint32(ToBF16(y))<<16 }

// bf16PackContiguous packs kcb rows of w <= width values, src[p*ld:][:w]
// for each p, as pairs of rows: dst[q*width+j] holds rows 2q and 2q+1 of
// column j (the second zero past kcb), and columns j >= w are zero.
func bf16PackContiguous(src []float32, ld, kcb, w, width int, dst []uint32) {
	kp := (kcb + 1) / 2
	if bf16PackAsm(src, ld, kcb, w, width, width, dst) {
		return
	}
	for q := 0; q < kp; q++ {
		d := dst[q*width : q*width+width]
		r0 := src[2*q*ld : 2*q*ld+w]
		if 2*q+1 < kcb {
			r1 := src[(2*q+1)*ld : (2*q+1)*ld+w]
			for j, v := range r0 {
				d[j] = pairOf(v, r1[j])
			}
		} else {
			for j, v := range r0 {
				d[j] = pairOf(v, 0)
			}
		}
		clear(d[w:])
	}
}

// bf16PackStrided packs w <= width rows of kcb values (src[r*ld:][:kcb]
// for each r) transposed, as pairs: dst[q*width+r] holds values 2q and
// 2q+1 of row r (the second zero past kcb), and rows r >= w are zero.
func bf16PackStrided(src []float32, ld, kcb, w, width int, dst []uint32) {
	kp := (kcb + 1) / 2
	full := kcb / 2
	dst = dst[:kp*width]
	if w < width {
		clear(dst)
	}
	for r := 0; r < w; r++ {
		row := src[r*ld : r*ld+kcb]
		for q := 0; q < full; q++ {
			dst[q*width+r] = pairOf(row[2*q], row[2*q+1])
		}
		if full < kp {
			dst[full*width+r] = pairOf(row[kcb-1], 0)
		}
	}
}

// bf16PackA packs rows [i0, i0+mcb) and columns [pc, pc+kcb) of op(A) into
// dst as panels of bf16MR rows, each row its kp = ⌈kcb/2⌉ pairs in order:
// pair q of row r of panel t at t·kp·bf16MR + r·kp + q; rows past mcb are
// zero.
func bf16PackA(transA bool, a []float32, lda, i0, mcb, pc, kcb int, dst []uint32) {
	kp := (kcb + 1) / 2
	for t := 0; t*bf16MR < mcb; t++ {
		rows := min(bf16MR, mcb-t*bf16MR)
		panel := dst[t*kp*bf16MR : (t+1)*kp*bf16MR]
		base := i0 + t*bf16MR
		clear(panel[rows*kp:])
		switch {
		case transA:
			// op(A)[i][p] = a[p*lda+i]: each pair from two rows of a.
			for r := 0; r < rows; r++ {
				d := panel[r*kp : (r+1)*kp]
				for q := range d {
					x := a[(pc+2*q)*lda+base+r]
					var y float32
					if 2*q+1 < kcb {
						y = a[(pc+2*q+1)*lda+base+r]
					}
					d[q] = pairOf(x, y)
				}
			}
		case bf16PackRowsAsm(a[base*lda+pc:], lda, kcb, rows, panel):
		default:
			for r := 0; r < rows; r++ {
				bf16PackRow(a[(base+r)*lda+pc:(base+r)*lda+pc+kcb], panel[r*kp:(r+1)*kp])
			}
		}
	}
}

// bf16PackRow converts the values of row to its ⌈len(row)/2⌉ pairs in d.
func bf16PackRow(row []float32, d []uint32) {
	full := len(row) / 2
	for q := 0; q < full; q++ {
		d[q] = pairOf(row[2*q], row[2*q+1])
	}
	if full < len(d) {
		d[full] = pairOf(row[len(row)-1], 0)
	}
}

// bf16PackB packs panels [t0, t1) of bf16NR columns of op(B) (columns
// from j0, ncb in all; rows [pc, pc+kcb)) into dst, panel t at
// t·kp·bf16NR.
func bf16PackB(transB bool, b []float32, ldb, j0, ncb, pc, kcb, t0, t1 int, dst []uint32) {
	kp := (kcb + 1) / 2
	if full := min(t1, ncb/bf16NR) - t0; !transB && full > 0 &&
		bf16PackPanelsAsm(b[pc*ldb+j0+t0*bf16NR:], ldb, kcb, full, dst[t0*kp*bf16NR:]) {
		t0 += full
	}
	for t := t0; t < t1; t++ {
		cols := min(bf16NR, ncb-t*bf16NR)
		panel := dst[t*kp*bf16NR : (t+1)*kp*bf16NR]
		base := j0 + t*bf16NR
		if transB {
			bf16PackStrided(b[base*ldb+pc:], ldb, kcb, cols, bf16NR, panel)
		} else {
			bf16PackContiguous(b[pc*ldb+base:], ldb, kcb, cols, bf16NR, panel)
		}
	}
}

// bf16Kernel computes the rows×cols corner of C = alpha·Ap·Bp + beta·C for
// one bf16MR×bf16NR tile: ap and bp are packed panels of kp pairs (ap row
// by row, bp pair by pair).
func bf16Kernel(kp int, ap, bp []uint32, c []float32, ldc int, alpha, beta float32, rows, cols int) {
	_ = ap[kp*bf16MR-1]
	_ = bp[kp*bf16NR-1]
	_ = c[(rows-1)*ldc+cols-1]
	if bf16KernelAsm(kp, ap, bp, c, ldc, alpha, beta, rows, cols) {
		return
	}
	var acc [bf16MR][bf16NR]float32
	for q := 0; q < kp; q++ {
		b := (*[bf16NR]uint32)(bp[q*bf16NR:])
		for r := 0; r < rows; r++ {
			ar, row := ap[r*kp+q], &acc[r]
			for j := 0; j < cols; j++ {
				row[j] = dotPair(row[j], ar, b[j])
			}
		}
	}
	for r := 0; r < rows; r++ {
		dst := c[r*ldc : r*ldc+cols]
		for j, v := range acc[r][:cols] {
			if beta == 0 {
				dst[j] = alpha * v
			} else {
				dst[j] = float32(alpha*v) + float32(beta*dst[j])
			}
		}
	}
}

var (
	bf16AFree, bf16BFree freeList[[]uint32]
)

func getU32(f *freeList[[]uint32], n int) *[]uint32 {
	p := f.get()
	if cap(*p) < n {
		*p = alignedU32(n)
	}
	*p = (*p)[:n]
	return p
}

// alignedU32 returns a zeroed slice of n uint32 values whose first element
// is 64-byte aligned.
func alignedU32(n int) []uint32 {
	s := make([]uint32, n+16)
	off := int(uintptr(unsafe.Pointer(&s[0]))&63) / 4
	if off != 0 {
		off = 16 - off
	}
	return s[off : off+n : off+n]
}

// gemmBF16 is the blocked driver of SgemmBF16 (par allows the worker
// pool). As in gemm, the tile grid and the blocks of K are fixed from the
// top-left corner whatever the number of workers.
func gemmBF16(par, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	workers := 1
	if par && m*n*k >= parallelWork {
		workers = parallel.Workers()
	}
	nc := min(bf16NC, roundUp(n, bf16NR))
	bp := getU32(&bf16BFree, nc*bf16KC/2)
	defer bf16BFree.put(bp)
	g := bf16GEMM{transA: transA, a: a, lda: lda, m: m, alpha: alpha, c: c, ldc: ldc, bbuf: *bp, tilesM: ceilDiv(m, bf16MR)}
	for jc := 0; jc < n; jc += nc {
		g.jc, g.ncb = jc, min(nc, n-jc)
		g.panels = ceilDiv(g.ncb, bf16NR)
		g.wm, g.wn = grid(workers, g.tilesM, g.panels)
		for pc := 0; pc < k; pc += bf16KC {
			g.pc, g.kcb = pc, min(bf16KC, k-pc)
			g.beta = beta
			if pc > 0 {
				g.beta = 1
			}
			if workers > 1 && g.panels >= 2 {
				bbuf, jc, ncb, pc, kcb := g.bbuf, g.jc, g.ncb, g.pc, g.kcb
				parallel.For(g.panels, ceilDiv(g.panels, workers), func(lo, hi int) {
					bf16PackB(transB, b, ldb, jc, ncb, pc, kcb, lo, hi, bbuf)
				})
			} else {
				bf16PackB(transB, b, ldb, g.jc, g.ncb, g.pc, g.kcb, 0, g.panels, g.bbuf)
			}
			if g.wm*g.wn > 1 {
				shared := g
				parallel.For(g.wm*g.wn, 1, shared.region)
			} else {
				g.region(0, 1)
			}
		}
	}
}

// bf16GEMM is one block of gemmBF16: the columns [jc, jc+ncb) and the
// depth [pc, pc+kcb), op(B) packed in bbuf, split into a wm × wn grid of
// regions of C.
type bf16GEMM struct {
	transA           bool
	a                []float32
	lda, m           int
	alpha, beta      float32
	c                []float32
	bbuf             []uint32
	ldc              int
	jc, ncb, pc, kcb int
	tilesM, panels   int
	wm, wn           int
}

// region computes the regions [lo, hi) of the grid.
func (g *bf16GEMM) region(lo, hi int) {
	m, kp := g.m, (g.kcb+1)/2
	ap := getU32(&bf16AFree, min(bf16MC, roundUp(m, bf16MR))*kp)
	abuf := *ap
	for u := lo; u < hi; u++ {
		t0, t1 := split(g.tilesM, g.wm, u/g.wn)
		p0, p1 := split(g.panels, g.wn, u%g.wn)
		r0, r1 := t0*bf16MR, min(t1*bf16MR, m)
		mcb := roundUp(ceilDiv(r1-r0, ceilDiv(r1-r0, bf16MC)), bf16MR)
		for i0 := r0; i0 < r1; i0 += mcb {
			rows := min(mcb, r1-i0)
			bf16PackA(g.transA, g.a, g.lda, i0, rows, g.pc, g.kcb, abuf)
			for t := p0; t < p1; t++ {
				cols := min(bf16NR, g.ncb-t*bf16NR)
				bpanel := g.bbuf[t*kp*bf16NR : (t+1)*kp*bf16NR]
				for i := 0; i < rows; i += bf16MR {
					apanel := abuf[(i/bf16MR)*kp*bf16MR : (i/bf16MR+1)*kp*bf16MR]
					bf16Kernel(kp, apanel, bpanel, g.c[(i0+i)*g.ldc+g.jc+t*bf16NR:], g.ldc, g.alpha, g.beta, min(bf16MR, rows-i), cols)
				}
			}
		}
	}
	bf16AFree.put(ap)
}
