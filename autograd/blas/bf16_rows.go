package blas

import "fmt"

// BF16PackedA is a left operand of SgemmBF16 packed once, for products
// whose right operand is already in bfloat16 pairs and is read where it
// lies (MulPairRows): a convolution converts each image once into pairs
// of channels, and every tap of the filter reads that image at another
// offset, so the im2col matrix is never written.
type BF16PackedA struct {
	m, k, kp int
	blocks   []int // offset in data of each block of bf16KC values of K
	data     []uint32
}

// PackBF16A packs op(A), m×k (A stored with row stride lda, transposed if
// transA), for MulPairRows. It panics if the matrix does not fit a.
func PackBF16A(transA bool, m, k int, a []float32, lda int) *BF16PackedA {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	checkMat("PackBF16A", "A", transA, m, 0, k, ar, ac, a, lda)
	pa := &BF16PackedA{m: m, k: k, kp: (k + 1) / 2}
	size := 0
	for pc := 0; pc < k; pc += bf16KC {
		pa.blocks = append(pa.blocks, size)
		size += roundUp(m, bf16MR) * ((min(bf16KC, k-pc) + 1) / 2)
	}
	pa.data = alignedU32(size)
	for i, pc := range pa.blockStarts() {
		kcb := min(bf16KC, k-pc)
		bf16PackA(transA, a, lda, 0, m, pc, kcb, pa.data[pa.blocks[i]:])
	}
	return pa
}

// blockStarts returns the first value of K of each block.
func (pa *BF16PackedA) blockStarts() []int {
	s := make([]int, len(pa.blocks))
	for i := range s {
		s[i] = i * bf16KC
	}
	return s
}

// Rows returns m, the rows of op(A).
func (pa *BF16PackedA) Rows() int { return pa.m }

// Pairs returns ⌈k/2⌉, the pairs of values of K.
func (pa *BF16PackedA) Pairs() int { return pa.kp }

// PairRows is a k×n right operand of MulPairRows held as bfloat16 pairs:
// pair q of column j, values 2q (low half) and 2q+1 (high half) of K, is
// the word Src[Offs[q]+j] (pairs as ToBF16 makes them).
type PairRows struct {
	Src  []uint32
	Offs []int32
}

// MulPairRows sets C = A·B + beta·C for the m×n matrix C (row stride
// ldc), on the calling goroutine, where A is pa and B is b with n columns
// and pa.Pairs() pair rows. The values are those of SgemmBF16 (alpha 1)
// with op(B) the float32 matrix of b's bfloat16 values, bit for bit: the
// same blocks of K, pairs and order. It panics if b does not hold the
// pairs the product reads.
func (pa *BF16PackedA) MulPairRows(n int, b PairRows, beta float32, c []float32, ldc int) {
	if len(b.Offs) < pa.kp {
		panic(fmt.Sprintf("blas.MulPairRows: %d pair rows, A has %d pairs", len(b.Offs), pa.kp))
	}
	if pa.m == 0 || n == 0 {
		return
	}
	checkMat("MulPairRows", "C", false, pa.m, n, pa.k, pa.m, n, c, ldc)
	for q, o := range b.Offs[:pa.kp] {
		if o < 0 || int(o)+n > len(b.Src) {
			panic(fmt.Sprintf("blas.MulPairRows: pair row %d at %d..%d lies outside the %d words of Src", q, o, int(o)+n, len(b.Src)))
		}
	}
	if pa.k == 0 {
		scaleC(pa.m, n, beta, c, ldc)
		return
	}
	var panel []uint32
	if !useBF16 {
		p := getU32(&bf16BFree, bf16KC/2*bf16NR)
		defer bf16BFree.put(p)
		panel = *p
	}
	for i, off := range pa.blocks {
		q0 := i * bf16KC / 2
		kpb := (min(bf16KC, pa.k-i*bf16KC) + 1) / 2
		offs := b.Offs[q0 : q0+kpb]
		betaEff := beta
		if i > 0 {
			betaEff = 1
		}
		for j0 := 0; j0 < n; j0 += bf16NR {
			cols := min(bf16NR, n-j0)
			if panel != nil {
				// The Go loops: the tile's pairs copied into a panel.
				for q, o := range offs {
					d := panel[q*bf16NR : (q+1)*bf16NR]
					copy(d, b.Src[int(o)+j0:int(o)+j0+cols])
					clear(d[cols:])
				}
			}
			for t := 0; t*bf16MR < pa.m; t++ {
				rows := min(bf16MR, pa.m-t*bf16MR)
				ap := pa.data[off+t*kpb*bf16MR : off+(t+1)*kpb*bf16MR]
				cc := c[t*bf16MR*ldc+j0:]
				if panel != nil {
					bf16Kernel(kpb, ap, panel[:kpb*bf16NR], cc, ldc, 1, betaEff, rows, cols)
					continue
				}
				_ = cc[(rows-1)*ldc+cols-1]
				bf16RowsKernelAsm(kpb, ap, b.Src[j0:], offs, cc, ldc, betaEff, rows, cols)
			}
		}
	}
}

// BF16Pairs sets dst[j], j < n, to the pair of src[j] (low half) and
// src[ld+j] (high half), each rounded by ToBF16, or of src[j] and zero if
// single: how a convolution interleaves two channels of an image for
// MulPairRows.
func BF16Pairs(dst []uint32, src []float32, ld, n int, single bool) {
	if n == 0 {
		return
	}
	kcb := 2
	if single {
		kcb = 1
	}
	_ = dst[n-1]
	_ = src[(kcb-1)*ld+n-1]
	j := 0
	if full := n / bf16NR; full > 0 && bf16PackPanelsAsm(src, ld, kcb, full, dst) {
		j = full * bf16NR
	}
	if j < n && bf16PackAsm(src[j:], ld, kcb, n-j, bf16NR, n-j, dst[j:]) {
		return
	}
	for ; j < n; j++ {
		var y float32
		if !single {
			y = src[ld+j]
		}
		dst[j] = pairOf(src[j], y)
	}
}

