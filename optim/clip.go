package optim

import (
	"math"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
)

// clipGrain is the fixed chunk size of the gradient-norm reduction, so the
// norm does not depend on the number of workers.
const clipGrain = 1 << 15

// ClipGradNorm returns the Euclidean norm of the gradients of params (nil
// gradients count as zero) and, when maxNorm > 0 and the norm exceeds it,
// scales every gradient by maxNorm/(norm + 1e-6), as PyTorch's
// torch.nn.utils.clip_grad_norm_ does (its clip coefficient clamped to 1).
// The sum of squares is accumulated in float64 in a fixed order, so the
// result does not depend on the number of workers.
func ClipGradNorm(params []*autograd.Tensor, maxNorm float64) float64 {
	ss := 0.0
	for _, p := range params {
		g := p.Grad
		partial := make([]float64, parallel.Chunks(len(g), clipGrain))
		parallel.For(len(g), clipGrain, func(lo, hi int) {
			s := 0.0
			for _, v := range g[lo:hi] {
				s += float64(v) * float64(v)
			}
			partial[lo/clipGrain] = s
		})
		for _, s := range partial {
			ss += s
		}
	}
	norm := math.Sqrt(ss)
	if maxNorm <= 0 {
		return norm
	}
	coef := maxNorm / (norm + 1e-6)
	if coef >= 1 {
		return norm
	}
	k := float32(coef)
	for _, p := range params {
		g := p.Grad
		parallel.For(len(g), clipGrain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= k
			}
		})
	}
	return norm
}
