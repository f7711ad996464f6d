//go:build !purego

package autograd

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// haveAVX2 reports whether the AVX2 kernels of this package run: the max
// pool (pool_amd64.s) and the exponential sums of the cross-entropy
// (expsum_amd64.s).
// Registered with internal/impl as package "autograd", which tests use to compare
// them with the Go loops.
var haveAVX2 = cpu.X86.AVX2

func init() { impl.Register("autograd", "avx2", &haveAVX2) }
