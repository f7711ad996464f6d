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

// rowsAVX2 adds, for each of rows rows, Σ_t val[t]·b[off[t]+j] over its
// terms t from rowPtr[r] to rowPtr[r+1] (CSR.terms' records at terms) to
// dst[r·ldd + j] (to init[r] instead, if init is not nil) for j in [0,
// n), n a positive multiple of 8, exactly as rowGo does for each row. It
// needs AVX2 and FMA3.
//
//go:noescape
func rowsAVX2(dst *float32, ldd int, n int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32)

// rowAVX2 is rowsAVX2 for one row of nnz > 0 terms.
func rowAVX2(dst *float32, n int, terms *uint64, nnz int, b *float32, init *float32) {
	rp := [2]int32{0, int32(nnz)}
	rowsAVX2(dst, 0, n, &rp[0], terms, 1, b, init)
}
