package proxk

import "sync"

// ChunkSize is the number of elements one work item updates; chunk
// boundaries depend only on the parameter sizes.
const ChunkSize = 4096

// Scratch is the per-worker space of one chunk update: d (C_t + δI, then
// η), g (the gradient with decay or subgradient added), s (the ℓ1/2 fast
// path's variable) and mask (lanes a prox kernel leaves to the float64
// path, a bit each).
type Scratch struct {
	D, G, S [ChunkSize]float32
	Mask    [ChunkSize / 8]uint8
}

var ScratchPool = sync.Pool{New: func() any { return new(Scratch) }}
