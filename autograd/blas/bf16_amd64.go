//go:build !purego

package blas

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

//go:generate go run gen_bf16.go

// useBF16 says whether the AVX512_BF16 kernel and packing routine of
// SgemmBF16 may run: what the CPU and operating system support, which
// only tests change, through internal/impl (package "blasbf16", implementation "avx512bf16").
var useBF16 = cpu.X86.AVX512BF16

func init() { impl.Register("blasbf16", "avx512bf16", &useBF16) }

// bf16KernelAVX512 computes the rows×bf16NR tile C = alpha·A·B + beta·C
// (columns in mask) from kp >= 1 packed pairs.
//
//go:noescape
func bf16KernelAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32)

// bf16KernelHalfAVX512 is bf16KernelAVX512 for tiles whose columns all
// lie in the first 16 (mask < 1<<16): it multiplies only the first half
// of each row of the B panel.
//
//go:noescape
func bf16KernelHalfAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32)

// bf16PackPairsAVX512 packs kp pairs of rows (and, if odd != 0, one last
// row paired with zero) of groups·16 columns: the columns set in lmask are
// read, the others taken as zero, and the words of the columns set in
// smask are stored (width per pair).
//
//go:noescape
func bf16PackPairsAVX512(dst *uint32, src *float32, ld, kp, odd, width, groups int, lmask, smask uint32)

// bf16KernelAsm runs bf16Kernel's tile in assembly and reports true, or
// reports false if the kernel is not enabled.
func bf16KernelAsm(kp int, ap, bp []uint32, c []float32, ldc int, alpha, beta float32, rows, cols int) bool {
	if !useBF16 || kp == 0 {
		return false
	}
	if cols <= 16 {
		bf16KernelHalfAVX512(kp, &ap[0], &bp[0], &c[0], ldc, alpha, beta, rows, uint32(1)<<cols-1)
		return true
	}
	bf16KernelAVX512(kp, &ap[0], &bp[0], &c[0], ldc, alpha, beta, rows, uint32(1)<<cols-1)
	return true
}

// bf16PackAsm is bf16PackContiguous in assembly for width 8, 16 or 32,
// storing only the first store <= width words of each pair row; it
// reports false, having done nothing, if it is not enabled or cannot
// handle the arguments.
func bf16PackAsm(src []float32, ld, kcb, w, width, store int, dst []uint32) bool {
	if !useBF16 || kcb == 0 || w == 0 || (width != 8 && width != 16 && width != 32) {
		return false
	}
	kp := (kcb + 1) / 2
	_ = src[(kcb-1)*ld+w-1]
	_ = dst[(kp-1)*width+store-1]
	bf16PackPairsAVX512(&dst[0], &src[0], ld, kcb/2, kcb%2, width, (width+15)/16, uint32(uint64(1)<<w-1), uint32(uint64(1)<<store-1))
	return true
}

// bf16PackPanelsAVX512 packs np whole panels of 32 columns of kp pairs of
// rows (and, if odd != 0, one last row paired with zero) as
// bf16PackPairsAVX512 packs one, walking each pair of rows once.
//
//go:noescape
func bf16PackPanelsAVX512(dst *uint32, src *float32, ld, kp, odd, np int)

// bf16PackPanelsAsm packs np whole consecutive panels of bf16NR columns
// (rows src[p*ld:], p < kcb) into dst, panel t at t·⌈kcb/2⌉·bf16NR, as
// bf16PackContiguous packs each; it reports false, having done nothing,
// if the assembly is not enabled.
func bf16PackPanelsAsm(src []float32, ld, kcb, np int, dst []uint32) bool {
	if !useBF16 || kcb == 0 || np == 0 {
		return false
	}
	_ = src[(kcb-1)*ld+np*bf16NR-1]
	_ = dst[np*((kcb+1)/2)*bf16NR-1]
	bf16PackPanelsAVX512(&dst[0], &src[0], ld, kcb/2, kcb%2, np)
	return true
}

