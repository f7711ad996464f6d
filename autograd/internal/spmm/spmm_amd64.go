//go:build !purego

package spmm

import "github.com/proxgen/proxgen/internal/cpu"

// haveAVX2 reports whether the CPU and operating system support the AVX2
// kernel of spmm_amd64.s.
var haveAVX2 = cpu.X86.AVX2

// rowAVX2 adds Σ_t val[t]·b[off[t]+j] to dst[j] for j in [0, n), n a
// positive multiple of 8, exactly as rowGo does; nnz > 0 terms.
//
//go:noescape
func rowAVX2(dst *float32, n int, val *float32, off *int, nnz int, b *float32)
