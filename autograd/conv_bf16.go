package autograd

import (
	"sync"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
)

// pairConv computes a stride-1 convolution (g.wide()) in bfloat16 without
// an im2col matrix: each image is converted once into pairs of channels
// on its zero-padded planes (blas.BF16PlaneRows), and the product with the
// filters reads, for pair row (ki, kj, channel pair), that image shifted
// by the tap (blas.BF16PackedA.MulPairRows), on the wide output grid of
// im2colWide, whose extra columns are dropped when the product is copied
// out. The filters are packed once per call, their K in (ki, kj, c) order
// with the channels padded to an even count (so they differ in rounding
// from im2col's products, whose K runs in (c, ki, kj) order); results do
// not depend on the number of workers (each image is one product).
type pairConv struct {
	g      *convGeom
	m      int // output channels
	pa     *blas.BF16PackedA
	offs   []int32
	plane  int // words per padded plane: a multiple of 32 with room for the taps' reach
	cpairs int
}

// pairConvOK reports whether pairConv computes convolutions of geometry g:
// stride 1 and no negative padding.
func pairConvOK(g *convGeom) bool { return g.wide() }

// newPairConv packs the filters for m output channels: filter(o, c, ki,
// kj) returns the weight of output o, input channel c < g.c and tap
// (ki, kj).
func newPairConv(g *convGeom, m int, filter func(o, c, ki, kj int) float32) *pairConv {
	wp, hp := g.widePitch(), g.h+2*g.ph
	pc := &pairConv{g: g, m: m, cpairs: (g.c + 1) / 2}
	pc.plane = roundUp32(hp*wp + (g.kw-1)*g.dw)
	taps := g.kh * g.kw
	k := taps * pc.cpairs * 2
	wk := make([]float32, m*k)
	for o := 0; o < m; o++ {
		row := wk[o*k : (o+1)*k]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				for c := 0; c < g.c; c++ {
					row[(ki*g.kw+kj)*pc.cpairs*2+c] = filter(o, c, ki, kj)
				}
			}
		}
	}
	pc.pa = blas.PackBF16A(false, m, k, wk, k)
	pc.offs = make([]int32, taps*pc.cpairs)
	for ki := 0; ki < g.kh; ki++ {
		for kj := 0; kj < g.kw; kj++ {
			for cp := 0; cp < pc.cpairs; cp++ {
				pc.offs[(ki*g.kw+kj)*pc.cpairs+cp] = int32(cp*pc.plane + ki*g.dh*wp + kj*g.dw)
			}
		}
	}
	return pc
}

func roundUp32(n int) int { return (n + 31) &^ 31 }

// pairScratch holds the pair images of the workers.
var pairScratch = sync.Pool{New: func() any { return new([]uint32) }}

// run sets (or, if accumulate, adds to) the outputs of the n images of src
// (srcSize values apart) in dst (dstSize apart).
func (pc *pairConv) run(n int, src []float32, srcSize int, dst []float32, dstSize int, accumulate bool) {
	g := pc.g
	wp := g.widePitch()
	cols := g.ho * wp // product columns: the wide output grid
	p := g.ho * g.wo
	parallel.For(n, 1, func(lo, hi int) {
		bufp := pairScratch.Get().(*[]uint32)
		if need := pc.cpairs * pc.plane; cap(*bufp) < need {
			*bufp = make([]uint32, need)
		}
		pairs := (*bufp)[:pc.cpairs*pc.plane]
		clear(pairs) // the padding, which the images never overwrite
		tmp := colScratch.get(pc.m * cols)
		hw := g.h * g.w
		for i := lo; i < hi; i++ {
			x := src[i*srcSize : (i+1)*srcSize]
			for cp := 0; cp < pc.cpairs; cp++ {
				single := 2*cp+1 >= g.c
				at := cp*pc.plane + g.ph*wp + g.pw
				blas.BF16PlaneRows(pairs[at:], wp, x[2*cp*hw:], g.w, hw, g.h, g.w, single)
			}
			pc.pa.MulPairRows(cols, blas.PairRows{Src: pairs, Offs: pc.offs}, 0, tmp, cols)
			out := dst[i*dstSize : (i+1)*dstSize]
			for o := 0; o < pc.m; o++ {
				for oh := 0; oh < g.ho; oh++ {
					d := out[o*p+oh*g.wo : o*p+(oh+1)*g.wo]
					t := tmp[o*cols+oh*wp : o*cols+oh*wp+g.wo]
					if !accumulate {
						copy(d, t)
						continue
					}
					for j, v := range t {
						d[j] += v
					}
				}
			}
		}
		colScratch.put(tmp)
		pairScratch.Put(bufp)
	})
}

