package kernels

import "fmt"

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
