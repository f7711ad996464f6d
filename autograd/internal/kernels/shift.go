package kernels

import (
	"fmt"
	"sync"
)

// ShiftStores stores c channels of n values, each in three places: value
// i of channel k, v = x[k·ldx + i] through the epilogue e (plus the
// residual r[k·ldr + i] for AddReLU; Plain: v itself), goes to
// dst[img + k·ld + i], dst[left + k·ld + i + 1] and dst[right + k·ld + i];
// then dst[left + k·ld + j·w] and dst[right + k·ld + j·w] are set to zero
// for j in [0, n/w]. For a channel image of rows of w values at img, left
// is then the image one column to the right and right (one value
// earlier) one column to the left, each with a zero column at the border:
// the three planes of package nchwc's Shifted layout, written in one pass.
// n must be a multiple of w; the three output ranges of a channel must
// not overlap. It panics if a range falls outside its slice.
func ShiftStores(dst []float32, img, left, right, ld int, x []float32, ldx int, r []float32, ldr int, c, n, w int, e Epilogue) {
	if c <= 0 || n <= 0 {
		return
	}
	last := (c - 1) * ld
	if w <= 0 || n%w != 0 || img < 0 || left < 0 || right < 0 || ld < 0 ||
		last+max(img+n, left+n+1, right+n+1) > len(dst) || (c-1)*ldx+n > len(x) ||
		(e == AddReLU && (c-1)*ldr+n > len(r)) {
		panic(fmt.Sprintf("kernels.ShiftStores: %d channels of %d values (rows of %d) do not fit", c, n, w))
	}
	if useAsm && shiftAsm && n%8 == 0 {
		var rp *float32
		if e == AddReLU {
			rp = &r[0]
		}
		const f = 4 // bytes per value
		shiftStoresAsm(&dst[img], &dst[left], &dst[right], ld*f, &x[0], ldx*f, rp, ldr*f, c, n, w*f, int(e))
		return
	}
	for k := range c {
		d, s := dst[k*ld:], x[k*ldx:k*ldx+n]
		for i, v := range s {
			if e == AddReLU {
				v += r[k*ldr+i]
			}
			if e != Plain && v < 0 { // as Affine: NaN and −0 pass
				v = 0
			}
			d[img+i], d[left+i+1], d[right+i] = v, v, v
		}
		for j := 0; j <= n; j += w {
			d[left+j], d[right+j] = 0, 0
		}
	}
}

// SplitStores writes c channel images of h rows of w values (channel k's
// at x[k·ldx]) into the six planes of package nchwc's Split layout,
// channel k's at dst[at + k·ld]: plane (kx, ph) at offset (2·kx+ph)·ps
// holds x(2r+ph−1, 2j+kx−1) at row r, column j (⌈w/2⌉ columns), for
// every image row 2r+ph−1; the columns that lie outside the image (j = 0
// of the kx = 0 planes, and for odd w the last of the kx = 2 planes) are
// set to zero; the rows outside the image are not written. It panics if
// a range falls outside its slice.
func SplitStores(dst []float32, at, ps, ld int, x []float32, ldx int, c, h, w int) {
	if c <= 0 || h <= 0 {
		return
	}
	cols, rows := (w+1)/2, (h+1)/2+1
	if w <= 0 || at < 0 || ps < rows*cols || ld < 6*ps ||
		at+(c-1)*ld+5*ps+rows*cols > len(dst) || (c-1)*ldx+h*w > len(x) {
		panic(fmt.Sprintf("kernels.SplitStores: %d channels of %d×%d values do not fit", c, h, w))
	}
	if useAsm && shiftAsm && w%16 == 0 {
		const f = 4 // bytes per value
		splitStoresAsm(&dst[at], ld*f, ps*f, &x[0], ldx*f, c, h, cols*f)
		return
	}
	for k := range c {
		d, img := dst[at+k*ld:], x[k*ldx:k*ldx+h*w]
		for y := range h {
			ph, r := (y+1)%2, (y+1)/2
			o := ph*ps + r*cols
			d0, d1, d2 := d[o:o+cols], d[o+2*ps:o+2*ps+cols], d[o+4*ps:o+4*ps+cols]
			row := img[y*w : y*w+w]
			d0[0] = 0
			for j := range cols {
				e, od := row[2*j], float32(0)
				if 2*j+1 < w {
					od = row[2*j+1]
				}
				d1[j], d2[j] = e, od
				if j+1 < cols {
					d0[j+1] = od
				}
			}
		}
	}
}

