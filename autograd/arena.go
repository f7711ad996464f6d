package autograd

import (
	"sync"
	"sync/atomic"
)

// Arena recycles the buffers of op results and gradients between training
// steps, so that a steady-state step allocates (almost) nothing.
//
// While an arena is active (see Use), every tensor an op creates and every
// gradient buffer Backward allocates comes from the arena. Reset makes all
// of those buffers available again: tensors created under the arena before
// Reset must not be used afterwards. Leaves created by the caller with New
// outside the arena (parameters, buffers) are never touched.
//
// A training loop repeats the same sequence of allocations every step, so
// the arena hands out the buffer of the same position in the sequence when
// its size fits, and allocates only when the sequence changes.
type Arena struct {
	mu   sync.Mutex
	bufs [][]float32
	next int
}

// NewArena returns an empty arena.
func NewArena() *Arena { return &Arena{} }

var activeArena atomic.Pointer[Arena]

// Use runs f with a as the active arena: allocations by ops inside f come
// from a. The arena is process-wide while f runs, like NoGrad.
func (a *Arena) Use(f func()) {
	prev := activeArena.Swap(a)
	defer activeArena.Store(prev)
	f()
}

// Reset makes every buffer handed out so far available again.
func (a *Arena) Reset() {
	a.mu.Lock()
	a.next = 0
	a.mu.Unlock()
}

// Bytes reports the memory the arena holds.
func (a *Arena) Bytes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, b := range a.bufs {
		n += 4 * cap(b)
	}
	return n
}

// get returns a buffer of n elements, zeroed if zero is set.
func (a *Arena) get(n int, zero bool) []float32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next < len(a.bufs) {
		b := a.bufs[a.next]
		if cap(b) >= n {
			a.next++
			b = b[:n]
			if zero {
				clear(b)
			}
			return b
		}
		// The allocation sequence changed: replace this slot.
		b = make([]float32, n)
		a.bufs[a.next] = b
		a.next++
		return b
	}
	b := make([]float32, n)
	a.bufs = append(a.bufs, b)
	a.next++
	return b
}

// alloc returns a buffer for n elements from the active arena, or a fresh
// zeroed slice when none is active. zero requests zeroed memory; ops that
// overwrite every element pass false.
func alloc(n int, zero bool) []float32 {
	if a := activeArena.Load(); a != nil && n > 0 {
		return a.get(n, zero)
	}
	return make([]float32, n)
}

// empty returns a tensor whose elements the caller overwrites completely;
// its contents are unspecified when an arena is active.
func empty(shape ...int) *Tensor {
	return &Tensor{Data: alloc(numel("New", shape), false), shape: cloneInts(shape)}
}
