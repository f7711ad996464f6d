package blas_test

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/blas"
)

// ExampleSgemm multiplies a 2×3 by a 3×2 matrix, both row-major, and then
// adds half of the product's transpose with beta = 1 and both transpose
// flags set.
func ExampleSgemm() {
	a := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	b := []float32{
		7, 8,
		9, 10,
		11, 12,
	}
	c := make([]float32, 4)
	blas.Sgemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2) // C = A·B
	fmt.Println(c)

	// C += 0.5·Bᵀ·Aᵀ = 0.5·(A·B)ᵀ: B is stored 3×2, so op(B) = Bᵀ is 2×3.
	blas.Sgemm(true, true, 2, 2, 3, 0.5, b, 2, a, 3, 1, c, 2)
	fmt.Println(c)
	// Output:
	// [58 64 139 154]
	// [87 133.5 171 231]
}

// ExampleKernels shows that the default micro-kernel, the one Sgemm uses,
// is the last of the kernels this machine can run.
func ExampleKernels() {
	ks := blas.Kernels()
	fmt.Println(blas.Kernel() == ks[len(ks)-1])
	// Output:
	// true
}
