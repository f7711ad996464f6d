// Package spmm multiplies a sparse matrix in compressed-row form by a dense
// matrix: the kernel of the sparse-weight inference path of convolutions
// and linear layers.
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
package spmm

import "fmt"

// useAsm reports whether the assembly kernel runs. Tests switch it off to
// compare with the Go loop.
var useAsm = haveAVX2

// SetAsm switches the assembly kernel on or off (when the CPU supports it)
// and returns the previous setting. It is meant for tests.
func SetAsm(on bool) (prev bool) {
	prev = useAsm
	useAsm = on && haveAVX2
	return prev
}

// Rows adds the product of sparse rows [lo, hi) and b to dst: for each row
// i and column j in [0, n),
//
//	dst[(i−lo)·ldd + j] += Σ_t val[t]·b[off[t] + j],  t in [rowPtr[i], rowPtr[i+1])
//
// It panics if an offset or the output rows fall outside b or dst.
func Rows(dst []float32, ldd, n int, rowPtr []int32, off []int, val []float32, b []float32, lo, hi int) {
	if n <= 0 || lo >= hi {
		return
	}
	if lo < 0 || hi >= len(rowPtr) || ldd < n || (hi-lo-1)*ldd+n > len(dst) {
		panic(fmt.Sprintf("spmm.Rows: rows [%d, %d) of %d with n %d and ldd %d do not fit dst of %d elements",
			lo, hi, len(rowPtr)-1, n, ldd, len(dst)))
	}
	first, last := int(rowPtr[lo]), int(rowPtr[hi])
	if first < 0 || first > last || last > len(off) || last > len(val) {
		panic(fmt.Sprintf("spmm.Rows: row pointers [%d, %d) outside the %d offsets and %d values", first, last, len(off), len(val)))
	}
	for _, o := range off[first:last] {
		if o < 0 || o > len(b)-n {
			panic(fmt.Sprintf("spmm.Rows: offset %d with %d columns outside b of %d elements", o, n, len(b)))
		}
	}
	// Column blocks keep the dense rows a block reads in the L2 cache
	// while every sparse row passes over them.
	nb := colBlock(n, first, last, hi-lo)
	for c0 := 0; c0 < n; c0 += nb {
		c1 := min(c0+nb, n)
		m := (c1 - c0) &^ 7 // columns the assembly kernel handles
		if !useAsm {
			m = 0
		}
		for i := lo; i < hi; i++ {
			p, q := int(rowPtr[i]), int(rowPtr[i+1])
			if p > q {
				panic(fmt.Sprintf("spmm.Rows: row %d has pointers %d > %d", i, p, q))
			}
			if p == q {
				continue
			}
			d := dst[(i-lo)*ldd+c0 : (i-lo)*ldd+c1]
			if m > 0 {
				rowAVX2(&d[0], m, &val[p], &off[p], q-p, &b[c0])
			}
			rowGo(d[m:], val[p:q], off[p:q], b, c0+m)
		}
	}
}

// colBlock returns the number of columns Rows processes at a time: about
// 256 KiB of dense rows for the distinct rows the terms point to (estimated
// by the average number of terms per row times 4 for the sharing between
// rows), a multiple of 64 columns and at least 64.
func colBlock(n, first, last, rows int) int {
	const budget = 64 << 10 // floats
	touched := max(1, 4*(last-first)/max(rows, 1))
	nb := budget / touched &^ 63
	return max(nb, 64)
}

// rowGo adds Σ_t val[t]·b[off[t]+base+j] to d[j], term by term in order.
func rowGo(d, val []float32, off []int, b []float32, base int) {
	if len(d) == 0 {
		return
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
