package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// ConvConfig holds the hyper-parameters of Conv2dWith: the stride,
// padding and dilation of each axis and, for tests and benchmarks, a
// forced algorithm (see conv.Config).
type ConvConfig = conv.Config

// Conv2d returns the 2-D cross-correlation of x with the filters w plus the
// optional bias b, as torch.nn.functional.conv2d computes it (groups = 1).
// x has shape (N, Cin, H, W), w (Cout, Cin, kh, kw) and b (Cout) or nil.
// The result has shape (N, Cout, Ho, Wo) with
// Ho = ⌊(H + 2·padding − dilation·(kh−1) − 1) / stride⌋ + 1, and likewise Wo.
// The same stride, padding and dilation apply to both axes; zero stride or
// dilation means 1. Use Conv2dWith for per-axis values.
func Conv2d(x, w, b *Tensor, stride, padding, dilation int) *Tensor {
	return Conv2dWith(x, w, b, ConvConfig{
		Stride:   [2]int{stride, stride},
		Padding:  [2]int{padding, padding},
		Dilation: [2]int{dilation, dilation},
	})
}

// Conv2dWith is Conv2d with separate stride, padding and dilation for the
// height and width axes. The convolution engine of package autograd/conv
// computes it (conv.Forward) and its gradients (conv.Backward):
//
// Images are unrolled with im2col into (Cin·kh·kw) × (Ho·Wo) matrices and
// multiplied by the Cout × (Cin·kh·kw) filter matrix with one GEMM per
// image, or per group of images when the images are small. 1×1
// convolutions with stride 1 and no padding use the input image itself as
// that matrix. For stride 1 the matrix is built from the zero-padded image
// with each output row widened to the padded width, which makes every
// matrix row a single contiguous copy; the extra columns are dropped when
// the product is copied to the output. Groups run in parallel. The weight
// gradient sums per-group partial products in group order, so the results
// are bit-identical for every number of workers.
//
// Stride-1 convolutions whose output rows are whole runs of 16 positions,
// or whose outputs are as wide as their inputs, never store the im2col
// matrix: gatherConv multiplies the filters with it read in place from
// one zero-padded copy of each image (blas.GatherA.SgemmGather), straight
// into the output, with results bit-identical to im2col's; with at most
// 64 filters (input channels, for the input gradient) the weight gradient
// reads it in place too (blas.Engine.SgemmGatherT), and both gradients
// share one padded copy of each output gradient (gatherBackward).
//
// 3×3 convolutions with stride 1 and dilation 1 on layers wide enough for
// it to pay (at least 32 input and output channels, and 64 where
// gatherConv's wide layout applies; see winogradPays) compute the output
// and the input gradient with Winograd's F(2×2, 3×3) instead, which needs
// 16 multiplications per 2×2 outputs instead of 36; its results differ
// from im2col's only in rounding (about 4e-6 at most on outputs of unit
// scale with 512 channels, docs/benchmarks.md). Where their channels
// come in whole blocks of 16, at most 64×64 of them, on outputs of at
// least 8×8 pixels and batches of at least 8 images, such layers with
// padding 1 compute the output and the input gradient with the
// channel-blocked Winograd of package autograd/nchwc instead (each image
// converted to its layout and back), bit-identical for every number of
// workers too. The weight gradient of 3×3, stride-1 layers with at least
// 32 input and output channels (16 where the GEMM engine has no
// dot-product kernels) is Winograd's too (F(2×2, 3×3) transposed, summed
// over groups of images in a fixed order).
//
// In a context with Precision BF16 (on a CPU with AVX512_BF16) all three
// products, the output and both gradients, run in bfloat16 with float32
// accumulation (autograd/conv/bf16.go): for strides 1 and 2 without an
// im2col matrix (pairConv for the output and the stride-1 input gradient,
// weightGradWords for the weight gradient), otherwise through im2col or
// col2im and blas.SgemmBF16; still bit-identical for every number of
// workers.
func Conv2dWith(x, w, b *Tensor, cfg ConvConfig) *Tensor {
	g := convGeometry(x, w, b, cfg)
	n, cout := x.shape[0], w.shape[0]
	c := contextOf("Conv2d", x, w, b)
	if c.bf16() {
		g = g.BF16()
	}
	ho, wo := g.Out()
	out := c.empty(n, cout, ho, wo) // every element is written by conv.Forward
	conv.Forward(g, n, cout, x.Data, w.Data, tensorData(b), out.Data)
	return c.record("Conv2d", out, convGrad(g, x, w, b, n), x, w, b)
}

