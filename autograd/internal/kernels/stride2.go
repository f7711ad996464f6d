package kernels

import "fmt"

// Stride2Rows copies every second value of rows rows of src into dst:
// dst[r·ldd + i] = src[r·lds + 2i] for r < rows and i < n, eight values
// at a time in AVX2 registers where the CPU has it (a copy: the same
// bits). It panics if a range falls outside its slice.
func Stride2Rows(dst []float32, ldd int, src []float32, lds, rows, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if (rows-1)*ldd+n > len(dst) || (rows-1)*lds+2*n-1 > len(src) {
		panic(fmt.Sprintf("kernels.Stride2Rows: %d rows of %d values (strides %d, %d) do not fit in %d and %d values", rows, n, ldd, lds, len(dst), len(src)))
	}
	i0 := 0
	if full := n &^ 7; useAsm && stride2Asm && full > 0 {
		// The kernel reads the 2·full values from each row's first:
		// the last row's may run one past its last value read here,
		// so where that is past src the last row goes to the Go loop.
		r := rows
		if (rows-1)*lds+2*full > len(src) {
			r--
		}
		if r > 0 {
			const f = 4 // bytes per value
			stride2AVX2(&dst[0], ldd*f, &src[0], lds*f, r, full)
		}
		for y := r; y < rows; y++ {
			stride2Go(dst[y*ldd:y*ldd+full], src[y*lds:])
		}
		i0 = full
	}
	if i0 == n {
		return
	}
	for y := range rows {
		stride2Go(dst[y*ldd+i0:y*ldd+n], src[y*lds+2*i0:])
	}
}

// stride2Go sets d[i] = s[2i] for every i of d.
func stride2Go(d, s []float32) {
	s = s[:2*len(d)-1]
	for i := range d {
		d[i] = s[2*i]
	}
}

// AddStride2Rows adds rows rows of src into every second value of dst:
// dst[r·ldd + 2i] += src[r·lds + i] for r < rows and i < n (the values
// between are left as they are), eight values at a time in AVX2 registers
// where the CPU has it, each sum rounded as the Go loop rounds it. It
// panics if a range falls outside its slice.
func AddStride2Rows(dst []float32, ldd int, src []float32, lds, rows, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if (rows-1)*ldd+2*n-1 > len(dst) || (rows-1)*lds+n > len(src) {
		panic(fmt.Sprintf("kernels.AddStride2Rows: %d rows of %d values (strides %d, %d) do not fit in %d and %d values", rows, n, ldd, lds, len(dst), len(src)))
	}
	i0 := 0
	if full := n &^ 7; useAsm && stride2Asm && full > 0 {
		// The kernel reads and writes back the 2·full values from
		// each row's first: where the last row's would run past dst,
		// that row goes to the Go loop.
		r := rows
		if (rows-1)*ldd+2*full > len(dst) {
			r--
		}
		if r > 0 {
			const f = 4 // bytes per value
			addStride2AVX2(&dst[0], ldd*f, &src[0], lds*f, r, full)
		}
		for y := r; y < rows; y++ {
			addStride2Go(dst[y*ldd:], src[y*lds:y*lds+full])
		}
		i0 = full
	}
	if i0 == n {
		return
	}
	for y := range rows {
		addStride2Go(dst[y*ldd+2*i0:], src[y*lds+i0:y*lds+n])
	}
}

// addStride2Go adds s[i] to d[2i] for every i of s.
func addStride2Go(d, s []float32) {
	d = d[:2*len(s)-1]
	for i, v := range s {
		d[2*i] += v
	}
}