// SparseShiftRows computes the rows [lo, hi) of the product of m and b
// as SparseRowsBlock(y, n, n, m, b, init, lo, hi, 0, block) does, each
// row starting from init (not nil), and stores them as ShiftStores(dst,
// img, left, right, ld, y, n, r, ldr, hi−lo, n, w, e) does: the same
// bits in the same places. Where it can (AVX-512, or AVX2 for n a
// multiple of 8; blocks of at most 64 columns) it stores each block of a
// row from the registers that summed it, without y, whose contents are
// then undefined; elsewhere it runs the two. y holds at least (hi−lo)·n
// values.
func SparseShiftRows(dst []float32, img, left, right, ld int, y []float32, m *CSR, b, init []float32, lo, hi, n, w int, r []float32, ldr int, e Epilogue, block int) {
	if n <= 0 || lo >= hi {
		return
	}
	if init == nil || len(init) < hi {
		panic(fmt.Sprintf("kernels.SparseShiftRows: initial values for rows [%d, %d): %d", lo, hi, len(init)))
	}
	avx2 := !useAVX512 && useAsm && spmmAsm && n%8 == 0 && block <= 8*kmaxShiftAVX2
	if m.terms == nil || !(useAVX512 && block <= 16*kmaxShift || avx2) || n%w != 0 {
		SparseRowsBlock(y, n, n, m, b, init, lo, hi, 0, block)
		ShiftStores(dst, img, left, right, ld, y, n, r, ldr, hi-lo, n, w, e)
		return
	}
	c := hi - lo
	if lo < 0 || hi > m.Rows() || block <= 0 || block%16 != 0 || w <= 0 || img < 0 || left < 0 || right < 0 || ld < 0 ||
		(c-1)*ld+max(img+n, left+n+1, right+n+1) > len(dst) || (e == AddReLU && (c-1)*ldr+n > len(r)) {
		panic(fmt.Sprintf("kernels.SparseShiftRows: rows [%d, %d) of %d, %d columns in blocks of %d (rows of %d) do not fit", lo, hi, m.Rows(), n, block, w))
	}
	tp, rp, flags := storeArgs("SparseShiftRows", m, b, r, lo, hi, n, e)
	if avx2 {
		shiftRowsAVX2Blocks(dst, img, left, right, ld, m, b, init, lo, hi, n, w, r, tp, rp, ldr, flags, block)
	} else {
		shiftRowsAVX512Blocks(dst, img, left, right, ld, m, b, init, lo, hi, n, w, r, tp, rp, ldr, flags, block)
	}
	// The zero columns no lane reaches: left's first and right's last.
	for k := range c {
		dst[left+k*ld], dst[right+k*ld+n] = 0, 0
	}
}

// shiftRowsAVX512Blocks runs SparseShiftRows' blocks on the AVX-512
// kernels.
func shiftRowsAVX512Blocks(dst []float32, img, left, right, ld int, m *CSR, b, init []float32, lo, hi, n, w int, r []float32, tp *uint64, rp *float32, ldr, flags, block int) {
	c := hi - lo
	var masks [2 * kmaxShift]uint16
	at := -1 // the column of the block whose masks are in masks
	for c0 := 0; c0 < n; c0 += block {
		vec := min(block, n-c0)
		nv := (vec + 15) / 16
		// Each vector's lanes of column w−1 (left: they land on the next
		// row's zero column) and of column 0 (right: on the previous
		// row's), which store zeros; the same for every block that starts
		// at the same column.
		if x := c0 % w; x != at {
			at = x
			for i := range kmaxShift {
				m0, m2 := uint16(0xffff), uint16(0xffff)
				for l := range 16 {
					if x == w-1 {
						m0 &^= 1 << l
					}
					if x == 0 {
						m2 &^= 1 << l
					}
					if x++; x == w {
						x = 0
					}
				}
				masks[2*i], masks[2*i+1] = m0, m2
			}
		}
		var rc *float32
		if rp != nil {
			rc = &r[c0]
		}
		shiftRowsAVX512(nv, &dst[left+c0+1], &dst[img+c0], &dst[right+c0], 4*ld, &m.rowPtr[lo], tp, c,
			&b[c0], &init[lo], rc, ldr, &masks[0], flags|(1<<(vec-16*(nv-1))-1))
	}
}

// shiftRowsAVX2Blocks runs SparseShiftRows' blocks (n a multiple of 8)
// on the AVX2 kernels, whose masks are lanes of 0 or all ones.
func shiftRowsAVX2Blocks(dst []float32, img, left, right, ld int, m *CSR, b, init []float32, lo, hi, n, w int, r []float32, tp *uint64, rp *float32, ldr, flags, block int) {
	c := hi - lo
	var masks [2 * kmaxShiftAVX2 * 8]uint32
	at := -1 // the column of the block whose masks are in masks
	for c0 := 0; c0 < n; c0 += block {
		vec := min(block, n-c0)
		if x := c0 % w; x != at {
			at = x
			for i := range kmaxShiftAVX2 {
				for l := range 8 {
					m0, m2 := uint32(0xffffffff), uint32(0xffffffff)
					if x == w-1 {
						m0 = 0
					}
					if x == 0 {
						m2 = 0
					}
					masks[16*i+l], masks[16*i+8+l] = m0, m2
					if x++; x == w {
						x = 0
					}
				}
			}
		}
		var rc *float32
		if rp != nil {
			rc = &r[c0]
		}
		shiftRowsAVX2(vec/8, &dst[left+c0+1], &dst[img+c0], &dst[right+c0], 4*ld, &m.rowPtr[lo], tp, c,
			&b[c0], &init[lo], rc, ldr, &masks[0], flags)
	}
}

