//go:build !purego

package nchwc

import (
	"unsafe"

	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// useAsm reports whether the AVX-512 kernels run (registered with
// internal/impl as package "nchwc", "avx512").
var useAsm = cpu.X86.AVX512F

func init() { impl.Register("nchwc", "avx512", &useAsm) }

// Fast reports whether Conv runs the AVX-512 kernels. Without them it
// computes the same values with a Go loop many times slower than the
// engine's other convolutions, so callers choose this layout only where
// Fast holds.
func Fast() bool { return useAsm }

// pmax[fb-1] is the widest strip of the kernels for fb blocks.
var pmax = [2]int{len(asmKernels[0][0]), len(asmKernels[1][0])}

// kernel runs the kernel of fb blocks, stride s and p pixels on the
// arguments of kernelGo (offsets and strides in float32 values).
func kernel(cb, fb, p, s int, in []float32, inOff, inBS, inRS, ncib, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	if !useAsm {
		kernelGo(cb, fb, p, s, in, inOff, inBS, inRS, ncib, kh, kw, w, wOff, bias, res, out, outOff, outBS, relu)
		return
	}
	// Bounds: the last values the kernel reads and writes.
	_ = in[inOff+(ncib-1)*inBS+(kh-1)*inRS+((p-1)*s+kw)*cb-1]
	_ = w[wOff+ncib*kh*kw*cb*16*fb-1]
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
	k := asmStemKernels[p-1]
	if cb == 16 {
		k = asmKernels[fb-1][s-1][p-1]
	}
	k(&in[inOff], inBS*f, inRS*f, ncib, kh, kw, &w[wOff], &bias[0], r, &out[outOff], outBS*f, rl)
}
