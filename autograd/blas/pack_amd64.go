//go:build !purego

package blas

import "math"

// packGatherAVX512: for p < kcb, dst[p*width+r] = src[r*ld+p] for the rows
// r set in gmask and 0 for the others, storing the lanes set in smask.
//
//go:noescape
func packGatherAVX512(dst, src *float32, ld, kcb, width int, gmask, smask uint32)

// packCopyAVX512: dst[(t*kcb+p)*w+c] = src[p*ld+t*w+c] for p < kcb,
// t < np and the columns c set in mask.
//
//go:noescape
func packCopyAVX512(dst, src *float32, ld, kcb, np, w int, mask uint32)

func init() {
	if _, avx512 := cpuFeatures(); avx512 {
		gatherPack = gatherPackAVX512
		copyPack = copyPackAVX512
	}
}

// gatherPackAVX512 implements gatherPack with AVX-512 gathers.
func gatherPackAVX512(src []float32, ld, kcb, w, width int, dst []float32) bool {
	// Two gathers per group (w > 16) lose to the Go loop, which reads
	// four rows sequentially at a time.
	if w > 16 || width > 32 || int64(w)*int64(ld) > math.MaxInt32 {
		return false
	}
	_ = src[(w-1)*ld+kcb-1]
	_ = dst[kcb*width-1]
	gmask := uint32(1)<<w - 1
	smask := uint32(1)<<width - 1
	packGatherAVX512(&dst[0], &src[0], ld, kcb, width, gmask, smask)
	return true
}

// copyPackAVX512 implements copyPack with AVX-512 masked moves.
func copyPackAVX512(src []float32, ld, kcb, np, w int, dst []float32) bool {
	if w > 32 {
		return false
	}
	_ = src[(kcb-1)*ld+np*w-1]
	_ = dst[np*kcb*w-1]
	packCopyAVX512(&dst[0], &src[0], ld, kcb, np, w, uint32(1)<<w-1)
	return true
}
