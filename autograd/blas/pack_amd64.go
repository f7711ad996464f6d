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

// gatherPack is packStrided with AVX-512 gathers of up to 16 rows at a
// time. It reports false, having done nothing, if AVX-512 is not enabled
// (useAVX512, the "avx512" implementation of internal/impl) or it cannot
// handle the arguments.
func gatherPack(src []float32, ld, kcb, w, width int, dst []float32) bool {
	if !useAVX512 || width > 32 || int64(w)*int64(ld) > math.MaxInt32 {
		return false
	}
	_ = src[(w-1)*ld+kcb-1]
	_ = dst[kcb*width-1]
	if width <= 16 {
		packGatherAVX512(&dst[0], &src[0], ld, kcb, width, uint32(1)<<w-1, uint32(1)<<width-1)
		return true
	}
	// Lanes 0-15, then 16-width: one gather per group in each pass.
	packGatherAVX512(&dst[0], &src[0], ld, kcb, width, uint32(1)<<min(w, 16)-1, 0xffff)
	if w > 16 {
		packGatherAVX512(&dst[16], &src[16*ld], ld, kcb, width, uint32(1)<<(w-16)-1, uint32(1)<<(width-16)-1)
	} else {
		for p := 0; p < kcb; p++ {
			clear(dst[p*width+16 : p*width+width])
		}
	}
	return true
}

// copyPack packs np consecutive panels of w columns as packContiguous
// does, walking each row of src once, with AVX-512 masked moves. It
// reports false, having done nothing, if AVX-512 is not enabled or w > 32.
func copyPack(src []float32, ld, kcb, np, w int, dst []float32) bool {
	if !useAVX512 || w > 32 {
		return false
	}
	_ = src[(kcb-1)*ld+np*w-1]
	_ = dst[np*kcb*w-1]
	packCopyAVX512(&dst[0], &src[0], ld, kcb, np, w, uint32(1)<<w-1)
	return true
}
