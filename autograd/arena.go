package autograd

import "sync"

// Arena recycles the buffers of op results and gradients between training
// steps, so that a steady-state step allocates (almost) nothing.
//
// A Context whose Arena field is set takes from the arena the storage of
// every op result bound to the context and every gradient buffer of such a
// tensor. Reset makes all of those buffers available again: tensors
// allocated from the arena before Reset must not be used afterwards (copy
// what must survive with Clone). Tensors of other contexts, and leaves such
// as parameters created with New, are never touched.
//
// A training loop repeats the same sequence of allocations every step, so
// the arena hands out the buffer of the same position in the sequence when
// its size fits, and allocates only when the sequence changes. Allocation
// is safe from several goroutines (an op may allocate from its workers),
// but the positions then depend on their timing: an arena belongs to one
// computation at a time.
type Arena struct {
	mu   sync.Mutex
	bufs [][]float32
	next int
}

// NewArena returns an empty arena.
func NewArena() *Arena { return &Arena{} }

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
