package kernels

// This file multiplies a sparse matrix in compressed-row form by a dense
// matrix (SparseRows): the kernel of the sparse-weight inference path of
// convolutions and linear layers.
//
// Row i of the sparse matrix holds the values val[rowPtr[i]:rowPtr[i+1]],
// and value t multiplies the dense row that starts at element off[t] of b.
// Giving element offsets rather than column indices lets the caller point
// the rows anywhere in b: into an im2col matrix (off = k·ld) or straight
// into a zero-padded image (see autograd's sparse convolution).
//
// The AVX2 kernel (spmm_amd64.s) and the Go loop compute exactly the same
// values: each output element starts from its value in dst and adds the
// products val[t]·b[off[t]+j] in the order t = rowPtr[i], rowPtr[i]+1, ...,
// every product rounded to float32 before it is added (no fused
// multiply-add; the Go loop converts every product explicitly so that the
// compiler cannot fuse it, as it may with GOAMD64=v3). Results therefore do
// not depend on the CPU.

import "fmt"

// SparseRows adds the product of sparse rows [lo, hi) and b to dst: for
// each row i and column j in [0, n),
//
//	dst[(i−lo)·ldd + j] += Σ_t val[t]·b[off[t] + j],  t in [rowPtr[i], rowPtr[i+1])
//
// If init is not nil, row i starts from init[i] instead of its value in
// dst, which is then not read (the bias of a convolution, without a pass
// that fills dst with it first).
//
// The product runs in blocks of colBlock columns and, when span > 0, of
// terms whose offsets lie in one window [w·span, (w+1)·span), so that the
// part of b a block reads stays in the cache while every row passes over
// it; the offsets of every row must then not decrease. Each element still
// adds its terms in order t, so the blocking does not change any result.
// It panics if an offset or an output row falls outside b or dst, or, with
// span > 0, the offsets of a row decrease.
func SparseRows(dst []float32, ldd, n int, rowPtr []int32, off []int, val []float32, b, init []float32, lo, hi, span int) {
	if n <= 0 || lo >= hi {
		return
	}
	if lo < 0 || hi >= len(rowPtr) || ldd < n || (hi-lo-1)*ldd+n > len(dst) {
		panic(fmt.Sprintf("spmm.Rows: rows [%d, %d) of %d with n %d and ldd %d do not fit dst of %d elements",
			lo, hi, len(rowPtr)-1, n, ldd, len(dst)))
	}
	if init != nil && len(init) < hi {
		panic(fmt.Sprintf("spmm.Rows: %d initial values for rows [%d, %d)", len(init), lo, hi))
	}
	first, last := int(rowPtr[lo]), int(rowPtr[hi])
	if first < 0 || first > last || last > len(off) || last > len(val) {
		panic(fmt.Sprintf("spmm.Rows: row pointers [%d, %d) outside the %d offsets and %d values", first, last, len(off), len(val)))
	}
	maxOff := 0
	for i := lo; i < hi; i++ {
		p, q := int(rowPtr[i]), int(rowPtr[i+1])
		if p > q || p < first || q > last {
			panic(fmt.Sprintf("spmm.Rows: row %d has pointers %d, %d outside [%d, %d]", i, p, q, first, last))
		}
		prev := 0
		for _, o := range off[p:q] {
			if o < 0 || o > len(b)-n || span > 0 && o < prev {
				panic(fmt.Sprintf("spmm.Rows: offset %d with %d columns outside b of %d elements or below the previous offset %d of row %d", o, n, len(b), prev, i))
			}
			prev = o
			maxOff = max(maxOff, o)
		}
	}
	if span <= 0 {
		span = maxOff + 1
	}
	pos := make([]int, hi-lo)
	for c0 := 0; c0 < n; c0 += colBlock {
		c1 := min(c0+colBlock, n)
		m := (c1 - c0) &^ 7 // columns the assembly kernel handles
		if !useAsm || !spmmAsm {
			m = 0
		}
		for i := range pos {
			pos[i] = int(rowPtr[lo+i])
			if init != nil && rowPtr[lo+i] == rowPtr[lo+i+1] {
				Fill(dst[i*ldd+c0:i*ldd+c1], init[lo+i]) // no terms
			}
		}
		for end := span; end-span <= maxOff; end += span {
			for i := lo; i < hi; i++ {
				p, q := pos[i-lo], int(rowPtr[i+1])
				e := p
				for e < q && off[e] < end {
					e++
				}
				if e == p {
					continue
				}
				pos[i-lo] = e
				var start *float32 // the row's first terms start from init
				if init != nil && p == int(rowPtr[i]) {
					start = &init[i]
				}
				d := dst[(i-lo)*ldd+c0 : (i-lo)*ldd+c1]
				if m > 0 {
					rowAVX2(&d[0], m, &val[p], &off[p], e-p, &b[c0], start)
				}
				rowGo(d[m:], val[p:e], off[p:e], b, c0+m, start)
			}
		}
	}
}

// Fill sets every element of d to v. It stores whole blocks of 8 values,
// which compile to vector moves (a plain loop stores one value at a time).
func Fill(d []float32, v float32) {
	block := [8]float32{v, v, v, v, v, v, v, v}
	n := len(d) &^ 7
	for i := 0; i < n; i += 8 {
		*(*[8]float32)(d[i:]) = block
	}
	for i := n; i < len(d); i++ {
		d[i] = v
	}
}

// colBlock is the number of columns Rows processes at a time.
const colBlock = 256

// rowGo adds Σ_t val[t]·b[off[t]+base+j] to d[j] (to *init instead, if
// init is not nil), term by term in order.
func rowGo(d, val []float32, off []int, b []float32, base int, init *float32) {
	if len(d) == 0 {
		return
	}
	if init != nil {
		Fill(d, *init)
	}
	if len(d) == 1 {
		s := d[0]
		for t, v := range val {
			s += float32(v * b[off[t]+base])
		}
		d[0] = s
		return
	}
	for t, v := range val {
		src := b[off[t]+base : off[t]+base+len(d)]
		for j, x := range src {
			d[j] += float32(v * x)
		}
	}
}
