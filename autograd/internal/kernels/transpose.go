package kernels

// Transpose writes the transpose of the rows×cols matrix src into dst
// (cols×rows).
func Transpose(rows, cols int, src, dst []float32) {
	TransposeStrided(cols, 0, rows, src, cols, dst, rows)
}

// TransposeStrided writes rows lo..hi of the matrix src (rows lds apart,
// cols values each) into their columns of dst (rows ldd apart): src[i·lds
// + j] goes to dst[j·ldd + i]. It reads eight rows at a time so that each
// destination row receives eight consecutive values per visit, eight
// columns of them at a time in AVX2 registers where the CPU has it (the
// same values: a transpose copies bits). Where the destination rows are
// farther apart than the source rows, the AVX2 kernel takes sixteen rows
// at a time, so that each destination row receives sixteen values, a
// whole cache line where it is aligned, at once: rows far apart (an
// image's channel planes) fall in the same sets of the cache, and eight
// values a visit had each line evicted before its second half was
// written (channel-blocked to NCHW, 16 channels of 32×32: 2× faster).
// With the source rows far apart it keeps to eight, which reread each
// source line while it is still in cache.
func TransposeStrided(cols, lo, hi int, src []float32, lds int, dst []float32, ldd int) {
	i := lo
	if n := cols &^ 7; useAsm && transposeAsm && n > 0 && ldd > lds {
		for ; i+16 <= hi; i += 16 {
			// The last values of the source rows and of the n
			// destination rows the kernel reads and writes.
			_ = src[(i+15)*lds+n-1]
			_ = dst[(n-1)*ldd+i+15]
			transpose16AVX2(&src[i*lds], lds, &dst[i], ldd, n)
			for j := n; j < cols; j++ {
				d := dst[j*ldd+i : j*ldd+i+16 : j*ldd+i+16]
				for r := range d {
					d[r] = src[(i+r)*lds+j]
				}
			}
		}
	}
	for ; i+8 <= hi; i += 8 {
		s0 := src[i*lds : i*lds+cols]
		s1 := src[(i+1)*lds : (i+1)*lds+cols][:len(s0)]
		s2 := src[(i+2)*lds : (i+2)*lds+cols][:len(s0)]
		s3 := src[(i+3)*lds : (i+3)*lds+cols][:len(s0)]
		s4 := src[(i+4)*lds : (i+4)*lds+cols][:len(s0)]
		s5 := src[(i+5)*lds : (i+5)*lds+cols][:len(s0)]
		s6 := src[(i+6)*lds : (i+6)*lds+cols][:len(s0)]
		s7 := src[(i+7)*lds : (i+7)*lds+cols][:len(s0)]
		j0 := 0
		if n := cols &^ 7; useAsm && transposeAsm && n > 0 {
			// The last of the n destination rows the kernel writes.
			_ = dst[(n-1)*ldd+i+7]
			transpose8AVX2(&s0[0], lds, &dst[i], ldd, n)
			j0 = n
		}
		for j := j0; j < len(s0); j++ {
			d := dst[j*ldd+i : j*ldd+i+8 : j*ldd+i+8]
			d[0], d[1], d[2], d[3] = s0[j], s1[j], s2[j], s3[j]
			d[4], d[5], d[6], d[7] = s4[j], s5[j], s6[j], s7[j]
		}
	}
	for ; i < hi; i++ {
		for j, v := range src[i*lds : i*lds+cols] {
			dst[j*ldd+i] = v
		}
	}
}
