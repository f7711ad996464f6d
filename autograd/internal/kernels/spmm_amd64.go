//go:build !purego

package kernels

// spmmAsm: SparseRows has an assembly kernel (AVX2, run while useAsm).
const spmmAsm = true

// rowAVX2 adds Σ_t val[t]·b[off[t]+j] to dst[j] (to *init instead, if
// init is not nil) for j in [0, n), n a positive multiple of 8, exactly as
// rowGo does; nnz > 0 terms.
//
//go:noescape
func rowAVX2(dst *float32, n int, val *float32, off *int, nnz int, b *float32, init *float32)
