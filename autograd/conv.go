package autograd

import (
	"fmt"
	"sync"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/parallel"
)

// ConvConfig holds the hyper-parameters of Conv2dWith. Each array is
// indexed [height, width]. A zero Stride or Dilation entry means 1.
type ConvConfig struct {
	Stride   [2]int // step between output positions
	Padding  [2]int // implicit zeros added on both sides of the input
	Dilation [2]int // spacing between kernel taps
}

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
// height and width axes.
//
// Each image is unrolled with im2col into a (Cin·kh·kw) × (Ho·Wo) matrix
// and multiplied by the (Cout) × (Cin·kh·kw) filter matrix in one GEMM that
// writes the image's output directly; 1×1 convolutions with stride 1 and no
// padding use the input image as that matrix. Images run in parallel. The
// weight gradient sums per-chunk partial products in chunk order, so the
// results are bit-identical for every number of workers.
func Conv2dWith(x, w, b *Tensor, cfg ConvConfig) *Tensor {
	g := convGeometry(x, w, b, cfg)
	n, cout := x.shape[0], w.shape[0]
	k, p := g.rows, g.cols
	xSize := g.c * g.h * g.w
	ySize := cout * p
	direct := g.direct()

	out := New(n, cout, g.ho, g.wo)
	gemm := gemmFor(n)
	parallel.For(n, 1, func(lo, hi int) {
		var col []float32
		if !direct {
			col = colScratch.get(k * p)
			defer colScratch.put(col)
		}
		for i := lo; i < hi; i++ {
			src := x.Data[i*xSize : (i+1)*xSize]
			if !direct {
				im2col(g, src, col)
				src = col
			}
			y := out.Data[i*ySize : (i+1)*ySize]
			beta := float32(0)
			if b != nil {
				for c, v := range b.Data {
					fill(y[c*p:(c+1)*p], v)
				}
				beta = 1
			}
			gemm(false, false, cout, p, k, 1, w.Data, k, src, p, beta, y, p)
		}
	})

	return record("Conv2d", out, func(gy []float32) {
		if b != nil && b.requiresGrad {
			gb := b.grad()
			parallel.For(cout, 1, func(lo, hi int) {
				for c := lo; c < hi; c++ {
					s := 0.0
					for i := 0; i < n; i++ {
						for _, v := range gy[i*ySize+c*p : i*ySize+(c+1)*p] {
							s += float64(v)
						}
					}
					gb[c] += float32(s)
				}
			})
		}
		needW, needX := w.requiresGrad, x.requiresGrad
		if !needW && !needX {
			return
		}
		var gx []float32
		if needX {
			gx = x.grad()
		}
		grain := 1
		var merge *orderedSum
		if needW {
			grain = weightGradGrain(n, p)
			merge = newOrderedSum(w.grad(), parallel.Chunks(n, grain))
		}
		gemm := gemmFor(parallel.Chunks(n, grain))
		parallel.For(n, grain, func(lo, hi int) {
			var col, part []float32
			if !direct {
				col = colScratch.get(k * p)
				defer colScratch.put(col)
			}
			if needW {
				part = partialScratch.get(cout * k)
			}
			for i := lo; i < hi; i++ {
				xi := x.Data[i*xSize : (i+1)*xSize]
				gyi := gy[i*ySize : (i+1)*ySize]
				if needW {
					// dW += dY_i · col_iᵀ
					src := xi
					if !direct {
						im2col(g, xi, col)
						src = col
					}
					beta := float32(1)
					if i == lo {
						beta = 0 // part holds stale data; beta 0 never reads it
					}
					gemm(false, true, cout, k, p, 1, gyi, p, src, p, beta, part, k)
				}
				if needX {
					// dcol = Wᵀ · dY_i, folded back onto the image.
					gxi := gx[i*xSize : (i+1)*xSize]
					if direct {
						gemm(true, false, k, p, cout, 1, w.Data, k, gyi, p, 1, gxi, p)
						continue
					}
					gemm(true, false, k, p, cout, 1, w.Data, k, gyi, p, 0, col, p)
					col2im(g, col, gxi)
				}
			}
			if needW {
				merge.add(lo/grain, part)
			}
		})
	}, x, w, b)
}

// convGeometry validates the operands of Conv2dWith and returns the
// per-image geometry. It panics naming the shapes on any mismatch.
func convGeometry(x, w, b *Tensor, cfg ConvConfig) *convGeom {
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
	for i := range 2 {
		if cfg.Stride[i] == 0 {
			cfg.Stride[i] = 1
		}
		if cfg.Dilation[i] == 0 {
			cfg.Dilation[i] = 1
		}
		if cfg.Stride[i] < 0 || cfg.Dilation[i] < 0 || cfg.Padding[i] < 0 {
			panic(fmt.Sprintf("autograd.%s: invalid stride %v, padding %v or dilation %v (input %v, weight %v)",
				op, cfg.Stride, cfg.Padding, cfg.Dilation, x.shape, w.shape))
		}
	}
	g := &convGeom{
		c: x.shape[1], h: x.shape[2], w: x.shape[3],
		kh: w.shape[2], kw: w.shape[3],
		sh: cfg.Stride[0], sw: cfg.Stride[1],
		ph: cfg.Padding[0], pw: cfg.Padding[1],
		dh: cfg.Dilation[0], dw: cfg.Dilation[1],
	}
	g.ho = outSize(g.h, g.kh, g.sh, g.ph, g.dh)
	g.wo = outSize(g.w, g.kw, g.sw, g.pw, g.dw)
	if g.ho < 1 || g.wo < 1 {
		panic(fmt.Sprintf("autograd.%s: input %v is too small for weight %v with stride %v, padding %v, dilation %v",
			op, x.shape, w.shape, cfg.Stride, cfg.Padding, cfg.Dilation))
	}
	g.rows = g.c * g.kh * g.kw
	g.cols = g.ho * g.wo
	return g
}

// direct reports whether the input image already is the im2col matrix: a
// 1×1 kernel with stride 1 and no padding.
func (g *convGeom) direct() bool {
	return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0
}

// weightGradGrain returns how many images share one partial weight
// gradient. It depends only on the batch size and the output plane size
// p, never on the worker count, and keeps each chunk's GEMM at least 512
// output positions deep so that merging partials stays cheap.
func weightGradGrain(n, p int) int {
	return max(1, min((512+p-1)/p, 8, n))
}

// gemmFor returns the GEMM to call inside a parallel loop of the given
// number of chunks: the serial one when the chunks alone keep every worker
// busy, the parallel one otherwise. Both give identical results.
func gemmFor(chunks int) func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if chunks >= parallel.Workers() {
		return blas.SgemmSerial
	}
	return blas.Sgemm
}

// fill sets every element of s to v.
func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}

// orderedSum adds per-chunk partial sums into dst in chunk order as chunks
// finish, so the result is independent of which worker ran which chunk and
// at most a few partial buffers are alive at once.
type orderedSum struct {
	mu      sync.Mutex
	dst     []float32
	next    int
	pending [][]float32
}

func newOrderedSum(dst []float32, chunks int) *orderedSum {
	return &orderedSum{dst: dst, pending: make([][]float32, chunks)}
}

// add hands over the partial sum of chunk c, which must come from
// partialScratch; add returns it there once it has been merged.
func (s *orderedSum) add(c int, part []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[c] = part
	for s.next < len(s.pending) && s.pending[s.next] != nil {
		p := s.pending[s.next]
		for i, v := range p {
			s.dst[i] += v
		}
		partialScratch.put(p)
		s.pending[s.next] = nil
		s.next++
	}
}
