package conv

import (
	"sync"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// pairConv computes a convolution of stride 1 or 2 (pairConvOK) in
// bfloat16 without an im2col matrix: each image is converted once into
// pairs of channels on its zero-padded planes (blas.BF16PlaneRows; for
// stride 2 on the four phases of each plane, see phaseLayout), and the
// product with the filters reads, for pair row (ki, kj, channel pair),
// that image shifted by the tap (blas.BF16PackedA.MulPairRows), on a wide
// output grid (im2colWide's for stride 1) whose extra columns are dropped
// when the product is copied out, or, where each output row is whole
// column tiles (blas.BF16TileCols), row by row straight into the output
// (accumulating, each block of K then adds to it in turn). The filters
// are packed once per call, their K in (ki, kj, c) order
// with the channels padded to an even count (so they differ in rounding
// from im2col's products, whose K runs in (c, ki, kj) order); results do
// not depend on the number of workers (each image is one product).
type pairConv struct {
	g      *Geom
	m      int // output channels
	pa     *blas.BF16PackedA
	offs   []int32
	l      phaseLayout
	cpairs int
}

// pairConvOK reports whether pairConv and weightGradWords compute
// convolutions of geometry g: stride 1, or stride 2 without dilation, and
// no negative padding.
func pairConvOK(g *Geom) bool {
	return g.wide() || g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && g.ph >= 0 && g.pw >= 0
}

// phaseLayout is how the bfloat16 convolutions lay out each channel of an
// image so that every tap of the filter reads it at one offset: for
// stride 1, the zero-padded plane; for stride 2, the four phases of the
// zero-padded plane (its rows and columns of even and odd index), each a
// plane of its own, tap (ki, kj) reading phase (ki mod 2, kj mod 2)
// shifted by (ki/2, kj/2). The output is computed on the wide grid of
// pitch columns per output row (the extra columns are dropped).
type phaseLayout struct {
	phases int // planes per channel: 1 or 4
	pitch  int // values per row of a plane and columns per output row
	plane  int // values per plane: a multiple of 32 with room for the taps' reach
}

// newPhaseLayout returns the layout of g (pairConvOK), with extra more
// values of room after the reach of the taps.
func newPhaseLayout(g *Geom, extra int) phaseLayout {
	wp, hp := g.widePitch(), g.h+2*g.ph
	if g.sh == 1 {
		return phaseLayout{phases: 1, pitch: wp, plane: roundUp32(hp*wp + (g.kw-1)*g.dw + extra)}
	}
	hpp, wpp := (hp+1)/2, (wp+1)/2
	reach := max(hpp*wpp, (g.ho+(g.kh-1)/2)*wpp+(g.kw-1)/2)
	return phaseLayout{phases: 4, pitch: wpp, plane: roundUp32(reach + extra)}
}

// tap returns the offset of tap (ki, kj) from the start of a channel's
// planes.
func (l phaseLayout) tap(g *Geom, ki, kj int) int {
	if l.phases == 1 {
		return ki*g.dh*l.pitch + kj*g.dw
	}
	return ((ki%2)*2+kj%2)*l.plane + (ki/2)*l.pitch + kj/2
}

// split writes channel c of the image x into its four phase planes at
// planes (stride 2), zeros where the padding is.
func (l phaseLayout) split(g *Geom, x []float32, c int, planes []float32) {
	clear(planes[:4*l.plane])
	for ih := 0; ih < g.h; ih++ {
		y := ih + g.ph
		row := x[(c*g.h+ih)*g.w : (c*g.h+ih+1)*g.w]
		for b := 0; b < 2; b++ {
			// Image columns iw ≡ b − pw (mod 2) land at (iw + pw)/2.
			iw := ((b-g.pw)%2 + 2) % 2
			if iw >= g.w {
				continue
			}
			src := row[iw:]
			at := ((y%2)*2+b)*l.plane + (y/2)*l.pitch + (iw+g.pw)/2
			dst := planes[at : at+(len(src)+1)/2]
			for j := range dst {
				dst[j] = src[2*j]
			}
		}
	}
}

// newPairConv packs the filters for m output channels: filter(o, c, ki,
// kj) returns the weight of output o, input channel c < g.c and tap
// (ki, kj).
func newPairConv(g *Geom, m int, filter func(o, c, ki, kj int) float32) *pairConv {
	pc := &pairConv{g: g, m: m, cpairs: (g.c + 1) / 2, l: newPhaseLayout(g, 0)}
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
				pc.offs[(ki*g.kw+kj)*pc.cpairs+cp] = int32(cp*pc.l.phases*pc.l.plane + pc.l.tap(g, ki, kj))
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
	g, l := pc.g, pc.l
	wp := l.pitch
	cols := g.ho * wp // product columns: the wide output grid
	p := g.ho * g.wo
	span := l.phases * l.plane // words per channel pair
	// Output rows of whole column tiles are computed one by one straight
	// into dst; otherwise the product covers the wide grid at once (fewer
	// idle lanes) and is copied out.
	rowwise := g.wo%blas.BF16TileCols == 0
	// Each image is one product, so the chunks change nothing but how
	// often a worker sets up its buffers.
	parallel.For(n, parallel.Grain(n, 1), func(lo, hi int) {
		bufp := pairScratch.Get().(*[]uint32)
		if need := pc.cpairs * span; cap(*bufp) < need {
			*bufp = make([]uint32, need)
		}
		pairs := (*bufp)[:pc.cpairs*span]
		clear(pairs) // the padding, which the images never overwrite
		var tmp []float32
		if !rowwise {
			tmp = colScratch.get(pc.m * cols)
			defer colScratch.put(tmp)
		}
		var split []float32 // stride 2: the phase planes of two channels
		if l.phases > 1 {
			split = colScratch.get(2 * span)
			defer colScratch.put(split)
		}
		hw := g.h * g.w
		for i := lo; i < hi; i++ {
			x := src[i*srcSize : (i+1)*srcSize]
			for cp := 0; cp < pc.cpairs; cp++ {
				single := 2*cp+1 >= g.c
				if l.phases == 1 {
					at := cp*span + g.ph*wp + g.pw
					blas.BF16PlaneRows(pairs[at:], wp, x[2*cp*hw:], g.w, hw, g.h, g.w, single)
					continue
				}
				l.split(g, x, 2*cp, split)
				if !single {
					l.split(g, x, 2*cp+1, split[span:])
				}
				blas.BF16Pairs(pairs[cp*span:(cp+1)*span], split, span, span, single)
			}
			out := dst[i*dstSize : (i+1)*dstSize]
			if rowwise {
				// Output row oh is the product's columns from oh·wp on:
				// computed straight into the output, whose channels are
				// p values apart.
				beta := float32(0)
				if accumulate {
					beta = 1
				}
				for oh := 0; oh < g.ho; oh++ {
					pc.pa.MulPairRows(g.wo, blas.PairRows{Src: pairs[oh*wp:], Offs: pc.offs}, beta, out[oh*g.wo:], p)
				}
				continue
			}
			pc.pa.MulPairRows(cols, blas.PairRows{Src: pairs, Offs: pc.offs}, 0, tmp, cols)
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
		pairScratch.Put(bufp)
	})
}

// padPlane writes channel c of the image x zero-padded into plane (the
// padded rows g.widePitch() apart, zeros after them).
func padPlane(g *Geom, x []float32, c int, plane []float32) {
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
func weightGradWords(g *Geom, cout int, x, gy []float32, lo, hi int) []float32 {
	k, p := g.rows, g.cols
	xSize, ySize := g.c*g.h*g.w, cout*p
	// Stride 1 with an even row pitch: the planes start one word late if
	// need be, so that every image row starts on a pair and is converted
	// straight into place; otherwise each plane is laid out in float32
	// first (padded, or split into phases).
	l := newPhaseLayout(g, 2) // room for an odd depth's extra value and the shift
	wp := l.pitch
	direct := l.phases == 1 && wp%2 == 0
	base := 0
	if direct {
		base = g.pw % 2
	}
	span := l.phases * l.plane
	cols := g.ho * wp // GEMM depth per image
	offs := make([]int32, k)
	for c := 0; c < g.c; c++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				offs[(c*g.kh+ki)*g.kw+kj] = int32(c*span + base + l.tap(g, ki, kj))
			}
		}
	}
	bufp := pairScratch.Get().(*[]uint32)
	defer pairScratch.Put(bufp)
	if need := g.c * span / 2; cap(*bufp) < need {
		*bufp = make([]uint32, need)
	}
	img := (*bufp)[:g.c*span/2]
	clear(img) // the padding, which direct conversions never overwrite
	pad := colScratch.get(span)
	defer colScratch.put(pad)
	dyT := colScratch.get(cols * cout)
	defer colScratch.put(dyT)
	partT := colScratch.get(k * cout)
	defer colScratch.put(partT)
	for i := lo; i < hi; i++ {
		xi := x[i*xSize : (i+1)*xSize]
		for c := 0; c < g.c; c++ {
			if !direct {
				if l.phases == 1 {
					padPlane(g, xi, c, pad)
				} else {
					l.split(g, xi, c, pad)
				}
				blas.BF16Words(img[c*span/2:(c+1)*span/2], pad)
				continue
			}
			for ih := 0; ih < g.h; ih++ {
				at := c*span + base + (ih+g.ph)*wp + g.pw // even
				blas.BF16Words(img[at/2:at/2+(g.w+1)/2], xi[(c*g.h+ih)*g.w:(c*g.h+ih+1)*g.w])
			}
		}
		// dY transposed straight onto the wide grid, output row by
		// output row, zeros in the extra columns.
		gi := gy[i*ySize : (i+1)*ySize]
		for oh := 0; oh < g.ho; oh++ {
			row := dyT[oh*wp*cout : (oh+1)*wp*cout]
			kernels.TransposeStrided(g.wo, 0, cout, gi[oh*g.wo:], p, row, cout)
			clear(row[g.wo*cout:])
		}
		beta := float32(1)
		if i == lo {
			beta = 0
		}
		blas.SgemmBF16WordRows(k, cout, cols, blas.WordRows{Src: img, Offs: offs}, dyT, cout, beta, partT, cout)
	}
	part := partialScratch.get(cout * k)
	kernels.Transpose(k, cout, partT, part)
	return part
}