// WordRows is a left operand of SgemmBF16WordRows read where it lies: row
// i of A is the bfloat16 values (words) from word Offs[i] of Src on, two
// to a uint32, the even word in the low half (the layout of a row of
// values converted by BF16Words).
type WordRows struct {
	Src  []uint32
	Offs []int32
}

// word returns word w of s.
func word(s []uint32, w int) uint32 { return s[w/2] >> (16 * (w % 2)) & 0xffff }

// SgemmBF16WordRows sets C = A·B + beta·C for the m×n matrix C (row
// stride ldc), on the calling goroutine: row i of A is the k bfloat16
// values of a's row i, B is k×n, stored row-major with row stride ldb and
// rounded to bfloat16 as by SgemmBF16. The values are those of SgemmBF16
// (alpha 1) with A the float32 matrix of a's values, bit for bit, except
// that for odd k each row's pair in its last block holds the value after
// the row (read, so it must lie in Src) against the zero that pads B: it
// changes the result only if it is infinite or NaN, or the sign of an
// exactly zero sum. A convolution's weight gradient reads the rows of its
// im2col matrix this way, as shifted views of one converted image.
func SgemmBF16WordRows(m, n, k int, a WordRows, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if len(a.Offs) < m {
		panic(fmt.Sprintf("blas.SgemmBF16WordRows: %d row offsets for %d rows", len(a.Offs), m))
	}
	checkMat("SgemmBF16WordRows", "B", false, m, n, k, k, n, b, ldb)
	checkMat("SgemmBF16WordRows", "C", false, m, n, k, m, n, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	for i, o := range a.Offs[:m] {
		if o < 0 || int(o)+roundUp(k, 2) > 2*len(a.Src) {
			panic(fmt.Sprintf("blas.SgemmBF16WordRows: row %d at word %d..%d lies outside the %d words of Src", i, o, int(o)+roundUp(k, 2), 2*len(a.Src)))
		}
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	panels := ceilDiv(n, bf16NR)
	bp := getU32(&bf16BFree, panels*bf16KC/2*bf16NR)
	defer bf16BFree.put(bp)
	ap := getU32(&bf16AFree, bf16KC/2*bf16MR)
	defer bf16AFree.put(ap)
	var offs [bf16MR]int32
	for pc := 0; pc < k; pc += bf16KC {
		kcb := min(bf16KC, k-pc)
		kpb := (kcb + 1) / 2
		betaEff := beta
		if pc > 0 {
			betaEff = 1
		}
		bf16PackB(false, b, ldb, 0, n, pc, kcb, 0, panels, *bp)
		for t := 0; t*bf16MR < m; t++ {
			rows := min(bf16MR, m-t*bf16MR)
			for r := range offs {
				offs[r] = a.Offs[t*bf16MR+min(r, rows-1)] + int32(pc)
			}
			if !useBF16 {
				// The Go loops: the rows' pairs copied into a panel.
				panel := (*ap)[:kpb*bf16MR]
				clear(panel)
				for r := 0; r < rows; r++ {
					for q := 0; q < kpb; q++ {
						w := int(offs[r]) + 2*q
						panel[r*kpb+q] = word(a.Src, w) | word(a.Src, w+1)<<16
					}
				}
			}
			for u := 0; u < panels; u++ {
				cols := min(bf16NR, n-u*bf16NR)
				bpanel := (*bp)[u*kpb*bf16NR : (u+1)*kpb*bf16NR]
				cc := c[t*bf16MR*ldc+u*bf16NR:]
				if !useBF16 {
					bf16Kernel(kpb, (*ap)[:kpb*bf16MR], bpanel, cc, ldc, 1, betaEff, rows, cols)
					continue
				}
				_ = cc[(rows-1)*ldc+cols-1]
				bf16ARowsKernelAsm(kpb, a.Src, &offs, bpanel, cc, ldc, betaEff, rows, cols)
			}
		}
	}
}

// BF16Words converts the n values of src to bfloat16 words (ToBF16), two
// to a uint32 of dst, the even one in the low half; an odd n leaves a zero
// high half in the last.
func BF16Words(dst []uint32, src []float32) {
	n := len(src)
	if n == 0 {
		return
	}
	_ = dst[(n+1)/2-1]
	if bf16PackRowsAsm(src, n, n, 1, dst) {
		return
	}
	bf16PackRow(src, dst[:(n+1)/2])
}

// BF16PlaneRows is BF16Pairs for rows rows of w values: row r of src
// (values src[r*sstride:], paired with src[ld+r*sstride:] unless single)
// goes to dst[r*dstride:], w words.
func BF16PlaneRows(dst []uint32, dstride int, src []float32, sstride, ld, rows, w int, single bool) {
	if rows == 0 || w == 0 {
		return
	}
	_ = dst[(rows-1)*dstride+w-1]
	if single {
		_ = src[(rows-1)*sstride+w-1]
	} else {
		_ = src[ld+(rows-1)*sstride+w-1]
	}
	if bf16PlaneRowsAsm(dst, dstride, src, sstride, ld, rows, w, single) {
		return
	}
	for r := 0; r < rows; r++ {
		d := dst[r*dstride : r*dstride+w]
		for j := range d {
			var y float32
			if !single {
				y = src[ld+r*sstride+j]
			}
			d[j] = pairOf(src[r*sstride+j], y)
		}
	}
}