// bf16PackRowsAVX512 converts rows rows of kcb values (ld apart) to
// pairs, row r's kp = ⌈kcb/2⌉ pairs at dst[r*kp:].
//
//go:noescape
func bf16PackRowsAVX512(dst *uint32, src *float32, ld, kp, rows, kcb int)

// bf16PackRowsAsm packs rows rows of kcb values of src (ld apart) as
// bf16PackRow packs each, row r at dst[r*⌈kcb/2⌉:]; it reports false,
// having done nothing, if the assembly is not enabled.
func bf16PackRowsAsm(src []float32, ld, kcb, rows int, dst []uint32) bool {
	if !useBF16 || kcb == 0 || rows == 0 {
		return false
	}
	kp := (kcb + 1) / 2
	_ = src[(rows-1)*ld+kcb-1]
	_ = dst[rows*kp-1]
	bf16PackRowsAVX512(&dst[0], &src[0], ld, kp, rows, kcb)
	return true
}

// bf16KernelRowsAVX512 and bf16KernelRowsHalfAVX512 are bf16KernelAVX512
// and bf16KernelHalfAVX512 with pair row q of B at b[offs[q]:], read in
// place (masked by the columns of mask).
//
//go:noescape
func bf16KernelRowsAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)

//go:noescape
func bf16KernelRowsHalfAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)

// bf16RowsKernelAsm runs one tile of MulPairRows (alpha 1) in assembly;
// the caller has checked the bounds.
func bf16RowsKernelAsm(kp int, ap, src []uint32, offs []int32, c []float32, ldc int, beta float32, rows, cols int) {
	_ = ap[kp*bf16MR-1]
	mask := uint32(1)<<cols - 1
	if cols <= 16 {
		bf16KernelRowsHalfAVX512(kp, &ap[0], &src[0], &c[0], ldc, 1, beta, rows, mask, &offs[0])
		return
	}
	bf16KernelRowsAVX512(kp, &ap[0], &src[0], &c[0], ldc, 1, beta, rows, mask, &offs[0])
}

// bf16KernelARowsAVX512 and bf16KernelARowsHalfAVX512 are
// bf16KernelAVX512 and bf16KernelHalfAVX512 with row r of A read in place
// at byte offset 2·offs[r] from a.
//
//go:noescape
func bf16KernelARowsAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)

//go:noescape
func bf16KernelARowsHalfAVX512(kp int, a, b *uint32, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, offs *int32)

// bf16ARowsKernelAsm runs one tile of SgemmBF16WordRows (alpha 1) in
// assembly; the caller has checked the bounds.
func bf16ARowsKernelAsm(kp int, src []uint32, offs *[bf16MR]int32, bp []uint32, c []float32, ldc int, beta float32, rows, cols int) {
	_ = bp[kp*bf16NR-1]
	mask := uint32(1)<<cols - 1
	if cols <= 16 {
		bf16KernelARowsHalfAVX512(kp, &src[0], &bp[0], &c[0], ldc, 1, beta, rows, mask, &offs[0])
		return
	}
	bf16KernelARowsAVX512(kp, &src[0], &bp[0], &c[0], ldc, 1, beta, rows, mask, &offs[0])
}

// bf16PlaneRowsAVX512: for r < rows and j < w, dst[r*dstride+j] is the
// pair of src[r*sstride+j] and src[ld+r*sstride+j] (zero if single != 0).
//
//go:noescape
func bf16PlaneRowsAVX512(dst *uint32, src *float32, dstride, sstride, ld, rows, w, single int)

// bf16PlaneRowsAsm runs BF16PlaneRows in assembly and reports true, or
// reports false if it is not enabled.
func bf16PlaneRowsAsm(dst []uint32, dstride int, src []float32, sstride, ld, rows, w int, single bool) bool {
	if !useBF16 {
		return false
	}
	s := 0
	if single {
		s = 1
	}
	bf16PlaneRowsAVX512(&dst[0], &src[0], dstride, sstride, ld, rows, w, s)
	return true
}
