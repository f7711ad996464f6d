package blas

import "unsafe"

// packA packs rows [i0, i0+mcb) and columns [pc, pc+kcb) of op(A) into dst
// as consecutive panels of mr rows: panel t holds, for each p in [0, kcb),
// the mr values op(A)[i0+t·mr+r][pc+p], with rows past the end zero.
func packA(transA bool, a []float32, lda, i0, mcb, pc, kcb, mr int, dst []float32) {
	for t := 0; t*mr < mcb; t++ {
		rows := min(mr, mcb-t*mr)
		panel := dst[t*kcb*mr : (t+1)*kcb*mr]
		base := i0 + t*mr
		if transA {
			// op(A)[i][p] = a[p*lda+i]: each p gives mr contiguous values.
			for p := 0; p < kcb; p++ {
				d := panel[p*mr : p*mr+mr]
				s := a[(pc+p)*lda+base:]
				copy(d[:rows], s[:rows])
				clear(d[rows:])
			}
			continue
		}
		if rows < mr {
			clear(panel)
		}
		// Copy four rows at a time so that each pass reads four
		// sequential streams and writes the panel once.
		r := 0
		for ; r+4 <= rows; r += 4 {
			s0 := a[(base+r)*lda+pc : (base+r)*lda+pc+kcb]
			s1 := a[(base+r+1)*lda+pc : (base+r+1)*lda+pc+kcb]
			s2 := a[(base+r+2)*lda+pc : (base+r+2)*lda+pc+kcb]
			s3 := a[(base+r+3)*lda+pc : (base+r+3)*lda+pc+kcb]
			d := panel[r:]
			for p := range s0 {
				q := d[p*mr : p*mr+4 : p*mr+4]
				q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
			}
		}
		for ; r < rows; r++ {
			s := a[(base+r)*lda+pc : (base+r)*lda+pc+kcb]
			for p, v := range s {
				panel[p*mr+r] = v
			}
		}
	}
}

// packB packs panels [t0, t1) of nr columns each, starting at column j0, of
// rows [pc, pc+kcb) of the ncb columns of op(B) starting at j0 into dst:
// panel t holds, for each p in [0, kcb), the nr values op(B)[pc+p][j0+t·nr+c],
// with columns past ncb zero.
func packB(transB bool, b []float32, ldb, j0, ncb, pc, kcb, nr, t0, t1 int, dst []float32) {
	for t := t0; t < t1; t++ {
		cols := min(nr, ncb-t*nr)
		panel := dst[t*kcb*nr : (t+1)*kcb*nr]
		base := j0 + t*nr
		if !transB {
			for p := 0; p < kcb; p++ {
				d := panel[p*nr : p*nr+nr]
				s := b[(pc+p)*ldb+base:]
				copy(d[:cols], s[:cols])
				clear(d[cols:])
			}
			continue
		}
		// op(B)[p][j] = b[j*ldb+p]: each column is a contiguous row of b.
		for cc := 0; cc < cols; cc++ {
			s := b[(base+cc)*ldb+pc : (base+cc)*ldb+pc+kcb]
			for p, v := range s {
				panel[p*nr+cc] = v
			}
		}
		if cols < nr {
			for p := 0; p < kcb; p++ {
				clear(panel[p*nr+cols : p*nr+nr])
			}
		}
	}
}

// alignedFloats returns a zeroed slice of n float32 values whose first
// element is 64-byte aligned.
func alignedFloats(n int) []float32 {
	s := make([]float32, n+16)
	off := int(uintptr(unsafe.Pointer(&s[0]))&63) / 4
	if off != 0 {
		off = 16 - off
	}
	return s[off : off+n : off+n]
}
