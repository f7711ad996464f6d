package autograd

// This file holds the layout helpers shared by the ops: the matrix
// transposes (their kernels are autograd/internal/kernels').

import (
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// transpose writes the transpose of the rows×cols matrix src into dst
// (cols×rows).
func transpose(rows, cols int, src, dst []float32) { kernels.Transpose(rows, cols, src, dst) }

// transposeParallel is transpose with the rows split over the worker pool.
func transposeParallel(rows, cols int, src, dst []float32) {
	parallel.For(rows, 64, func(lo, hi int) {
		kernels.TransposeStrided(cols, lo, hi, src, cols, dst, rows)
	})
}
