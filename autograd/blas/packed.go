package blas

import "fmt"

// PackedA is the left operand op(A) of products C = alpha·op(A)·op(B) +
// beta·C packed once, in the layout an engine's micro-kernel reads, so
// that products of the same op(A) with many matrices B do not pack it
// again each time. Its products are bit-identical to Sgemm's with the
// unpacked matrix and the same transA, whatever the number of workers.
//
// The m×k matrix is held as blocks of K, each a column of panels of mr
// rows; the length of the blocks is the one Sgemm uses for op(B) = B and
// at least nr columns. Products whose blocking differs (op(B) = Bᵀ, or
// fewer columns) copy the blocks they need into place, as Sgemm packs
// them, and products that Sgemm computes as dot products of the rows of
// A and B (op(A) = A with at most 64 rows, op(B) = Bᵀ) unpack the rows.
type PackedA struct {
	kern   *microKernel
	transA bool // the layout of the stored matrix it was packed from
	m, k   int
	kc     int // length of the blocks of K
	data   []float32
}

// PackedASize returns how many float32 values a PackedA of an m×k op(A)
// holds with e's kernel.
func (e *Engine) PackedASize(m, k int) int {
	if m < 0 || k < 0 {
		panic(fmt.Sprintf("blas.PackedASize: negative dimension m=%d k=%d", m, k))
	}
	return roundUp(m, e.k.mr) * k
}

// NewPackedA returns a PackedA for e's kernel of op(A), which is m×k, whose
// contents are undefined until every column has been packed with Pack
// from a stored matrix A (transA) or op(A) = A. It is held in buf when
// buf's capacity is at least PackedASize(m, k), else in a new slice.
func (e *Engine) NewPackedA(transA bool, m, k int, buf []float32) *PackedA {
	size := e.PackedASize(m, k)
	if cap(buf) < size {
		buf = alignedFloats(size)
	}
	kern := e.k
	kc := kern.kc
	if kern.strided && m <= kern.inPlaceM {
		kc = kern.inPlaceKC
	}
	return &PackedA{kern: kern, transA: transA, m: m, k: k, kc: kc, data: buf[:size]}
}

// PackA returns op(A), which is m×k, packed for e's kernel; lda is the row
// stride of the stored A.
func (e *Engine) PackA(transA bool, m, k int, a []float32, lda int) *PackedA {
	pa := e.NewPackedA(transA, m, k, nil)
	pa.Pack(a, lda, 0, k)
	return pa
}

// Pack packs columns [k0, k1) of op(A) from the stored matrix a with row
// stride lda, whose first row (transA) or column holds column k0: op(A)'s
// element (i, j) is a[(j−k0)·lda+i] if the PackedA was made with transA,
// else a[i·lda+j−k0]. Different column ranges may be packed concurrently.
func (pa *PackedA) Pack(a []float32, lda, k0, k1 int) {
	transA := pa.transA
	if k0 < 0 || k1 < k0 || k1 > pa.k {
		panic(fmt.Sprintf("blas.PackedA.Pack: columns [%d, %d) outside the %d columns of the %dx%d matrix", k0, k1, pa.k, pa.m, pa.k))
	}
	rows, cols := pa.m, k1-k0
	if transA {
		rows, cols = cols, rows
	}
	checkMat("PackedA.Pack", "A", transA, pa.m, 0, k1-k0, rows, cols, a, lda)
	mr, mp := pa.kern.mr, roundUp(pa.m, pa.kern.mr)
	for q0 := k0; q0 < k1; {
		bs := q0 / pa.kc * pa.kc // first column of q0's block
		kcb := min(pa.kc, pa.k-bs)
		q1 := min(k1, bs+kcb)
		blk := pa.data[bs*mp : bs*mp+mp*kcb]
		if q0 == bs && q1 == bs+kcb {
			packA(transA, a, lda, 0, pa.m, q0-k0, kcb, mr, blk)
		} else if transA {
			packRows(a[(q0-k0)*lda:], lda, q1-q0, pa.m, mr, kcb, blk[(q0-bs)*mr:])
		} else {
			for t := 0; t*mr < pa.m; t++ {
				w := min(mr, pa.m-t*mr)
				packStrided(a[t*mr*lda+q0-k0:], lda, q1-q0, w, mr, blk[t*kcb*mr+(q0-bs)*mr:])
			}
		}
		q0 = q1
	}
}