// padPlane writes channel c of the image x zero-padded into plane (the
// padded rows g.widePitch() apart, zeros after them).
func padPlane(g *convGeom, x []float32, c int, plane []float32) {
	wp := g.widePitch()
	clear(plane)
	for ih := 0; ih < g.h; ih++ {
		at := (ih+g.ph)*wp + g.pw
		copy(plane[at:at+g.w], x[(c*g.h+ih)*g.w:(c*g.h+ih+1)*g.w])
	}
}

// weightGradWords returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·col_iᵀ over the images i in [lo, hi) of a stride-1
// convolution (g.wide()) in the layout of the weights, computed in
// bfloat16 as its transpose col·dYᵀ with the rows of col read in place:
// each image is converted once to bfloat16 on its zero-padded planes
// (blas.BF16Words), and row (c, ki, kj) of its wide im2col matrix is that
// image from the tap's offset on (blas.SgemmBF16WordRows); dY is
// transposed onto the wide output grid with zeros in its extra columns.
// The images add into the product in order.
func weightGradWords(g *convGeom, cout int, x, gy []float32, lo, hi int) []float32 {
	k, p := g.rows, g.cols
	xSize, ySize := g.c*g.h*g.w, cout*p
	wp, hp := g.widePitch(), g.h+2*g.ph
	// With an even row pitch the planes start one word late if need be,
	// so that every image row starts on a pair and is converted straight
	// into place; otherwise each plane is padded in float32 first.
	direct := wp%2 == 0
	base := 0
	if direct {
		base = g.pw % 2
	}
	plane := roundUp32(base + hp*wp + (g.kw-1)*g.dw + 1) // room for an odd depth's extra value
	cols := g.ho * wp                                    // GEMM depth per image
	offs := make([]int32, k)
	for c := 0; c < g.c; c++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				offs[(c*g.kh+ki)*g.kw+kj] = int32(c*plane + base + ki*g.dh*wp + kj*g.dw)
			}
		}
	}
	bufp := pairScratch.Get().(*[]uint32)
	defer pairScratch.Put(bufp)
	if need := g.c * plane / 2; cap(*bufp) < need {
		*bufp = make([]uint32, need)
	}
	img := (*bufp)[:g.c*plane/2]
	clear(img) // the padding, which direct conversions never overwrite
	pad := colScratch.get(plane)
	defer colScratch.put(pad)
	dyT := colScratch.get(cols * cout)
	defer colScratch.put(dyT)
	tmp := colScratch.get(p * cout)
	defer colScratch.put(tmp)
	partT := colScratch.get(k * cout)
	defer colScratch.put(partT)
	for i := lo; i < hi; i++ {
		xi := x[i*xSize : (i+1)*xSize]
		for c := 0; c < g.c; c++ {
			if !direct {
				padPlane(g, xi, c, pad)
				blas.BF16Words(img[c*plane/2:(c+1)*plane/2], pad)
				continue
			}
			for ih := 0; ih < g.h; ih++ {
				at := c*plane + base + (ih+g.ph)*wp + g.pw // even
				blas.BF16Words(img[at/2:at/2+(g.w+1)/2], xi[(c*g.h+ih)*g.w:(c*g.h+ih+1)*g.w])
			}
		}
		transpose(cout, p, gy[i*ySize:(i+1)*ySize], tmp)
		for oh := 0; oh < g.ho; oh++ {
			row := dyT[oh*wp*cout : (oh+1)*wp*cout]
			copy(row, tmp[oh*g.wo*cout:(oh+1)*g.wo*cout])
			clear(row[g.wo*cout:])
		}
		beta := float32(1)
		if i == lo {
			beta = 0
		}
		blas.SgemmBF16WordRows(k, cout, cols, blas.WordRows{Src: img, Offs: offs}, dyT, cout, beta, partT, cout)
	}
	part := partialScratch.get(cout * k)
	transpose(k, cout, partT, part)
	return part
}
