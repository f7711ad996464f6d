package nn

import (
	"iter"

	"github.com/proxgen/proxgen/autograd"
)

// RecalibrateBatchNorm re-estimates the running statistics of every
// BatchNorm2d in m from batches, with m's current weights: the statistics
// a network needs after its weights changed without its batch
// normalisations seeing the change (hard quantisation, pruning,
// compaction, weights loaded from elsewhere).
//
// It does what PyTorch's recipe does (torch.optim.swa_utils.update_bn):
// every batch normalisation is reset (ResetRunningStats) and switched to
// the cumulative average (CumulativeAverage, PyTorch's momentum=None),
// then m runs forward in training mode on at most n batches (n ≤ 0: all
// that batches yields), without recording a graph. Each running mean is
// then the equal-weight average of the batch means, each running variance
// that of the batches' unbiased variances, and NumBatchesTracked counts
// the batches, as in PyTorch. A BatchNorm2d that no batch reached keeps
// the reset statistics (mean 0, variance 1), as in PyTorch.
//
// The batches are inputs of shape (N, ...) as m.Forward takes them, each
// with more than one value per channel at every batch normalisation; their
// data are only read, and each is used while the sequence is suspended,
// so a loader may reuse its buffer for the next. The result is
// deterministic: the same weights and batches give the same statistics
// bit for bit, whatever the number of threads.
//
// RecalibrateBatchNorm returns the number of batches used. When batches
// yields none it changes nothing. Otherwise m is left in evaluation mode
// (which uses the new statistics), each BatchNorm2d with its previous
// Momentum and CumulativeAverage settings.
func RecalibrateBatchNorm(m Module, batches iter.Seq[*autograd.Tensor], n int) int {
	bns := BatchNorms(m)
	saved := make([]bool, len(bns)) // CumulativeAverage before
	ctx := &autograd.Context{Arena: autograd.NewArena(), NoGrad: true}
	used := 0
	for x := range batches {
		if used == 0 {
			for i, b := range bns {
				saved[i] = b.CumulativeAverage
				b.ResetRunningStats()
				b.CumulativeAverage = true
			}
			m.SetTraining(true)
		}
		ctx.Arena.Reset()
		m.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(ctx))
		used++
		if n > 0 && used == n {
			break
		}
	}
	if used == 0 {
		return 0
	}
	for i, b := range bns {
		b.CumulativeAverage = saved[i]
	}
	m.SetTraining(false)
	return used
}

// BatchNorms returns every BatchNorm2d of m (m itself, or found through
// Container.Children at any depth), each once, in the order of m's
// children.
func BatchNorms(m Module) []*BatchNorm2d {
	seen := map[*BatchNorm2d]bool{}
	var out []*BatchNorm2d
	var walk func(Module)
	walk = func(m Module) {
		if b, ok := m.(*BatchNorm2d); ok && !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
		if c, ok := m.(Container); ok {
			for _, ch := range c.Children() {
				walk(ch.Module)
			}
		}
	}
	walk(m)
	return out
}
