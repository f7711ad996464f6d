package autograd

import (
	"fmt"
	"math"
	"unsafe"

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
// Statistics are accumulated in float64, per (n, c) plane in one sweep
// over the batch in memory order and then per channel in image order, a
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

// planeSums returns room for two float64 sums per plane of n planes, from
// c's arena where it has one (which hands out float32 buffers starting on
// an allocation's first byte: 4n of them, read as 2n float64), else from
// make; done hands the buffer back.
func planeSums(c *Context, n int) (s []float64, done func()) {
	if c == nil || c.Arena == nil {
		return make([]float64, 2*n), func() {}
	}
	b := c.alloc(4*n, false)
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(float64(0)) != 0 {
		c.release(b)
		return make([]float64, 2*n), func() {}
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), 2*n), func() { c.release(b) }
}

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
		// The statistics of each (n, c) plane in one sweep over x in
		// memory order, then each channel's in image order: the sums
		// one task per channel would make, with x read as one stream.
		part, done := planeSums(ctx, batch*ch)
		defer done()
		parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				k := float64(x.Data[p%ch*sp]) // shift against cancellation
				part[2*p], part[2*p+1] = kernels.Stats(x.Data[p*sp:(p+1)*sp], k)
			}
		})
		for c := range ch {
			k := float64(x.Data[c*sp])
			var s1, s2 float64
			for n := 0; n < batch; n++ {
				s1 += part[2*(n*ch+c)]
				s2 += part[2*(n*ch+c)+1]
			}
			m := s1 / float64(cnt)
			v := max((s2-s1*m)/float64(cnt), 0)
			setChannel(c, k+m, 1/math.Sqrt(v+float64(eps)))
			if training && runMean != nil {
				unbiased := v * float64(cnt) / float64(cnt-1)
				runMean.Data[c] = (1-momentum)*runMean.Data[c] + momentum*float32(mean[c])
				runVar.Data[c] = (1-momentum)*runVar.Data[c] + momentum*float32(unbiased)
			}
		}
	} else {
		for c := range ch {
			setChannel(c, float64(runMean.Data[c]), 1/math.Sqrt(float64(runVar.Data[c])+float64(eps)))
		}
	}
	parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			normPlane(p)
		}
	})

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
		// Behind the ReLU alone, y > 0 exactly where the affine map of
		// the forward pass is: the kernels recompute the mask from x
		// (where they can) instead of reading y.
		reluMask := epi == kernels.ReLU && mask != nil
		// Σdy and Σdy·(x − mean) of each plane in one sweep in memory
		// order, then each channel's in image order (the sums one task
		// per channel would make), then dx in a second sweep. With batch
		// statistics dx = gamma·invStd·(dy − Σdy/n − x̂·Σ(dy·x̂)/n),
		// x̂ = (x − mean)·invStd, where dy is g masked by the ReLU.
		var part []float64
		if needSums {
			var done func()
			part, done = planeSums(ctx, batch*ch)
			defer done()
		}
		parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				c, o := p%ch, p*sp
				if gr != nil {
					kernels.MaskedGrad(gr[o:o+sp], g[o:o+sp], y[o:o+sp], rFresh)
				}
				switch {
				case needSums && reluMask:
					part[2*p], part[2*p+1] = kernels.GradSumsReLU(dy[o:o+sp], mask[o:o+sp], x.Data[o:o+sp], mean[c], meanF[c], scale[c], shift[c])
				case needSums:
					part[2*p], part[2*p+1] = kernels.GradSums(dy[o:o+sp], plane(mask, o, sp), x.Data[o:o+sp], mean[c])
				}
			}
		})
		k1 := make([]float32, ch)
		k2 := make([]float32, ch)
		k3 := make([]float32, ch)
		for c := range ch {
			var sdy, sdyx float64
			for n := 0; needSums && n < batch; n++ {
				sdy += part[2*(n*ch+c)]
				sdyx += part[2*(n*ch+c)+1]
			}
			if gg != nil {
				gg[c] += float32(sdyx * invStd[c])
			}
			if gb != nil {
				gb[c] += float32(sdy)
			}
			a := invStd[c]
			if gamma != nil {
				a *= float64(gamma.Data[c])
			}
			k1[c] = float32(a)
			if useBatch {
				k2[c] = float32(-a * invStd[c] * invStd[c] * sdyx / float64(cnt))
				k3[c] = float32(-a * sdy / float64(cnt))
			}
		}
		if gx == nil {
			return
		}
		parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				c, o := p%ch, p*sp
				if reluMask {
					kernels.AffineGradReLU(gx[o:o+sp], dy[o:o+sp], mask[o:o+sp], x.Data[o:o+sp], meanF[c], k1[c], k2[c], k3[c], scale[c], shift[c], xFresh)
				} else {
					kernels.AffineGrad(gx[o:o+sp], dy[o:o+sp], plane(mask, o, sp), x.Data[o:o+sp], meanF[c], k1[c], k2[c], k3[c], xFresh)
				}
			}
		})
	}, inputs...)
}
