package autograd

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/internal/parallel"
)

// dropoutGrain is the number of elements whose mask comes from one derived
// random stream. It is fixed, so the mask depends only on rng's state and
// the number of elements, never on the number of workers.
const dropoutGrain = 1 << 14

// splitmix64 is the SplitMix64 output function, used to derive independent
// per-chunk seeds from one seed.
func splitmix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Dropout zeroes each element of x with probability p and scales the
// survivors by 1/(1−p) (inverted dropout, as torch.nn.functional.dropout).
// When training is false or p is 0 it returns x itself. The mask is drawn
// from streams seeded by two values taken from rng, so it is the same for
// the same rng state whatever the number of workers. It panics unless
// 0 <= p <= 1.
func Dropout(x *Tensor, p float32, rng *rand.Rand, training bool) *Tensor {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("autograd.Dropout: probability %v outside [0, 1] for input %v", p, x.shape))
	}
	if !training || p == 0 {
		return x
	}
	c := contextOf("Dropout", x)
	if p == 1 {
		out := c.New(x.shape...)
		// Every element is dropped: the gradient is zero.
		return c.record("Dropout", out, func([]float32) { x.grad() }, x)
	}
	s1, s2 := rng.Uint64(), rng.Uint64()
	out := c.empty(x.shape...)
	// mask holds 0 for dropped elements and 1/(1−p) for kept ones.
	mask := c.alloc(len(x.Data), false)
	scale := 1 / (1 - p)
	pf := float64(p)
	parallel.For(len(x.Data), dropoutGrain, func(lo, hi int) {
		c := uint64(lo / dropoutGrain)
		r := rand.New(rand.NewPCG(splitmix64(s1^splitmix64(c)), splitmix64(s2+c)))
		for i := lo; i < hi; i++ {
			m := float32(0)
			if r.Float64() >= pf {
				m = scale
			}
			mask[i] = m
			out.Data[i] = x.Data[i] * m
		}
	})
	return c.record("Dropout", out, func(g []float32) {
		gx := x.grad()
		forEach(len(g), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gx[i] += g[i] * mask[i]
			}
		})
	}, x)
}
