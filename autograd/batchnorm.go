package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd/parallel"
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
	return batchNorm("BatchNorm2d", x, gamma, beta, runMean, runVar, training, momentum, eps)
}

// BatchNorm1d is BatchNorm2d for (N, C) or (N, C, L) inputs, normalising
// each channel over the batch (and length) dimensions, as
// torch.nn.BatchNorm1d does.
func BatchNorm1d(x, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
	if r := len(x.shape); r != 2 && r != 3 {
		panic(fmt.Sprintf("autograd.BatchNorm1d: x must have rank 2 or 3, got shape %v", x.shape))
	}
	return batchNorm("BatchNorm1d", x, gamma, beta, runMean, runVar, training, momentum, eps)
}

// mustChannelVec panics unless t is nil or has shape (c).
func mustChannelVec(op, name string, t, x *Tensor, c int) {
	if t != nil && (len(t.shape) != 1 || t.shape[0] != c) {
		panic(fmt.Sprintf("autograd.%s: %s shape %v does not match x %v (want [%d])", op, name, t.shape, x.shape, c))
	}
}

// bnStats returns Σ(v−k) and Σ(v−k)² over blk in float64, with four
// accumulators combined in a fixed order.
func bnStats(blk []float32, k float64) (s1, s2 float64) {
	var a0, a1, a2, a3, q0, q1, q2, q3 float64
	i := 0
	for ; i+4 <= len(blk); i += 4 {
		d0 := float64(blk[i]) - k
		d1 := float64(blk[i+1]) - k
		d2 := float64(blk[i+2]) - k
		d3 := float64(blk[i+3]) - k
		a0 += d0
		a1 += d1
		a2 += d2
		a3 += d3
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	for ; i < len(blk); i++ {
		d := float64(blk[i]) - k
		a0 += d
		q0 += d * d
	}
	return (a0 + a1) + (a2 + a3), (q0 + q1) + (q2 + q3)
}

// bnGradSums returns Σdy and Σdy·(x−mean) over a block in float64, with
// four accumulators combined in a fixed order.
func bnGradSums(dy, x []float32, mean float64) (sdy, sdyx float64) {
	x = x[:len(dy)]
	var a0, a1, a2, a3, b0, b1, b2, b3 float64
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		g0, g1, g2, g3 := float64(dy[i]), float64(dy[i+1]), float64(dy[i+2]), float64(dy[i+3])
		a0 += g0
		a1 += g1
		a2 += g2
		a3 += g3
		b0 += g0 * (float64(x[i]) - mean)
		b1 += g1 * (float64(x[i+1]) - mean)
		b2 += g2 * (float64(x[i+2]) - mean)
		b3 += g3 * (float64(x[i+3]) - mean)
	}
	for ; i < len(dy); i++ {
		g := float64(dy[i])
		a0 += g
		b0 += g * (float64(x[i]) - mean)
	}
	return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)
}

// planeGrain is the number of (n, c) planes of size s per parallel chunk.
func planeGrain(s int) int { return max(1, (1<<14)/max(s, 1)) }

func batchNorm(op string, x, gamma, beta, runMean, runVar *Tensor, training bool, momentum, eps float32) *Tensor {
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
	out := empty(x.shape...)
	normPlane := func(p int) { // p = n·C + c
		c := p % ch
		m, a, b := meanF[c], scale[c], shift[c]
		dst := out.Data[p*sp : (p+1)*sp]
		for i, v := range x.Data[p*sp : (p+1)*sp] {
			dst[i] = (v-m)*a + b
		}
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
					a, b := bnStats(x.Data[o:o+sp], k)
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

	return record(op, out, func(g []float32) {
		var gx, gg, gb []float32
		if x.requiresGrad {
			gx = x.grad()
		}
		if gamma != nil && gamma.requiresGrad {
			gg = gamma.grad()
		}
		if beta != nil && beta.requiresGrad {
			gb = beta.grad()
		}
		// gradPlane adds k1·dy + k2·(x − mean) + k3 to plane p of gx.
		gradPlane := func(p int, k1, k2, k3 float32) {
			m := meanF[p%ch]
			o := p * sp
			xs := x.Data[o : o+sp]
			dst := gx[o : o+sp]
			for i, v := range g[o : o+sp] {
				dst[i] += k1*v + k2*(xs[i]-m) + k3
			}
		}
		if !useBatch && gg == nil && gb == nil {
			// Fixed statistics and no parameter gradients: dx = scale·dy.
			parallel.For(batch*ch, planeGrain(sp), func(lo, hi int) {
				for p := lo; p < hi; p++ {
					gradPlane(p, scale[p%ch], 0, 0)
				}
			})
			return
		}
		// One task per channel: Σdy and Σdy·(x − mean) in a fixed order,
		// then the channel's planes of dx. With batch statistics
		// dx = gamma·invStd·(dy − Σdy/n − x̂·Σ(dy·x̂)/n), x̂ = (x − mean)·invStd.
		parallel.For(ch, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				var sdy, sdyx float64
				for n := 0; n < batch; n++ {
					o := (n*ch + c) * sp
					a, b := bnGradSums(g[o:o+sp], x.Data[o:o+sp], mean[c])
					sdy += a
					sdyx += b
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
					gradPlane(n*ch+c, float32(a), k2, k3)
				}
			}
		})
	}, x, gamma, beta)
}
