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

// CSR is a sparse matrix in compressed-row form whose offsets were
// checked once, by NewCSR: SparseRows then checks a call in time
// proportional to its rows, not to its terms.
type CSR struct {
	rowPtr []int32
	off    []int
	val    []float32
	maxOff []int // per row, the largest offset (−1 for a row without terms)
	sorted bool  // the offsets of every row do not decrease
}

// NewCSR returns the matrix whose row i holds the values
// val[rowPtr[i]:rowPtr[i+1]], value t multiplying the dense row that starts
// at element off[t] of the matrix it is multiplied with (see SparseRows).
// It keeps the slices, which must not change afterwards. It panics if the
// row pointers do not start at 0 or decrease, if they point past off or
// val, or if an offset is negative.
func NewCSR(rowPtr []int32, off []int, val []float32) *CSR {
	if len(rowPtr) == 0 || rowPtr[0] != 0 {
		panic(fmt.Sprintf("spmm.NewCSR: %d row pointers, the first of which must be 0", len(rowPtr)))
	}
	m := &CSR{rowPtr: rowPtr, off: off, val: val, maxOff: make([]int, len(rowPtr)-1), sorted: true}
	for i := range m.maxOff {
		p, q := int(rowPtr[i]), int(rowPtr[i+1])
		if q < p || q > len(off) || q > len(val) {
			panic(fmt.Sprintf("spmm.NewCSR: row %d has pointers %d, %d outside the %d offsets and %d values", i, p, q, len(off), len(val)))
		}
		m.maxOff[i] = -1
		for t, o := range off[p:q] {
			if o < 0 {
				panic(fmt.Sprintf("spmm.NewCSR: negative offset %d in row %d", o, i))
			}
			if t > 0 && o < off[p+t-1] {
				m.sorted = false
			}
			m.maxOff[i] = max(m.maxOff[i], o)
		}
	}
	return m
}

// Rows returns the number of rows.
func (m *CSR) Rows() int { return len(m.maxOff) }

// SparseRows adds the product of the rows [lo, hi) of m and b to dst: for
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
func SparseRows(dst []float32, ldd, n int, m *CSR, b, init []float32, lo, hi, span int) {
	if n <= 0 || lo >= hi {
		return
	}
	if lo < 0 || hi > m.Rows() || ldd < n || (hi-lo-1)*ldd+n > len(dst) {
		panic(fmt.Sprintf("spmm.Rows: rows [%d, %d) of %d with n %d and ldd %d do not fit dst of %d elements",
			lo, hi, m.Rows(), n, ldd, len(dst)))
	}
	if init != nil && len(init) < hi {
		panic(fmt.Sprintf("spmm.Rows: %d initial values for rows [%d, %d)", len(init), lo, hi))
	}
	if span > 0 && !m.sorted {
		panic("spmm.Rows: offset windows need the offsets of every row in increasing order")
	}
	maxOff := -1
	for _, o := range m.maxOff[lo:hi] {
		maxOff = max(maxOff, o)
	}
	if maxOff > len(b)-n {
		panic(fmt.Sprintf("spmm.Rows: offset %d with %d columns outside b of %d elements", maxOff, n, len(b)))
	}
	rowPtr, off, val := m.rowPtr, m.off, m.val
	if span <= 0 {
		span = maxOff + 1
	}
	var posBuf [512]int // rows of the usual layers, without an allocation
	pos := posBuf[:0]
	if hi-lo <= len(posBuf) {
		pos = posBuf[:hi-lo]
	} else {
		pos = make([]int, hi-lo)
	}
	for c0 := 0; c0 < n; c0 += colBlock {
		c1 := min(c0+colBlock, n)
		vec := (c1 - c0) &^ 7 // columns the assembly kernel handles
		if !useAsm || !spmmAsm {
			vec = 0
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
				e := q // one window: every term
				if span <= maxOff {
					for e = p; e < q && off[e] < end; e++ {
					}
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
				if vec > 0 {
					rowAVX2(&d[0], vec, &val[p], &off[p], e-p, &b[c0], start)
				}
				rowGo(d[vec:], val[p:e], off[p:e], b, c0+vec, start)
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
