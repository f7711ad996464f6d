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

// ExamplePackedA packs A once and multiplies it with two matrices B, the
// second time adding to C; the columns of op(A) are packed in two pieces,
// as a producer computing A piece by piece would.
func ExamplePackedA() {
	a := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	e := blas.Default()
	pa := e.NewPackedA(false, 2, 3, nil)
	pa.Pack(a, 3, 0, 2)     // columns 0 and 1
	pa.Pack(a[2:], 3, 2, 3) // column 2: a[2:] starts there
	c := make([]float32, 2)
	pa.Sgemm(false, 1, 1, []float32{1, 1, 1}, 1, 0, c, 1) // row sums
	fmt.Println(c)
	pa.Sgemm(false, 1, 1, []float32{1, 0, 0}, 1, 1, c, 1) // plus column 0
	fmt.Println(c)
	// Output:
	// [6 15]
	// [7 19]
}
