package conv

import (
	"unsafe"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// The channel-blocked Winograd (AlgoBlocked): a 3×3, stride-1, padding-1
// convolution computed by package nchwc's Winograd F(2×2, 3×3) on
// activations converted, image by image, from NCHW to its blocked layout
// (blocks of 16 channels, each pixel's 16 channels contiguous, nchwc.Act)
// and the result converted back. The filters are transformed and packed
// once per call (nchwc.PackWinograd; the weights change every training
// step), for the input gradient flipped in space with their input and
// output channels swapped (blockedFilters). Each image is computed alone,
// by the same code whatever the chunk it falls in, so the results are
// bit-identical for every number of workers; they differ from im2col's
// only in rounding, as Winograd's do.

// blockedGrain is the number of images of a chunk of blockedConv: enough
// to pay for clearing the chunk's blocked input once.
const blockedGrain = 4

// blockedOK reports whether the channel-blocked Winograd applies to
// geometry g: a 3×3 kernel with stride 1, dilation 1 and padding 1 on
// both axes (the output as large as the input, nchwc's one-pixel border),
// in float32.
func blockedOK(g *Geom) bool {
	return winogradOK(g) && g.ph == 1 && g.pw == 1 && !g.bf16
}

// useBlocked reports whether a convolution with geometry g, n images and
// m output channels runs with the channel-blocked Winograd: where it
// applies, if forced by g.algo or else if blockedPays.
func useBlocked(g *Geom, n, m int) bool {
	if !blockedOK(g) {
		return false
	}
	switch g.algo {
	case AlgoBlocked:
		return true
	case AlgoAuto:
		return blockedPays(g, n, m)
	}
	return false
}

// blockedPays is the per-layer rule of the channel-blocked Winograd,
// measured by BenchmarkBlockedLayers (batch 128, CPU time per pass with
// the conversions and the filter packing, docs/benchmarks.md) against
// the rules' choice: where nchwc's assembly kernels run (nchwc.Fast),
// channels in whole blocks of 16 (a tail computes as many lanes as a
// full block), at least 16 tiles an image (8×8 outputs: 16 channels at
// 32×32 1.4× faster, 32 at 16×16 1.4×, 64 at 32×32 1.3×; 64 channels at
// 8×8 1.1–1.2× forward and, with the Winograd weight gradient taking each
// group's output gradients while they are in cache, 1.1× both gradients),
// filters of at most 64×64 channels (their 16 transformed matrices, 256
// KiB, stay in the core's cache: 128 channels at 16×16 no faster, 256 at
// 8×8 and 512 at 4×4 slower) and at least two chunks of images.
func blockedPays(g *Geom, n, m int) bool {
	th, tw := winoTiles(g)
	return nchwc.Fast() && g.c%16 == 0 && m%16 == 0 && g.c*m <= 64*64 && th*tw >= 16 && n >= 2*blockedGrain
}

// blockedFilters returns w (m × c × 3 × 3) transformed and packed for
// nchwc.Winograd into buf (nchwc.WinogradSize(m, c) values), or, if
// flip, the filters of the input gradient: c × m × 3 × 3 with
// wf[ci][co][a][b] = w[co][ci][2−a][2−b].
func blockedFilters(w []float32, m, c int, flip bool, buf []float32) *nchwc.WinoFilter {
	if !flip {
		return nchwc.PackWinogradInto(w, m, c, buf)
	}
	wf := partialScratch.get(len(w))
	defer partialScratch.put(wf)
	for co := 0; co < m; co++ {
		for ci := 0; ci < c; ci++ {
			src := w[(co*c+ci)*9 : (co*c+ci+1)*9]
			dst := wf[(ci*m+co)*9 : (ci*m+co+1)*9]
			for t, v := range src {
				dst[8-t] = v
			}
		}
	}
	return nchwc.PackWinogradInto(wf, c, m, buf)
}

// blockedConv sets dst (n images of f.Cout × g.h × g.w values), or adds
// to it if accumulate, to the convolution of geometry g (blockedOK) of
// the n images in src (f.Cin × g.h × g.w values each) with f, plus bias
// (f.Cout values, or nil). Chunks of blockedGrain images run in parallel.
func blockedConv(g *Geom, n int, f *nchwc.WinoFilter, bias, src, dst []float32, accumulate bool) {
	pb := blockedBias(f, bias)
	parallel.For(n, blockedGrain, func(lo, hi int) {
		blockedImages(g, f, pb, src, dst, accumulate, lo, hi)
	})
}

// blockedBias returns bias (f.Cout values, or nil: zeros) padded with
// zeros to f.PaddedCout values, the length with which nchwc.Winograd
// allocates nothing.
func blockedBias(f *nchwc.WinoFilter, bias []float32) []float32 {
	pb := make([]float32, f.PaddedCout())
	copy(pb, bias)
	return pb
}

// blockedImages is blockedConv for the images [lo, hi), on the calling
// goroutine, with the bias pb padded by blockedBias. Each image is
// computed alike whatever the range.
func blockedImages(g *Geom, f *nchwc.WinoFilter, pb, src, dst []float32, accumulate bool, lo, hi int) {
	xSize := f.Cin * g.h * g.w
	inLen := (f.Cin + 15) / 16 * 16 * (g.h + 2) * (g.w + 2)
	buf := colScratch.get(inLen + 16)
	defer colScratch.put(buf)
	in := &nchwc.Act{C: f.Cin, H: g.h, W: g.w, CB: 16, Data: lineAligned(buf, inLen)}
	clear(in.Data) // the border and the tail channels stay zero
	b := blockedImager{g: g, f: f, pb: pb, dst: dst, accumulate: accumulate}
	defer b.release()
	for i := lo; i < hi; i++ {
		in.FromNCHW(src[i*xSize : (i+1)*xSize])
		b.image(i, in)
	}
}

// blockedImager computes images of blockedImages from inputs already in
// the channel-blocked layout, with scratch of its own (release returns
// it): the filters f, padded bias pb and destination dst (NCHW, added to
// if accumulate) of geometry g.
type blockedImager struct {
	g          *Geom
	f          *nchwc.WinoFilter
	pb, dst    []float32
	accumulate bool
	buf, sum   []float32 // scratch, got on first use
	out        *nchwc.Act
}

// image writes (or adds) into image i of dst the convolution of in, image
// i's input in the blocked layout with zero borders.
func (b *blockedImager) image(i int, in *nchwc.Act) {
	g, f := b.g, b.f
	ySize := f.Cout * g.h * g.w
	if b.out == nil {
		outLen := f.PaddedCout() * (g.h + 2) * (g.w + 2)
		b.buf = colScratch.get(outLen + 16)
		b.out = &nchwc.Act{C: f.Cout, H: g.h, W: g.w, CB: 16, Data: lineAligned(b.buf, outLen)}
		if b.accumulate {
			b.sum = colScratch.get(ySize) // an image of the result, to add to dst
		}
	}
	nchwc.Winograd(in, f, b.pb, nil, false, b.out)
	if b.accumulate {
		b.out.ToNCHW(b.sum)
		addTo(b.dst[i*ySize:(i+1)*ySize], b.sum)
	} else {
		b.out.ToNCHW(b.dst[i*ySize : (i+1)*ySize])
	}
}

// release returns b's scratch.
func (b *blockedImager) release() {
	if b.out != nil {
		colScratch.put(b.buf)
		if b.sum != nil {
			colScratch.put(b.sum)
		}
	}
}

// lineAligned returns the n values of b (which holds at least n+15) that
// start on a 64-byte line.
func lineAligned(b []float32, n int) []float32 {
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & 63 / 4)
	return b[skip : skip+n : skip+n]
}
