//go:build !purego

package kernels

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// spmmAsm: SparseRows has an AVX2 kernel (run while useAsm, on CPUs with
// FMA3 as well).
var spmmAsm = cpu.X86.FMA

// useAVX512 reports whether SparseRows runs its AVX-512 kernels
// (registered with internal/impl as package "kernels", "avx512").
var useAVX512 = cpu.X86.AVX512F

func init() { impl.Register("kernels", "avx512", &useAVX512) }

// rowAVX2 adds Σ_t val[t]·b[off[t]+j] to dst[j] (to *init instead, if
// init is not nil) for j in [0, n), n a positive multiple of 8, exactly as
// rowGo does; nnz > 0 terms. It needs AVX2 and FMA3.
//
//go:noescape
func rowAVX2(dst *float32, n int, val *float32, off *int, nnz int, b *float32, init *float32)
