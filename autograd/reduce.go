package autograd

import (
	"github.com/proxgen/proxgen/internal/parallel"
)

// reduceGrain is the fixed chunk size of full reductions: partial sums of
// each chunk are combined in chunk order, so the result does not depend on
// the number of workers.
const reduceGrain = 1 << 14

// sum64 returns Σ data in float64 with a worker-count-independent order.
func sum64(data []float32) float64 {
	partial := make([]float64, parallel.Chunks(len(data), reduceGrain))
	parallel.For(len(data), reduceGrain, func(lo, hi int) {
		s := 0.0
		for _, v := range data[lo:hi] {
			s += float64(v)
		}
		partial[lo/reduceGrain] = s
	})
	total := 0.0
	for _, s := range partial {
		total += s
	}
	return total
}

// Sum returns the sum of all elements as a one-element tensor.
func Sum(x *Tensor) *Tensor {
	c := contextOf("Sum", x)
	out := c.empty()
	out.Data[0] = float32(sum64(x.Data))
	return c.record("Sum", out, func(g []float32) {
		gx := x.grad()
		forEach(len(gx), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gx[i] += g[0]
			}
		})
	}, x)
}

// Mean returns the mean of all elements as a one-element tensor.
func Mean(x *Tensor) *Tensor {
	n := float32(len(x.Data))
	c := contextOf("Mean", x)
	out := c.empty()
	out.Data[0] = float32(sum64(x.Data) / float64(len(x.Data)))
	return c.record("Mean", out, func(g []float32) {
		gx := x.grad()
		d := g[0] / n
		forEach(len(gx), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gx[i] += d
			}
		})
	}, x)
}
