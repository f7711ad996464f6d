package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/blas"
)

// Precision is the arithmetic of the matrix products of the ops that run
// in a context (Context.Precision): convolutions and the products of
// Linear and MatMul, forward and backward. Parameters, gradients,
// activations and every other op stay in float32 whatever it is.
type Precision uint8

const (
	// FP32 computes the products in float32 (the default).
	FP32 Precision = iota
	// BF16 rounds both operands of each product to bfloat16 and
	// accumulates in float32 (blas.SgemmBF16), as PyTorch's CPU autocast
	// to bfloat16 does for convolutions and linear layers, on CPUs with
	// AVX512_BF16 (blas.BF16Native); elsewhere the products stay in
	// float32. The parameters (the master weights), their gradients and
	// the optimizer stay in float32. Convolutions then take the im2col
	// route for all three of their products, whose results do not depend
	// on the number of workers either.
	BF16
)

// String returns "fp32" or "bf16".
func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// ParsePrecision returns the precision named s, "fp32" or "bf16".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "fp32":
		return FP32, nil
	case "bf16":
		return BF16, nil
	}
	return FP32, fmt.Errorf("unknown precision %q (want fp32 or bf16)", s)
}

// bf16 reports whether the products of ops in c run in bfloat16: c asks
// for BF16 and the CPU has the instructions.
func (c *Context) bf16() bool { return c != nil && c.Precision == BF16 && blas.BF16Native() }

// gemmIn returns the product of the ops in c: blas.SgemmBF16 when c
// computes in bfloat16, else blas.Sgemm.
func (c *Context) gemmIn() gemmFunc {
	if c.bf16() {
		return blas.SgemmBF16
	}
	return blas.Sgemm
}