// convGrad returns the backward function of a convolution of geometry g.
func convGrad(g *conv.Geom, x, w, b *Tensor, n int) func(gy []float32) {
	ho, wo := g.Out()
	p := ho * wo
	return func(gy []float32) {
		if b != nil && b.requiresGrad {
			biasGrad(b.grad(), gy, n, p)
		}
		if w.requiresGrad || x.requiresGrad {
			convBackward(g, x, w, gy)
		}
	}
}

// biasGrad adds to gb (one element per channel) the sums of the output
// gradient gy of n images over their planes of p elements: gb[c] +=
// Σ_i Σ gy_i[c], each plane summed by kernels.Sum and the planes added in
// image order in float64. A chunk of channels reads each image's planes
// as one contiguous block, which keeps the reads streaming where the
// planes are small; the chunks never change the sums.
func biasGrad(gb, gy []float32, n, p int) {
	const maxGrain = 64
	cout := len(gb)
	ySize := cout * p
	parallel.For(cout, min(maxGrain, max(1, 4096/p)), func(lo, hi int) {
		var s [maxGrain]float64
		for i := 0; i < n; i++ {
			for c := lo; c < hi; c++ {
				s[c-lo] += kernels.Sum(gy[i*ySize+c*p : i*ySize+(c+1)*p])
			}
		}
		for c := lo; c < hi; c++ {
			gb[c] += float32(s[c-lo])
		}
	})
}

// convBackward accumulates the input and weight gradients of a convolution
// with geometry g given the output gradient gy (conv.Backward), the input
// gradient stored where x has none yet.
func convBackward(g *conv.Geom, x, w *Tensor, gy []float32) {
	var gx, gw []float32
	store := false
	if x.requiresGrad {
		gx, store = x.gradTarget()
	}
	if w.requiresGrad {
		gw = w.grad()
	}
	conv.Backward(g, x.shape[0], w.shape[0], x.Data, w.Data, gy, gx, gw, store)
}

// convGeometry validates the operands of Conv2dWith and returns the
// per-image geometry. It panics naming the shapes on any mismatch.
func convGeometry(x, w, b *Tensor, cfg ConvConfig) *conv.Geom {
	const op = "Conv2d"
	if x.Rank() != 4 || w.Rank() != 4 {
		panic(fmt.Sprintf("autograd.%s: input must have rank 4 (N,Cin,H,W) and weight rank 4 (Cout,Cin,kh,kw), got input %v, weight %v",
			op, x.shape, w.shape))
	}
	if x.shape[1] != w.shape[1] {
		panic(fmt.Sprintf("autograd.%s: input has %d channels but weight expects %d: input %v, weight %v",
			op, x.shape[1], w.shape[1], x.shape, w.shape))
	}
	if w.shape[0] < 1 || w.shape[2] < 1 || w.shape[3] < 1 {
		panic(fmt.Sprintf("autograd.%s: weight %v has an empty dimension (input %v)", op, w.shape, x.shape))
	}
	if b != nil && (b.Rank() != 1 || b.shape[0] != w.shape[0]) {
		panic(fmt.Sprintf("autograd.%s: bias shape %v does not match weight %v (want [%d])", op, b.shape, w.shape, w.shape[0]))
	}
	g, err := conv.NewGeom(x.shape[1], x.shape[2], x.shape[3], w.shape[2], w.shape[3], cfg)
	if err != nil {
		panic(fmt.Sprintf("autograd.%s: %v (input %v, weight %v)", op, err, x.shape, w.shape))
	}
	return g
}

// tensorData returns t.Data, or nil for a nil t.
func tensorData(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Data
}
