//go:build !purego

package infer

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// haveAVX2 reports whether the AVX2 kernels of RawImage run (the Y'CbCr
// conversion and the two resampling passes, preprocess_amd64.s).
// Registered with internal/impl as package "infer", which tests use to
// compare them with the Go loops.
var haveAVX2 = cpu.X86.AVX2

func init() { impl.Register("infer", "avx2", &haveAVX2) }
