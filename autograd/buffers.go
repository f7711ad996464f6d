package autograd

// This file holds the buffers and layout helpers shared by the ops: the
// scratch free list and the matrix transposes.

import (
	"sync"

	"github.com/proxgen/proxgen/internal/parallel"
)

// transpose writes the transpose of the rows×cols matrix src into dst
// (cols×rows).
func transpose(rows, cols int, src, dst []float32) {
	transposeRange(rows, cols, 0, rows, src, dst)
}

// transposeParallel is transpose with the rows split over the worker pool.
func transposeParallel(rows, cols int, src, dst []float32) {
	parallel.For(rows, 64, func(lo, hi int) {
		transposeRange(rows, cols, lo, hi, src, dst)
	})
}

// transposeRange writes rows lo..hi of the rows×cols matrix src into their
// columns of dst (cols×rows).
func transposeRange(rows, cols, lo, hi int, src, dst []float32) {
	transposeStrided(cols, lo, hi, src, cols, dst, rows)
}

// transposeStrided writes rows lo..hi of the matrix src (rows lds apart,
// cols values each) into their columns of dst (rows ldd apart): src[i·lds
// + j] goes to dst[j·ldd + i]. It reads eight rows at a time so that each
// destination row receives eight consecutive values per visit, eight
// columns of them at a time in AVX2 registers where the CPU has it.
func transposeStrided(cols, lo, hi int, src []float32, lds int, dst []float32, ldd int) {
	i := lo
	for ; i+8 <= hi; i += 8 {
		s0 := src[i*lds : i*lds+cols]
		s1 := src[(i+1)*lds : (i+1)*lds+cols][:len(s0)]
		s2 := src[(i+2)*lds : (i+2)*lds+cols][:len(s0)]
		s3 := src[(i+3)*lds : (i+3)*lds+cols][:len(s0)]
		s4 := src[(i+4)*lds : (i+4)*lds+cols][:len(s0)]
		s5 := src[(i+5)*lds : (i+5)*lds+cols][:len(s0)]
		s6 := src[(i+6)*lds : (i+6)*lds+cols][:len(s0)]
		s7 := src[(i+7)*lds : (i+7)*lds+cols][:len(s0)]
		j0 := 0
		if n := cols &^ 7; haveAVX2 && n > 0 {
			// The last of the n destination rows the kernel writes.
			_ = dst[(n-1)*ldd+i+7]
			transpose8AVX2(&s0[0], lds, &dst[i], ldd, n)
			j0 = n
		}
		for j := j0; j < len(s0); j++ {
			d := dst[j*ldd+i : j*ldd+i+8 : j*ldd+i+8]
			d[0], d[1], d[2], d[3] = s0[j], s1[j], s2[j], s3[j]
			d[4], d[5], d[6], d[7] = s4[j], s5[j], s6[j], s7[j]
		}
	}
	for ; i < hi; i++ {
		for j, v := range src[i*lds : i*lds+cols] {
			dst[j*ldd+i] = v
		}
	}
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
