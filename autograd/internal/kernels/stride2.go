package kernels

import "fmt"

// Stride2Rows copies every second value of rows rows of src into dst:
// dst[r·ldd + i] = src[r·lds + 2i] for r < rows and i < n, eight values
// at a time in AVX2 registers where the CPU has it (a copy: the same
// bits). It panics if a range falls outside its slice.
func Stride2Rows(dst []float32, ldd int, src []float32, lds, rows, n int) {
	stride2Rows("Stride2Rows", dst, ldd, src, lds, rows, n, false)
}

// AddStride2Rows adds rows rows of src into every second value of dst:
// dst[r·ldd + 2i] += src[r·lds + i] for r < rows and i < n (the values
// between are left as they are), eight values at a time in AVX2 registers
// where the CPU has it, each sum rounded as the Go loop rounds it. It
// panics if a range falls outside its slice.
func AddStride2Rows(dst []float32, ldd int, src []float32, lds, rows, n int) {
	stride2Rows("AddStride2Rows", dst, ldd, src, lds, rows, n, true)
}

// AddInterleaveRows adds rows rows of a into the even values and those of
// b into the odd values of dst: dst[r·ldd + 2i] += a[r·lds + i] and
// dst[r·ldd + 2i + 1] += b[r·lds + i] for r < rows and i < n, eight
// values of each at a time in AVX2 registers where the CPU has it, each
// sum rounded as the Go loop rounds it (the same bits as AddStride2Rows
// of a into dst, then of b into dst[1:]). It panics if a range falls
// outside its slice.
func AddInterleaveRows(dst []float32, ldd int, a, b []float32, lds, rows, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if (rows-1)*ldd+2*n > len(dst) || (rows-1)*lds+n > min(len(a), len(b)) {
		panic(fmt.Sprintf("kernels.AddInterleaveRows: %d rows of %d values (strides %d, %d) do not fit in %d, %d and %d values", rows, n, ldd, lds, len(dst), len(a), len(b)))
	}
	i0 := 0
	if full := n &^ 7; useAsm && stride2Asm && full > 0 {
		const f = 4 // bytes per value
		addInterleaveAVX2(&dst[0], ldd*f, &a[0], &b[0], lds*f, rows, full)
		i0 = full
	}
	if i0 == n {
		return
	}
	for y := range rows {
		d := dst[y*ldd+2*i0 : y*ldd+2*n]
		ra, rb := a[y*lds+i0:y*lds+n], b[y*lds+i0:y*lds+n]
		for i, v := range ra {
			d[2*i] += v
			d[2*i+1] += rb[i]
		}
	}
}

// stride2Rows is Stride2Rows, or AddStride2Rows if add, named name.
func stride2Rows(name string, dst []float32, ldd int, src []float32, lds, rows, n int, add bool) {
	if rows <= 0 || n <= 0 {
		return
	}
	// The wide side holds the values at every second place, the dense
	// side the n consecutive ones.
	wide, lw, dense, ld := src, lds, dst, ldd
	if add {
		wide, lw, dense, ld = dst, ldd, src, lds
	}
	if (rows-1)*ld+n > len(dense) || (rows-1)*lw+2*n-1 > len(wide) {
		panic(fmt.Sprintf("kernels.%s: %d rows of %d values (strides %d, %d) do not fit in %d and %d values", name, rows, n, ldd, lds, len(dst), len(src)))
	}
	i0 := 0
	if full := n &^ 7; useAsm && stride2Asm && full > 0 {
		// The kernels take 2·full values of each wide row from its
		// first: the last row's may run one past its last value used
		// here, so where that is past the slice the last row goes to
		// the Go loop.
		r := rows
		if (rows-1)*lw+2*full > len(wide) {
			r--
		}
		if r > 0 {
			const f = 4 // bytes per value
			if add {
				addStride2AVX2(&dst[0], ldd*f, &src[0], lds*f, r, full)
			} else {
				stride2AVX2(&dst[0], ldd*f, &src[0], lds*f, r, full)
			}
		}
		for y := r; y < rows; y++ {
			stride2Go(dense[y*ld:y*ld+full], wide[y*lw:], add)
		}
		i0 = full
	}
	if i0 == n {
		return
	}
	for y := range rows {
		stride2Go(dense[y*ld+i0:y*ld+n], wide[y*lw+2*i0:], add)
	}
}

// stride2Go sets d[i] = w[2i] for every i of d, or if add adds d[i] to
// w[2i].
func stride2Go(d, w []float32, add bool) {
	w = w[:2*len(d)-1]
	if add {
		for i, v := range d {
			w[2*i] += v
		}
		return
	}
	for i := range d {
		d[i] = w[2*i]
	}
}
