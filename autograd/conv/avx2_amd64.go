//go:build !purego

package conv

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// haveAVX2 reports whether the AVX2 kernels of this package run: the
// Winograd transforms (winograd_amd64.s). Registered with internal/impl as
// package "conv", which tests use to compare them with the Go loops.
var haveAVX2 = cpu.X86.AVX2

func init() { impl.Register("conv", "avx2", &haveAVX2) }