// Flags of the kernels shiftRowsAVX512 beside the last vector's mask.
const (
	storeReLU = 1 << 16 // values below zero set to zero
	storeFlat = 1 << 17 // d1 alone
	storeZero = 1 << 18 // 0 added first (Affine's map)
)

// storeArgs checks b's offsets for the rows [lo, hi) of m and n columns
// and returns the kernels' arguments: the terms, the residual (AddReLU)
// and the flags of e.
func storeArgs(name string, m *CSR, b, r []float32, lo, hi, n int, e Epilogue) (tp *uint64, rp *float32, flags int) {
	if maxOff := m.largest(lo, hi); maxOff > len(b)-n {
		panic(fmt.Sprintf("kernels.%s: offset %d with %d columns outside b of %d elements", name, maxOff, n, len(b)))
	}
	if len(m.terms) > 0 {
		tp = &m.terms[0]
	}
	if e != Plain {
		flags = storeReLU
	}
	if e == AddReLU {
		rp = &r[0]
	}
	return tp, rp, flags
}

// rowScratch holds the rows of sums of SparseAffineRows without its
// register epilogue.
var rowScratch = sync.Pool{New: func() any { return new([]float32) }}

// SparseAffineRows computes the rows [lo, hi) of the product of m and b
// into dst (row i at dst[(i−lo)·ldd]) as SparseRowsBlock(dst, ldd, n, m,
// b, init, lo, hi, 0, block) does, each row starting from init (not
// nil), followed on each row d by Affine(d, d, rr, 0, 1, 0, e), rr the
// row's residual (r from row lo on, a row every ldr values): the same
// bits. r may be dst itself (each row's residual where its output goes).
// Where it can (AVX-512, or AVX2 for n a multiple of 8; blocks of at
// most 64 columns) it applies the map to the registers that summed a
// block, without a second pass.
func SparseAffineRows(dst []float32, ldd int, m *CSR, b, init []float32, lo, hi, n int, r []float32, ldr int, e Epilogue, block int) {
	if n <= 0 || lo >= hi {
		return
	}
	if init == nil || len(init) < hi {
		panic(fmt.Sprintf("kernels.SparseAffineRows: initial values for rows [%d, %d): %d", lo, hi, len(init)))
	}
	c := hi - lo
	avx2 := !useAVX512 && useAsm && spmmAsm && n%8 == 0 && block <= 8*kmaxShiftAVX2
	if m.terms == nil || !(useAVX512 && block <= 16*kmaxShift || avx2) {
		// Each row's sums go through a row of scratch, so that a residual
		// that is dst itself (a block's output written over its input)
		// is read before it is overwritten.
		sp := rowScratch.Get().(*[]float32)
		if cap(*sp) < n {
			*sp = make([]float32, n)
		}
		sums := (*sp)[:n]
		for i := range c {
			SparseRowsBlock(sums, n, n, m, b, init, lo+i, lo+i+1, 0, block)
			var rr []float32
			if e == AddReLU {
				rr = r[i*ldr : i*ldr+n]
			}
			Affine(dst[i*ldd:i*ldd+n], sums, rr, 0, 1, 0, e)
		}
		rowScratch.Put(sp)
		return
	}
	if lo < 0 || hi > m.Rows() || block <= 0 || block%16 != 0 || ldd < n || (c-1)*ldd+n > len(dst) ||
		(e == AddReLU && (ldr < 0 || (c-1)*ldr+n > len(r))) {
		panic(fmt.Sprintf("kernels.SparseAffineRows: rows [%d, %d) of %d, %d columns in blocks of %d do not fit", lo, hi, m.Rows(), n, block))
	}
	tp, rp, flags := storeArgs("SparseAffineRows", m, b, r, lo, hi, n, e)
	flags |= storeFlat | storeZero
	for c0 := 0; c0 < n; c0 += block {
		vec := min(block, n-c0)
		nv := (vec + 15) / 16
		var rc *float32
		if rp != nil {
			rc = &r[c0]
		}
		d := &dst[c0]
		if avx2 {
			shiftRowsAVX2(vec/8, d, d, d, 4*ldd, &m.rowPtr[lo], tp, c, &b[c0], &init[lo], rc, ldr, nil, flags)
			continue
		}
		shiftRowsAVX512(nv, d, d, d, 4*ldd, &m.rowPtr[lo], tp, c, &b[c0], &init[lo], rc, ldr, nil, flags|(1<<(vec-16*(nv-1))-1))
	}
}
