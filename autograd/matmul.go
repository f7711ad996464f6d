package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/parallel"
)

// matDims returns the rows and columns of op(t) for a rank-2 tensor.
func matDims(op, name string, t *Tensor, trans bool) (rows, cols int) {
	mustRank(op, name, t, 2)
	if trans {
		return t.shape[1], t.shape[0]
	}
	return t.shape[0], t.shape[1]
}

// MatMul returns op(a)·op(b) for rank-2 tensors, where op(x) is x or its
// transpose xᵀ as transA and transB select.
func MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	m, k := matDims("MatMul", "a", a, transA)
	k2, n := matDims("MatMul", "b", b, transB)
	if k != k2 {
		panic(fmt.Sprintf("autograd.MatMul: inner dimensions differ: op(a) %dx%d vs op(b) %dx%d (shapes %v, %v, transA=%v, transB=%v)",
			m, k, k2, n, a.shape, b.shape, transA, transB))
	}
	c := contextOf("MatMul", a, b)
	out := c.empty(m, n)
	gemm := c.gemmIn()
	gemm(transA, transB, m, n, k, 1, a.Data, a.shape[1], b.Data, b.shape[1], 0, out.Data, n)
	return c.record("MatMul", out, func(g []float32) {
		matMulBackward(gemm, a, b, transA, transB, m, n, k, g)
	}, a, b)
}

// gemmFunc is the signature of blas.Sgemm and blas.SgemmSerial.
type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// matMulBackward accumulates the gradients of C = op(A)·op(B) given dC,
// computing their products with gemm.
func matMulBackward(gemm gemmFunc, a, b *Tensor, transA, transB bool, m, n, k int, g []float32) {
	if a.requiresGrad {
		// dA = dC·op(B)ᵀ, or its transpose op(B)·dCᵀ when A was transposed.
		if transA {
			gemm(transB, true, k, m, n, 1, b.Data, b.shape[1], g, n, 1, a.grad(), a.shape[1])
		} else {
			gemm(false, !transB, m, k, n, 1, g, n, b.Data, b.shape[1], 1, a.grad(), a.shape[1])
		}
	}
	if b.requiresGrad {
		// dB = op(A)ᵀ·dC, or dCᵀ·op(A) when B was transposed.
		if transB {
			gemm(true, transA, n, k, m, 1, g, n, a.Data, a.shape[1], 1, b.grad(), b.shape[1])
		} else {
			gemm(!transA, false, k, n, m, 1, a.Data, a.shape[1], g, n, 1, b.grad(), b.shape[1])
		}
	}
}

// Linear returns x·wᵀ + b for x of shape (N, in), w of shape (out, in) and
// an optional bias b of shape (out), as torch.nn.functional.linear does.
func Linear(x, w, b *Tensor) *Tensor {
	mustRank("Linear", "x", x, 2)
	mustRank("Linear", "weight", w, 2)
	if x.shape[1] != w.shape[1] {
		panic(fmt.Sprintf("autograd.Linear: input features differ: x %v vs weight %v", x.shape, w.shape))
	}
	nOut := w.shape[0]
	if b != nil && (b.Rank() != 1 || b.shape[0] != nOut) {
		panic(fmt.Sprintf("autograd.Linear: bias shape %v does not match weight %v", b.shape, w.shape))
	}
	batch := x.shape[0]
	c := contextOf("Linear", x, w, b)
	out := c.empty(batch, nOut)
	if b != nil {
		parallel.For(batch, rowGrain(nOut), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				copy(out.Data[i*nOut:(i+1)*nOut], b.Data)
			}
		})
	}
	beta := float32(0)
	if b != nil {
		beta = 1
	}
	gemm := c.gemmIn()
	gemm(false, true, batch, nOut, x.shape[1], 1, x.Data, x.shape[1], w.Data, w.shape[1], beta, out.Data, nOut)
	return c.record("Linear", out, func(g []float32) {
		matMulBackward(gemm, x, w, false, true, batch, nOut, x.shape[1], g)
		if b != nil && b.requiresGrad {
			addColumnSums(b.grad(), g, batch, nOut)
		}
	}, x, w, b)
}

// columnSums returns the column sums of the row-major (rows, cols) matrix
// m, each column summed over the rows in order.
func columnSums(ctx *Context, m []float32, rows, cols int) []float32 {
	s := ctx.alloc(cols, true)
	addColumnSums(s, m, rows, cols)
	return s
}

// addColumnSums adds the rows of the row-major (rows, cols) matrix m into
// dst, row by row in order: each element of dst receives the same additions
// in the same order whatever the number of workers, which split the columns.
func addColumnSums(dst, m []float32, rows, cols int) {
	parallel.For(cols, 256, func(lo, hi int) {
		d := dst[lo:hi]
		for r := 0; r < rows; r++ {
			for j, v := range m[r*cols+lo : r*cols+hi] {
				d[j] += v
			}
		}
	})
}
