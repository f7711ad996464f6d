package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// BatchNorm2d normalises each channel of the (N, C, H, W) batch x, as
// torch.nn.functional.batch_norm does:
//
//	y = (x − mean_c) / sqrt(var_c + eps) · gamma_c + beta_c
//
// gamma and beta have shape (C) and may be nil (no affine transform).
// runMean and runVar have shape (C) and may both be nil (no running
// statistics; the batch statistics are then used in both modes).
//
// In training mode mean_c and var_c are the batch mean and biased variance
// over N·H·W elements, and the running statistics are updated in place:
// run = (1−momentum)·run + momentum·stat, with the unbiased variance for
// runVar. The gradient flows through the batch statistics. In evaluation
// mode the running statistics are used and the op is an affine map.
//
// Statistics are accumulated in float64, one channel per task and in a
// fixed order, so results are bit-identical for any number of workers.
func BatchNorm2d(x, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	mustRank("BatchNorm2d", "x", x, 4)
	return batchNorm("BatchNorm2d", x, nil, kernels.Plain, gamma, beta, runMean, runVar, training, momentum, eps)
}

// BatchNormReLU returns ReLU(BatchNorm2d(x, ...)) computed as one op: the
// forward pass normalises and clamps in one sweep, and the backward pass
// applies the ReLU mask while it accumulates the batch-norm gradient, so
// neither the normalised batch nor its gradient is ever stored. Results
// equal those of the two separate ops.
func BatchNormReLU(x, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	mustRank("BatchNormReLU", "x", x, 4)
	return batchNorm("BatchNormReLU", x, nil, kernels.ReLU, gamma, beta, runMean, runVar, training, momentum, eps)
}

// BatchNormAddReLU returns ReLU(BatchNorm2d(x, ...) + residual) computed as
// one op, the end of a residual block. residual must have the shape of x.
// Results equal those of the three separate ops.
func BatchNormAddReLU(x, residual, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	mustRank("BatchNormAddReLU", "x", x, 4)
	mustSameShape("BatchNormAddReLU", x, residual)
	return batchNorm("BatchNormAddReLU", x, residual, kernels.AddReLU, gamma, beta, runMean, runVar, training, momentum, eps)
}

// BatchNorm1d is BatchNorm2d for (N, C) or (N, C, L) inputs, normalising
// each channel over the batch (and length) dimensions, as
// torch.nn.BatchNorm1d does.
func BatchNorm1d(x, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	if r := len(x.shape); r != 2 && r != 3 {
		panic(fmt.Sprintf("autograd.BatchNorm1d: x must have rank 2 or 3, got shape %v", x.shape))
	}
	return batchNorm("BatchNorm1d", x, nil, kernels.Plain, gamma, beta, runMean, runVar, training, momentum, eps)
}

// mustChannelVec panics unless t is nil or has shape (c).
func mustChannelVec(op, name string, t, x *Tensor, c int) {
	if t != nil && (len(t.shape) != 1 || t.shape[0] != c) {
		panic(fmt.Sprintf("autograd.%s: %s shape %v does not match x %v (want [%d])", op, name, t.shape, x.shape, c))
	}
}

// plane returns s[o:o+n], or nil when s is nil (an absent optional input).
func plane(s []float32, o, n int) []float32 {
	if s == nil {
		return nil
	}
	return s[o : o+n]
}

// planeGrain is the number of (n, c) planes of size s per parallel chunk.
func planeGrain(s int) int { return max(1, (1<<14)/max(s, 1)) }

