//go:build !purego

package nchwc

import (
	"unsafe"

	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// useAVX512 and useAVX2 report whether the AVX-512 and the AVX2 kernels
// run (registered with internal/impl as package "nchwc", "avx512" and
// "avx2"); the AVX-512 ones where both may.
var (
	useAVX512 = cpu.X86.AVX512F
	useAVX2   = cpu.X86.AVX2 && cpu.X86.FMA
)

// hasVL reports whether the AVX-512 kernels may run their half variants
// (YMM registers in EVEX encodings, AVX512VL); without it they compute
// the last block in full (the same values).
var hasVL = cpu.X86.AVX512VL

// halfIndex is the first index of the kernel tables: 1 for the half
// variants.
func halfIndex(half bool) int {
	if half {
		return 1
	}
	return 0
}

func init() {
	impl.Register("nchwc", "avx512", &useAVX512)
	impl.Register("nchwc", "avx2", &useAVX2)
}

// Fast reports whether Conv runs assembly kernels (AVX-512 or AVX2 with
// FMA). Without them it computes the same values with a Go loop many
// times slower than the engine's other convolutions, so callers choose
// this layout only where Fast holds.
func Fast() bool { return useAVX512 || useAVX2 }

// stripMax returns the widest strip of pixels of the kernels that run for
// fb output blocks.
func stripMax(fb int) int {
	switch {
	case useAVX512:
		return len(asmKernels[0][fb-1][0])
	case useAVX2:
		return len(avx2Kernels[0][0][0])
	}
	return pmaxGo[fb-1]
}

// kernel runs the kernel of fb blocks, stride s and p pixels (the last
// block 8 wide where half) on the arguments of kernelGo (offsets and
// strides in float32 values).
func kernel(cb, fb, p, s int, half bool, in []float32, inOff, inBS, inRS, ncib, ct, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	if !useAVX512 && !useAVX2 {
		kernelGo(cb, fb, p, s, half, in, inOff, inBS, inRS, ncib, ct, kh, kw, w, wOff, bias, res, out, outOff, outBS, relu)
		return
	}
	// Bounds: the last values the kernel reads and writes.
	nb := ncib
	if ct > 0 {
		nb++
	}
	_ = in[inOff+(nb-1)*inBS+(kh-1)*inRS+((p-1)*s+kw)*cb-1]
	_ = w[wOff+nb*kh*kw*cb*16*fb-1]
	_ = bias[16*fb-1]
	last := outOff + (fb-1)*outBS + (p-1)*16 + 15
	_ = out[last]
	var r *float32
	if res != nil {
		_ = res[last]
		r = &res[outOff]
	}
	rl := 0
	if relu {
		rl = 1
	}
	const f = int(unsafe.Sizeof(float32(0)))
	if useAVX512 {
		h := halfIndex(half && hasVL)
		k := asmStemKernels[h][p-1]
		if cb == 16 {
			k = asmKernels[h][fb-1][s-1][p-1]
		}
		k(&in[inOff], inBS*f, inRS*f, ncib, ct, kh, kw, &w[wOff], &bias[0], r, &out[outOff], outBS*f, rl)
		return
	}
	for j := 0; j < fb; j++ {
		h := halfIndex(half && j == fb-1)
		k := avx2StemKernels[h][p-1]
		if cb == 16 {
			k = avx2Kernels[h][fb-1][s-1][p-1]
		}
		var rj *float32
		if r != nil {
			rj = &res[outOff+j*outBS]
		}
		k(&in[inOff], inBS*f, inRS*f, ncib, ct, kh, kw, &w[wOff+j*16], &bias[j*16], rj, &out[outOff+j*outBS], outBS*f, rl)
	}
}

// kernelSkip runs the kernel skipping zero filter vectors of fb blocks,
// stride s and p pixels (the last block 8 wide where half) on the
// arguments of kernelSkipGo; last is the largest entry's offset in values
// (checked at packing).
func kernelSkip(fb, p, s int, half bool, in []float32, inOff, last int, ent []int32, w []float32,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	if !useAVX512 && !useAVX2 {
		kernelSkipGo(fb, p, s, half, in, inOff, ent, w, bias, res, out, outOff, outBS, relu)
		return
	}
	// Bounds: the last values the kernel reads and writes.
	_ = in[inOff+last+(p-1)*s*16]
	_ = bias[16*fb-1]
	lastOut := outOff + (fb-1)*outBS + (p-1)*16 + 15
	_ = out[lastOut]
	if len(w) != len(ent)*16*fb {
		panic("nchwc: skip entries and vectors do not match")
	}
	var r, wp *float32 // wp and ep nil without vectors: the kernels read none
	var ep *int32
	if res != nil {
		_ = res[lastOut]
		r = &res[outOff]
	}
	if len(ent) > 0 {
		ep, wp = &ent[0], &w[0]
	}
	rl := 0
	if relu {
		rl = 1
	}
	const f = int(unsafe.Sizeof(float32(0)))
	n := len(ent)
	if useAVX512 {
		skipKernels[halfIndex(half && hasVL)][fb-1][s-1][p-1](&in[inOff], ep, n, wp, &bias[0], r, &out[outOff], outBS*f, rl)
		return
	}
	for j := 0; j < fb; j++ {
		k2 := skip2Kernels[halfIndex(half && j == fb-1)][fb-1][s-1][p-1]
		var rj, wj *float32
		if r != nil {
			rj = &res[outOff+j*outBS]
		}
		if n > 0 {
			wj = &w[j*16]
		}
		k2(&in[inOff], ep, n, wj, &bias[j*16], rj, &out[outOff+j*outBS], outBS*f, rl)
	}
}

// products runs the product kernels of fb blocks and p pixels (the last
// block 8 wide where half) on the arguments of productsGo (offsets and
// strides in float32 values).
func products(fb, p int, half bool, in []float32, inOff, inBS, inXS, ncib, ct int, w []float32, wOff, wXS int,
	out []float32, outOff, outBS, outXS, nxi int) {
	if (!useAVX512 && !useAVX2) || nxi == 0 {
		productsGo(fb, p, half, in, inOff, inBS, inXS, ncib, ct, w, wOff, wXS, out, outOff, outBS, outXS, nxi)
		return
	}
	// Bounds: the last values the kernels read and write.
	nb := ncib
	if ct > 0 {
		nb++
	}
	if inBS < 0 || inXS < 0 || wXS < 0 || outBS < 0 || outXS < 0 || nb == 0 {
		panic("nchwc: product kernels with negative strides or no input channels")
	}
	_ = in[inOff+(nxi-1)*inXS+(nb-1)*inBS+(p-1)*16+15]
	_ = w[wOff+(nxi-1)*wXS+nb*16*16*fb-1]
	_ = out[outOff+(nxi-1)*outXS+(fb-1)*outBS+(p-1)*16+15]
	const f = int(unsafe.Sizeof(float32(0)))
	if useAVX512 {
		prodKernels[halfIndex(half && hasVL)][fb-1][p-1](&in[inOff], inBS*f, inXS*f, ncib, ct, &w[wOff], wXS*f, &out[outOff], outBS*f, outXS*f, nxi)
		return
	}
	for j := 0; j < fb; j++ {
		prod2Kernels[halfIndex(half && j == fb-1)][fb-1][p-1](&in[inOff], inBS*f, inXS*f, ncib, ct, &w[wOff+j*16], wXS*f, &out[outOff+j*outBS], outBS*f, outXS*f, nxi)
	}
}
