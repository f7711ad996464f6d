package conv

import (
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
)

// The weight gradient of a 3×3 convolution (stride 1, padding 1) of 2×2
// images, VGG-16's last stage on 32×32 inputs, as one dense product.
// There every input pixel p reaches every output pixel q, through the tap
// (p_i − q_i + 1, p_j − q_j + 1): the convolution is the product of each
// image's 4·Cin values (NCHW order) with a dense 4·Cout × 4·Cin matrix Wd
// of the filters' taps, Wd[(o, q), (c, p)] = w[o][c][tap(p, q)], and the
// weight gradient is dWd = dYᵀ·X (4·Cout × 4·Cin, depth the batch's
// images, read in place in NCHW order) folded onto the taps: 16 products
// per filter and image where im2col's takes 36 (9 taps × 4 outputs), with
// neither a column matrix nor Winograd's transforms.

// denseWeightOK reports whether the weight gradient of a convolution of
// geometry g with n images and cout filters runs as one dense product
// (denseWeightGrad): under the default rules, where the channel-blocked
// Winograd's geometry applies (blockedOK: float32, 3×3 filters, stride
// 1, padding 1, no dilation), on 2×2 images; at least 64 input and
// output channels and 32 images, where it was measured (512 channels at
// batch 128: 10.3 + 7.0 ms for the product and the fold against 30.3 ms
// for the im2col weight gradient the rules chose, 1 worker,
// docs/benchmarks.md).
func denseWeightOK(g *Geom, n, cout int) bool {
	return blockedOK(g) && g.algo == AlgoAuto && g.h == 2 && g.w == 2 && g.c >= 64 && cout >= 64 && n >= 32
}

// denseWeightGrad adds to gw (cout × g.c × 3 × 3) the weight gradient of
// the convolution of geometry g (denseWeightOK) of the n images in x with
// cout filters, given its output gradient gy: dWd = dYᵀ·X in one blas.Sgemm
// (its depth, the images, never split between workers), then each
// filter's 16 entries summed onto its 9 taps in a fixed order (ranges of
// filters in parallel). The result does not depend on the number of
// workers.
func denseWeightGrad(g *Geom, n, cout int, x, gy, gw []float32) {
	c := g.c
	wd := partialScratch.get(16 * cout * c)
	defer partialScratch.put(wd)
	blas.Sgemm(true, false, 4*cout, 4*c, n, 1, gy, 4*cout, x, 4*c, 0, wd, 4*c)
	parallel.For(cout, 8, func(lo, hi int) {
		denseFold(wd, c, gw, lo, hi)
	})
}

// denseFold adds to the filters of the output channels [lo, hi) in gw
// (c inputs each) the sums over their taps of the dense gradient wd
// (4·c columns a row, rows (o, q)): for each filter the 16 entries
// (q, p) in the order of q, then p, summed from zero onto tap(p, q), each
// tap's sum then added to gw.
func denseFold(wd []float32, c int, gw []float32, lo, hi int) {
	for o := lo; o < hi; o++ {
		r0 := wd[(4*o+0)*4*c : (4*o+1)*4*c]
		r1 := wd[(4*o+1)*4*c : (4*o+2)*4*c]
		r2 := wd[(4*o+2)*4*c : (4*o+3)*4*c]
		r3 := wd[(4*o+3)*4*c : (4*o+4)*4*c]
		dst := gw[o*c*9 : (o+1)*c*9]
		for ci := range c {
			a, b, d, e := r0[4*ci:4*ci+4], r1[4*ci:4*ci+4], r2[4*ci:4*ci+4], r3[4*ci:4*ci+4]
			f := dst[9*ci : 9*ci+9 : 9*ci+9]
			// Output q = (q_i, q_j) row by row; input p likewise; tap
			// (p_i − q_i + 1)·3 + p_j − q_j + 1.
			var t [9]float32
			// q = (0, 0): taps 4, 5, 7, 8.
			t[4] += a[0]
			t[5] += a[1]
			t[7] += a[2]
			t[8] += a[3]
			// q = (0, 1): taps 3, 4, 6, 7.
			t[3] += b[0]
			t[4] += b[1]
			t[6] += b[2]
			t[7] += b[3]
			// q = (1, 0): taps 1, 2, 4, 5.
			t[1] += d[0]
			t[2] += d[1]
			t[4] += d[2]
			t[5] += d[3]
			// q = (1, 1): taps 0, 1, 3, 4.
			t[0] += e[0]
			t[1] += e[1]
			t[3] += e[2]
			t[4] += e[3]
			for j, v := range t {
				f[j] += v
			}
		}
	}
}