// batchNorm normalises x as BatchNorm2d does, followed by the epilogue epi:
// nothing, a ReLU, or adding res (set only for kernels.AddReLU) and a ReLU.
func batchNorm(op string, x, res *Tensor, epi kernels.Epilogue, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	batch, ch := x.shape[0], x.shape[1]
	sp := 1 // elements per (n, c) plane
	for _, d := range x.shape[2:] {
		sp *= d
	}
	mustChannelVec(op, "gamma", gamma, x, ch)
	mustChannelVec(op, "beta", beta, x, ch)
	mustChannelVec(op, "running_mean", runMean, x, ch)
	mustChannelVec(op, "running_var", runVar, x, ch)
	if (runMean == nil) != (runVar == nil) {
		panic(fmt.Sprintf("autograd.%s: running_mean and running_var must both be set or both be nil (x %v)", op, x.shape))
	}
	useBatch := training || runMean == nil
	cnt := batch * sp // elements per channel
	if useBatch && cnt <= 1 {
		panic(fmt.Sprintf("autograd.%s: expected more than 1 value per channel when using batch statistics, got input %v", op, x.shape))
	}

	// Per-channel constants: y = (x − mean)·scale + shift with
	// scale = gamma·invStd and shift = beta.
	mean := make([]float64, ch)
	invStd := make([]float64, ch)
	meanF := make([]float32, ch)
	scale := make([]float32, ch)
	shift := make([]float32, ch)
	setChannel := func(c int, m, is float64) {
		mean[c], invStd[c], meanF[c] = m, is, float32(m)
		if gamma != nil {
			is *= float64(gamma.Data[c])
		}
		scale[c] = float32(is)
		if beta != nil {
			shift[c] = beta.Data[c]
		}
	}
	ctx := contextOf(op, x, res, gamma, beta, runMean, runVar)
	out := ctx.empty(x.shape...)
	var rd []float32 // the residual's data, for kernels.AddReLU
	if res != nil {
		rd = res.Data
	}
	normPlane := func(p int) { // p = n·C + c
		c := p % ch
		o := p * sp
		kernels.Affine(out.Data[o:o+sp], x.Data[o:o+sp], plane(rd, o, sp), meanF[c], scale[c], shift[c], epi)
	}
	if useBatch {
		// One task per channel: its statistics in a fixed order, then
		// its planes while they are still in cache.
		parallel.For(ch, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				k := float64(x.Data[c*sp]) // shift against cancellation
				var s1, s2 float64
				for n := 0; n < batch; n++ {
					o := (n*ch + c) * sp
					a, b := kernels.Stats(x.Data[o:o+sp], k)
					s1 += a
					s2 += b
				}
				m := s1 / float64(cnt)
				v := max((s2-s1*m)/float64(cnt), 0)
				setChannel(c, k+m, 1/math.Sqrt(v+float64(eps)))
				if training && runMean != nil {
					unbiased := v * float64(cnt) / float64(cnt-1)
					runMean.Data[c] = (1-momentum)*runMean.Data[c] + momentum*float32(mean[c])
					runVar.Data[c] = (1-momentum)*runVar.Data[c] + momentum*float32(unbiased)
				}
				for n := 0; n < batch; n++ {
					normPlane(n*ch + c)
				}
			}
		})
	} else {
		for c := range ch {
			setChannel(c, float64(runMean.Data[c]), 1/math.Sqrt(float64(runVar.Data[c])+float64(eps)))
		}
		parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				normPlane(p)
			}
		})
	}

	inputs := []*Tensor{x, gamma, beta}
	if res != nil {
		inputs = append(inputs, res)
	}
	return ctx.record(op, out, func(g []float32) {
		var gx, gg, gb, gr []float32
		var xFresh, rFresh bool
		// The residual's buffer first: when res is x, the residual
		// gradient is stored and the input gradient added to it.
		if res != nil && res.requiresGrad {
			gr, rFresh = res.gradTarget()
		}
		if x.requiresGrad {
			gx, xFresh = x.gradTarget()
		}
		if gamma != nil && gamma.requiresGrad {
			gg = gamma.grad()
		}
		if beta != nil && beta.requiresGrad {
			gb = beta.grad()
		}
		var y []float32 // the ReLU output whose sign masks g
		if epi != kernels.Plain {
			y = out.Data
		}
		needSums := gg != nil || gb != nil || (gx != nil && useBatch)
		// Where the residual gradient is stored fresh it is g masked by
		// the ReLU, value for value: the sums and dx then read it in
		// place of g and y, one stream fewer per pass (unless res is x,
		// whose gradient dx adds to).
		dy, mask := g, y
		if gr != nil && rFresh && res != x {
			dy, mask = gr, nil
		}
		// One task per channel: Σdy and Σdy·(x − mean) in a fixed order,
		// then the channel's planes of dx. With batch statistics
		// dx = gamma·invStd·(dy − Σdy/n − x̂·Σ(dy·x̂)/n), x̂ = (x − mean)·invStd,
		// where dy is g masked by the ReLU.
		parallel.For(ch, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				var sdy, sdyx float64
				for n := 0; n < batch; n++ {
					o := (n*ch + c) * sp
					if gr != nil {
						kernels.MaskedGrad(gr[o:o+sp], g[o:o+sp], y[o:o+sp], rFresh)
					}
					if needSums {
						a, b := kernels.GradSums(dy[o:o+sp], plane(mask, o, sp), x.Data[o:o+sp], mean[c])
						sdy += a
						sdyx += b
					}
				}
				if gg != nil {
					gg[c] += float32(sdyx * invStd[c])
				}
				if gb != nil {
					gb[c] += float32(sdy)
				}
				if gx == nil {
					continue
				}
				a := invStd[c]
				if gamma != nil {
					a *= float64(gamma.Data[c])
				}
				var k2, k3 float32
				if useBatch {
					k2 = float32(-a * invStd[c] * invStd[c] * sdyx / float64(cnt))
					k3 = float32(-a * sdy / float64(cnt))
				}
				for n := 0; n < batch; n++ {
					o := (n*ch + c) * sp
					kernels.AffineGrad(gx[o:o+sp], dy[o:o+sp], plane(mask, o, sp), x.Data[o:o+sp], meanF[c], float32(a), k2, k3, xFresh)
				}
			}
		})
	}, inputs...)
}
