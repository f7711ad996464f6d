package blas

import "unsafe"

// gatherPack (packStrided) and copyPack (np consecutive panels of w
// columns packed as packContiguous does, each row of src walked once) are
// the assembly packing routines where the CPU has them (pack_amd64.go,
// implementation "avx512" of internal/impl) and report false otherwise,
// having done nothing, also for arguments they cannot handle. Packing only
// moves values, so every kernel's products are the same with and without
// them.

// packA packs rows [i0, i0+mcb) and columns [pc, pc+kcb) of op(A) into dst
// as consecutive panels of mr rows: panel t holds, for each p in [0, kcb),
// the mr values op(A)[i0+t·mr+r][pc+p], with rows past the end zero.
func packA(transA bool, a []float32, lda, i0, mcb, pc, kcb, mr int, dst []float32) {
	t := 0
	if full := mcb / mr; transA && full > 0 &&
		copyPack(a[pc*lda+i0:], lda, kcb, full, mr, dst) {
		t = full
	}
	for ; t*mr < mcb; t++ {
		rows := min(mr, mcb-t*mr)
		panel := dst[t*kcb*mr : (t+1)*kcb*mr]
		base := i0 + t*mr
		if transA {
			// op(A)[i][p] = a[p*lda+i]: each p gives rows contiguous values.
			packContiguous(a[pc*lda+base:], lda, kcb, rows, mr, panel)
		} else {
			packStrided(a[base*lda+pc:], lda, kcb, rows, mr, panel)
		}
	}
}

// packB packs panels [t0, t1) of nr columns each, starting at column j0, of
// rows [pc, pc+kcb) of the ncb columns of op(B) starting at j0 into dst:
// panel t holds, for each p in [0, kcb), the nr values op(B)[pc+p][j0+t·nr+c],
// with columns past ncb zero.
func packB(transB bool, b []float32, ldb, j0, ncb, pc, kcb, nr, t0, t1 int, dst []float32) {
	if full := min(t1, ncb/nr) - t0; !transB && full > 0 {
		src := b[pc*ldb+j0+t0*nr:]
		out := dst[t0*kcb*nr:]
		if !copyPack(src, ldb, kcb, full, nr, out) {
			// Walk each row of B once, from left to right, which the
			// hardware prefetchers follow, handing nr values to every
			// panel.
			for p := 0; p < kcb; p++ {
				row := src[p*ldb : p*ldb+full*nr]
				for t := 0; t < full; t++ {
					copy(out[t*kcb*nr+p*nr:t*kcb*nr+p*nr+nr], row[t*nr:])
				}
			}
		}
		t0 += full
	}
	for t := t0; t < t1; t++ {
		cols := min(nr, ncb-t*nr)
		panel := dst[t*kcb*nr : (t+1)*kcb*nr]
		base := j0 + t*nr
		if transB {
			// op(B)[p][j] = b[j*ldb+p]: each column is a row of b.
			packStrided(b[base*ldb+pc:], ldb, kcb, cols, nr, panel)
		} else {
			packContiguous(b[pc*ldb+base:], ldb, kcb, cols, nr, panel)
		}
	}
}

// packContiguous copies kcb groups of w <= width values, src[p*ld:][:w]
// for each p, into dst[p*width:], zeroing the rest of each group.
func packContiguous(src []float32, ld, kcb, w, width int, dst []float32) {
	if w == width {
		switch width {
		case 32:
			for p := 0; p < kcb; p++ {
				*(*[32]float32)(dst[p*32:]) = *(*[32]float32)(src[p*ld:])
			}
			return
		case 16:
			for p := 0; p < kcb; p++ {
				*(*[16]float32)(dst[p*16:]) = *(*[16]float32)(src[p*ld:])
			}
			return
		case 12:
			for p := 0; p < kcb; p++ {
				*(*[12]float32)(dst[p*12:]) = *(*[12]float32)(src[p*ld:])
			}
			return
		case 6:
			for p := 0; p < kcb; p++ {
				*(*[6]float32)(dst[p*6:]) = *(*[6]float32)(src[p*ld:])
			}
			return
		case 4:
			for p := 0; p < kcb; p++ {
				*(*[4]float32)(dst[p*4:]) = *(*[4]float32)(src[p*ld:])
			}
			return
		case 2:
			for p := 0; p < kcb; p++ {
				*(*[2]float32)(dst[p*2:]) = *(*[2]float32)(src[p*ld:])
			}
			return
		}
	}
	for p := 0; p < kcb; p++ {
		d := dst[p*width : p*width+width]
		copy(d[:w], src[p*ld:p*ld+w])
		clear(d[w:])
	}
}

// packStrided transposes: for each of w <= width rows r of src (ld apart,
// kcb values each) it writes src[r*ld+p] to dst[p*width+r], zeroing
// positions r >= w.
func packStrided(src []float32, ld, kcb, w, width int, dst []float32) {
	if gatherPack(src, ld, kcb, w, width, dst) {
		return
	}
	dst = dst[:kcb*width]
	if w < width {
		clear(dst)
	}
	if w == 12 && width == 12 {
		s0, s1, s2, s3 := src[:kcb], src[ld:ld+kcb], src[2*ld:2*ld+kcb], src[3*ld:3*ld+kcb]
		s4, s5, s6, s7 := src[4*ld:4*ld+kcb], src[5*ld:5*ld+kcb], src[6*ld:6*ld+kcb], src[7*ld:7*ld+kcb]
		s8, s9, s10, s11 := src[8*ld:8*ld+kcb], src[9*ld:9*ld+kcb], src[10*ld:10*ld+kcb], src[11*ld:11*ld+kcb]
		for p := range s0 {
			q := (*[12]float32)(dst[p*12:])
			q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
			q[4], q[5], q[6], q[7] = s4[p], s5[p], s6[p], s7[p]
			q[8], q[9], q[10], q[11] = s8[p], s9[p], s10[p], s11[p]
		}
		return
	}
	// Four rows at a time: four sequential read streams, and each group of
	// dst is written in runs of four.
	r := 0
	for ; r+4 <= w; r += 4 {
		s0 := src[r*ld : r*ld+kcb]
		s1 := src[(r+1)*ld : (r+1)*ld+kcb]
		s2 := src[(r+2)*ld : (r+2)*ld+kcb]
		s3 := src[(r+3)*ld : (r+3)*ld+kcb]
		d := dst[r:]
		for p := range s0 {
			q := (*[4]float32)(d[p*width:])
			q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; r < w; r++ {
		for p, v := range src[r*ld : r*ld+kcb] {
			dst[p*width+r] = v
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