// packRows hands each of np rows of m values, src[p·ld:][:m], to the
// panels of mr values at dst, kcb·mr apart: value i of row p goes to
// dst[(i/mr)·kcb·mr + p·mr + i%mr], and the last panel's values past m are
// zero. Walking each row once from left to right keeps the reads
// sequential when only a few rows of a block are packed at a time.
func packRows(src []float32, ld, np, m, mr, kcb int, dst []float32) {
	full, step := m/mr, kcb*mr
	for p := 0; p < np; p++ {
		row, d := src[p*ld:p*ld+m], dst[p*mr:]
		t := 0
		switch mr {
		case 12:
			for ; t < full; t++ {
				*(*[12]float32)(d[t*step:]) = *(*[12]float32)(row[t*12:])
			}
		case 8:
			for ; t < full; t++ {
				*(*[8]float32)(d[t*step:]) = *(*[8]float32)(row[t*8:])
			}
		case 6:
			for ; t < full; t++ {
				*(*[6]float32)(d[t*step:]) = *(*[6]float32)(row[t*6:])
			}
		}
		for ; t*mr < m; t++ {
			w := min(mr, m-t*mr)
			panel := d[t*step : t*step+mr]
			copy(panel, row[t*mr:t*mr+w])
			clear(panel[w:])
		}
	}
}

// block returns rows [i0, i0+rows) and columns [pc, pc+kcb) of the
// matrix packed as packA packs them (i0 is a multiple of mr): a part of
// pa.data where the block is one of pa's, else a copy in buf.
func (pa *PackedA) block(i0, rows, pc, kcb int, buf []float32) []float32 {
	mr, mp := pa.kern.mr, roundUp(pa.m, pa.kern.mr)
	t0, t1 := i0/mr, ceilDiv(i0+rows, mr)
	if pc%pa.kc == 0 && kcb == min(pa.kc, pa.k-pc) {
		return pa.data[pc*mp+t0*kcb*mr : pc*mp+t1*kcb*mr]
	}
	for t := t0; t < t1; t++ {
		dst := buf[(t-t0)*kcb*mr : (t-t0+1)*kcb*mr]
		for q := pc; q < pc+kcb; {
			bs := q / pa.kc * pa.kc
			bkcb := min(pa.kc, pa.k-bs)
			end := min(bs+bkcb, pc+kcb)
			src := pa.data[bs*mp+t*bkcb*mr:]
			copy(dst[(q-pc)*mr:(end-pc)*mr], src[(q-bs)*mr:(end-bs)*mr])
			q = end
		}
	}
	return buf
}

// unpack writes op(A) into rows of pa.k values.
func (pa *PackedA) unpack(rows []float32) {
	mr, mp := pa.kern.mr, roundUp(pa.m, pa.kern.mr)
	for bs := 0; bs < pa.k; bs += pa.kc {
		kcb := min(pa.kc, pa.k-bs)
		for i := 0; i < pa.m; i++ {
			src := pa.data[bs*mp+(i/mr)*kcb*mr+i%mr:]
			row := rows[i*pa.k+bs : i*pa.k+bs+kcb]
			for p := range row {
				row[p] = src[p*mr]
			}
		}
	}
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C with the packed op(A)
// (m×k), op(B) (k×n) and C (m×n) as the engine's Sgemm does, with
// identical results. It panics if n is negative, a leading dimension is
// too small or a slice is too short.
func (pa *PackedA) Sgemm(transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	pa.check("PackedA.Sgemm", transB, n, b, ldb, c, ldc)
	gemmFrom(pa.kern, true, aSource{transA: pa.transA, pa: pa}, transB, pa.m, n, pa.k, alpha, b, ldb, beta, c, ldc)
}

// SgemmSerial is Sgemm run entirely on the calling goroutine, like the
// engine's SgemmSerial.
func (pa *PackedA) SgemmSerial(transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	pa.check("PackedA.SgemmSerial", transB, n, b, ldb, c, ldc)
	gemmFrom(pa.kern, false, aSource{transA: pa.transA, pa: pa}, transB, pa.m, n, pa.k, alpha, b, ldb, beta, c, ldc)
}

// check panics unless op(B) and C fit the product; fn names the method
// (a constant: a name built here would allocate on every call).
func (pa *PackedA) check(fn string, transB bool, n int, b []float32, ldb int, c []float32, ldc int) {
	if n < 0 {
		panic(fmt.Sprintf("blas.%s: negative dimension n=%d (m=%d k=%d)", fn, n, pa.m, pa.k))
	}
	br, bc := pa.k, n
	if transB {
		br, bc = n, pa.k
	}
	checkMat(fn, "B", transB, pa.m, n, pa.k, br, bc, b, ldb)
	checkMat(fn, "C", false, pa.m, n, pa.k, pa.m, n, c, ldc)
}
