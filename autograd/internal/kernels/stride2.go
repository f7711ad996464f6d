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
