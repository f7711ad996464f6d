package autograd

// This file holds the buffers and layout helpers shared by the ops: the
// scratch free list and the matrix transposes.

import (
	"sync"

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

// scratch is a free list of float32 buffers reused across calls. Unlike a
// sync.Pool it is not emptied by the garbage collector, so steady-state
// training allocates no scratch space; it holds at most as many buffers as
// were ever in use at once (about one per worker), each grown to the
// largest size requested.
type scratch struct {
	mu   sync.Mutex
	free [][]float32
}

// get returns a buffer of length n with unspecified contents: the
// smallest free one that is large enough, or else a new one that replaces
// the smallest free one, so that callers asking for buffers of different
// sizes at once do not keep replacing each other's.
func (s *scratch) get(n int) []float32 {
	s.mu.Lock()
	best, smallest := -1, -1
	for i, b := range s.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
			best = i
		}
		if smallest < 0 || cap(b) < cap(s.free[smallest]) {
			smallest = i
		}
	}
	if best < 0 {
		best = smallest
	}
	var b []float32
	if best >= 0 {
		b = s.free[best]
		last := len(s.free) - 1
		s.free[best] = s.free[last]
		s.free = s.free[:last]
	}
	s.mu.Unlock()
	if cap(b) < n {
		b = make([]float32, n)
	}
	return b[:n]
}

// put returns a buffer obtained from get.
func (s *scratch) put(b []float32) {
	s.mu.Lock()
	s.free = append(s.free, b)
	s.mu.Unlock()
}
