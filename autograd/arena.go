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
// Backward also hands back the gradient buffer of every op result as soon
// as the op's backward function has consumed it, and later gradients of
// the same size reuse it, so that, as in PyTorch, a step holds the
// activations but only the gradients still in flight, not all of them.
//
// Free buffers are kept by size. An allocation takes a free buffer of its
// size, else the smallest larger one (a smaller last batch reuses the
// buffers of the full ones), else a new one. Reset keeps exactly the
// buffers the step since the previous Reset used, so an arena holds at
// most what the larger of two consecutive steps needed, also when steps
// change shape. Which buffer an allocation gets does not change results:
// an op writes or zeroes all of what it receives. Allocation is safe from
// several goroutines (an op may allocate from its workers).
type Arena struct {
	mu   sync.Mutex
	free map[int][][]float32    // buffers available, by capacity
	out  map[*float32][]float32 // buffers handed out and not handed back, whole
	used [][]float32            // every buffer handed out since Reset, whole, once
	seen map[*float32]struct{}  // the first elements of used
}

// NewArena returns an empty arena.
func NewArena() *Arena {
	a := &Arena{}
	a.lazyInit()
	return a
}

// Reset makes every buffer handed out so far available again and drops
// the free buffers the last step did not use.
func (a *Arena) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lazyInit()
	clear(a.free)
	for _, b := range a.used {
		a.free[cap(b)] = append(a.free[cap(b)], b)
	}
	a.used = a.used[:0]
	clear(a.out)
	clear(a.seen)
}

// Bytes reports the memory the arena holds.
func (a *Arena) Bytes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	counted := map[*float32]bool{}
	for _, b := range a.used {
		counted[&b[0]] = true
		n += 4 * cap(b)
	}
	for _, bs := range a.free {
		for _, b := range bs {
			if !counted[&b[0]] {
				n += 4 * cap(b)
			}
		}
	}
	return n
}

// lazyInit makes the zero Arena usable. The caller holds a.mu.
func (a *Arena) lazyInit() {
	if a.free == nil {
		a.free = map[int][][]float32{}
		a.out = map[*float32][]float32{}
		a.seen = map[*float32]struct{}{}
	}
}

// get returns a buffer of n > 0 elements, zeroed if zero is set.
func (a *Arena) get(n int, zero bool) []float32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lazyInit()
	size := n
	if len(a.free[n]) == 0 {
		size = 0
		for c, bs := range a.free {
			if c > n && len(bs) > 0 && (size == 0 || c < size) {
				size = c
			}
		}
	}
	var b []float32
	if size > 0 {
		bs := a.free[size]
		b = bs[len(bs)-1]
		a.free[size] = bs[:len(bs)-1]
		if zero {
			clear(b[:n])
		}
	} else {
		b = make([]float32, n)
	}
	p := &b[0]
	a.out[p] = b
	if _, ok := a.seen[p]; !ok {
		a.seen[p] = struct{}{}
		a.used = append(a.used, b)
	}
	return b[:n:n]
}

// release hands back b, which no tensor refers to any more, if the arena
// handed it out since the last Reset; other buffers are left alone.
func (a *Arena) release(b []float32) {
	if len(b) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := &b[0]
	whole, ok := a.out[p]
	if !ok {
		return
	}
	delete(a.out, p)
	a.free[cap(whole)] = append(a.free[cap(whole)], whole)
}
