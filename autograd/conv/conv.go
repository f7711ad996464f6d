package conv

import (
	"fmt"
	"sync"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// Config holds the hyper-parameters of a convolution. Each array is
// indexed [height, width]. A zero Stride or Dilation entry means 1.
type Config struct {
	Stride   [2]int // step between output positions
	Padding  [2]int // implicit zeros added on both sides of the input
	Dilation [2]int // spacing between kernel taps

	// Algo forces an algorithm (tests, benchmarks, a choice measured at
	// load); AlgoAuto, the zero value, chooses by the rules of Forward,
	// Backward and Plan. An algorithm that does not apply to a layer falls
	// back to im2col, except AlgoBlocked, which falls back to AlgoAuto's
	// choice (and leaves Plan to it). AlgoWinograd, and AlgoBlocked where
	// it applies, compute the weight gradient with Winograd too.
	Algo Algo
}

// Algo names an algorithm of a dense convolution, for Config.Algo.
type Algo uint8

const (
	AlgoAuto     Algo = iota // chosen by the rules of Forward, Backward and Plan
	AlgoIm2col               // im2col and a GEMM (the fallback of every other)
	AlgoWinograd             // Winograd's F(2×2, 3×3), where it applies (3×3, stride 1, no dilation), weight gradient included
	AlgoGather               // gatherConv: the im2col matrix read in place, where it applies
	AlgoBlocked              // nchwc's channel-blocked Winograd (blocked.go) for the output and input gradient, where it applies (3×3, stride 1, padding 1, no dilation, float32), and Winograd's weight gradient there
)

// String returns the algorithm's name: "auto", "im2col", "winograd",
// "gather" (the names Plan.Algorithm reports) or "blocked".
func (a Algo) String() string {
	switch a {
	case AlgoAuto:
		return "auto"
	case AlgoIm2col:
		return "im2col"
	case AlgoWinograd:
		return "winograd"
	case AlgoGather:
		return "gather"
	case AlgoBlocked:
		return "blocked"
	}
	return fmt.Sprintf("Algo(%d)", uint8(a))
}

// Forward sets out to the convolution of geometry g of the n images in x
// (g's C×H×W values each) with the m filters w (m × C × kh × kw) plus
// bias (m values, or nil), as torch.nn.functional.conv2d computes it
// (groups = 1); out holds n·m·Ho·Wo values (see Geom.Out) and must not
// overlap x. It panics on other lengths.
//
// Images are unrolled with im2col into (Cin·kh·kw) × (Ho·Wo) matrices and
// multiplied by the Cout × (Cin·kh·kw) filter matrix with one GEMM per
// image, or per group of images when the images are small. 1×1
// convolutions with stride 1 and no padding use the input image itself as
// that matrix. For stride 1 the matrix is built from the zero-padded image
// with each output row widened to the padded width, which makes every
// matrix row a single contiguous copy; the extra columns are dropped when
// the product is copied to the output. Groups run in parallel.
//
// Stride-1 convolutions whose output rows are whole runs of 16 positions,
// or whose outputs are as wide as their inputs, never store the im2col
// matrix: gatherConv multiplies the filters with it read in place from
// one zero-padded copy of each image (blas.GatherA.SgemmGather), straight
// into the output, with results bit-identical to im2col's.
//
// 3×3 convolutions with stride 1 and dilation 1 on layers wide enough for
// it to pay (at least 32 input and output channels, and 64 where
// gatherConv's wide layout applies; see winogradPays) compute the output
// with Winograd's F(2×2, 3×3) instead, which needs 16 multiplications per
// 2×2 outputs instead of 36; its results differ from im2col's only in
// rounding (about 4e-6 at most on outputs of unit scale with 512
// channels, docs/benchmarks.md).
//
// 3×3 convolutions with stride 1, padding 1 and dilation 1 whose channels
// come in whole blocks of 16, at most 64×64 of them, on outputs of at
// least 8×8 pixels and at least 8 images (blockedPays) run on package
// nchwc's Winograd in its channel-blocked layout instead, each image
// converted to it and back (blocked.go); also bit-identical for every
// number of workers, and differing from im2col's only in rounding.
//
// With a geometry from Geom.BF16 (on a CPU with AVX512_BF16) the product
// runs in bfloat16 with float32 accumulation (bf16.go): for strides 1 and
// 2 without an im2col matrix (pairConv), otherwise through im2col and
// blas.SgemmBF16. The results are bit-identical for every number of
// workers.
func Forward(g *Geom, n, m int, x, w, bias, out []float32) {
	p := g.cols
	xSize, ySize := g.c*g.h*g.w, m*p
	if n < 0 || m < 1 || len(x) != n*xSize || len(w) != m*g.rows || len(out) != n*ySize || (bias != nil && len(bias) != m) {
		panic(fmt.Sprintf("conv.Forward: %d images and %d filters of geometry %s need %d input, %d filter, %d output and 0 or %d bias values, got %d, %d, %d and %d",
			n, m, g, n*xSize, m*g.rows, n*ySize, m, len(x), len(w), len(out), len(bias)))
	}
	// The GEMMs read the filters as op(A) = (Wᵀ)ᵀ: packing a transposed
	// operand is a plain copy, and the transpose (or Winograd's filter
	// transform) is made once per call instead of once per image.
	if g.bf16 && pairConvOK(g) {
		if bias != nil {
			fillBias(out, bias, n, p)
		}
		cin, khw := g.c, g.kh*g.kw
		newPairConv(g, m, func(o, c, ki, kj int) float32 {
			return w[(o*cin+c)*khw+ki*g.kw+kj]
		}).run(n, x, xSize, out, ySize, bias != nil)
		return
	}
	if useBlocked(g, n, m) {
		buf := partialScratch.get(nchwc.WinogradSize(m, g.c))
		blockedConv(g, n, blockedFilters(w, m, g.c, false, buf), bias, x, out, false)
		partialScratch.put(buf)
		return
	}
	wino := useWinograd(g, n, m)
	if !wino && useGather(g) {
		if bias != nil {
			fillBias(out, bias, n, p)
		}
		buf := partialScratch.get(gatherPackedSize(g, m))
		newGatherConv(g, m, w, false, buf).run(n, x, xSize, out, ySize, bias != nil, nil)
		partialScratch.put(buf)
		return
	}
	var wT []float32
	var u *[16]*blas.PackedA
	gs := groupSize(p)
	if wino {
		wT = partialScratch.get(winoFiltersSize(m, g.c))
		u = winoFilters(w, m, g.c, false, wT)
		gs = winoGroupSize(g)
	} else {
		wT = partialScratch.get(len(w))
		kernels.Transpose(m, g.rows, w, wT)
	}
	defer partialScratch.put(wT)
	serial := serialGemm(parallel.Chunks(n, gs))
	gemm := gemmOf(g.bf16, serial)
	parallel.For(n, gs, func(lo, hi int) {
		if wino {
			winoGroup(serial, g, m, u, x, xSize, out, ySize, lo, hi, false, bias)
			return
		}
		if bias != nil {
			fillBias(out[lo*ySize:hi*ySize], bias, hi-lo, p)
		}
		convGroup(multiplier{gemm: gemm}, g, m, wT, x, xSize, out, ySize, lo, hi, bias != nil)
	})
}

// fillBias sets every output plane of the n images in out (each with
// len(bias) planes of p values) to its channel's bias.
func fillBias(out, bias []float32, n, p int) {
	for i := 0; i < n; i++ {
		for c, v := range bias {
			kernels.Fill(out[(i*len(bias)+c)*p:(i*len(bias)+c+1)*p], v)
		}
	}
}

// gemmFunc is the signature of blas.Sgemm and blas.SgemmSerial.
type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// multiplier computes the products of convGroup, C = op(A)·B with the
// m×k filter matrix A: by gemm with A given transposed (aT), or, when pa
// is not nil, with A packed once (on the calling goroutine if serial).
// A value, not a closure, so that a convolution on one worker allocates
// nothing.
type multiplier struct {
	gemm   gemmFunc
	pa     *blas.PackedA
	serial bool
}

// mul sets c (ldc) to beta·c + A·b, b being k × n with row stride ldb.
func (mu multiplier) mul(m, n, k int, aT, b []float32, ldb int, beta float32, c []float32, ldc int) {
	switch {
	case mu.pa == nil:
		mu.gemm(true, false, m, n, k, 1, aT, m, b, ldb, beta, c, ldc)
	case mu.serial:
		mu.pa.SgemmSerial(false, n, 1, b, ldb, beta, c, ldc)
	default:
		mu.pa.Sgemm(false, n, 1, b, ldb, beta, c, ldc)
	}
}

// groupSize returns how many images share one GEMM of a convolution when
// each has p output positions: enough to give the GEMM about 512 columns,
// so that packing the filters is paid for. It depends only on p, so chunk
// boundaries never depend on the worker count; with fewer chunks than
// workers the GEMM itself runs in parallel.
func groupSize(p int) int {
	return max(1, (512+p-1)/p)
}

// weightGroupSize returns how many images share one GEMM of a weight
// gradient when each has p output positions: enough for a GEMM depth of
// about 2048, so that the partial products, each as large as the filters,
// are written and added up rarely.
func weightGroupSize(p int) int {
	return max(1, (2048+p-1)/p)
}

// convGroup computes out_i = aᵀᵀ·im2col(src_i) for the images i in [lo, hi)
// (adding to out_i if accumulate), where the filter matrix is given
// transposed as aT (g.rows × m), src holds images of srcSize elements and
// dst outputs of dstSize = m·g.cols elements. A single image without
// padding or stride is multiplied straight into its output; otherwise the
// group shares one GEMM into a scratch matrix whose rows are then copied
// out, using the wide im2col matrix for stride 1.
func convGroup(mu multiplier, g *Geom, m int, aT, src []float32, srcSize int, dst []float32, dstSize int, lo, hi int, accumulate bool) {
	k, p, cnt := g.rows, g.cols, hi-lo
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	if cnt == 1 && g.direct() {
		mu.mul(m, p, k, aT, src[lo*srcSize:(lo+1)*srcSize], p, beta, dst[lo*dstSize:(lo+1)*dstSize], p)
		return
	}
	wide := g.wide()
	pitch := g.wo // output columns per output row in the product
	if wide {
		pitch = g.widePitch()
	}
	pp := g.ho * pitch // product columns per image
	ld := cnt * pp
	col, tmp := colScratch.get(k*ld), colScratch.get(m*ld)
	defer colScratch.put(col)
	defer colScratch.put(tmp)
	var pad []float32
	if wide {
		pad = colScratch.get(g.padSize())
		defer colScratch.put(pad)
	}
	for j := 0; j < cnt; j++ {
		s := src[(lo+j)*srcSize : (lo+j+1)*srcSize]
		if wide {
			im2colWide(g, s, pad, col[j*pp:], ld)
		} else {
			im2col(g, s, col[j*pp:], ld)
		}
	}
	mu.mul(m, ld, k, aT, col, ld, 0, tmp, ld)
	for j := 0; j < cnt; j++ {
		for o := 0; o < m; o++ {
			for oh := 0; oh < g.ho; oh++ {
				d := dst[(lo+j)*dstSize+o*p+oh*g.wo : (lo+j)*dstSize+o*p+(oh+1)*g.wo]
				t := tmp[o*ld+j*pp+oh*pitch : o*ld+j*pp+oh*pitch+g.wo]
				if !accumulate {
					copy(d, t)
					continue
				}
				for i, v := range t {
					d[i] += v
				}
			}
		}
	}
}

// Backward computes the gradients of the convolution Forward(g, n, m, x,
// w, …) given its output gradient gy (n·m·Ho·Wo values): it adds the
// weight gradient to gw (m × C × kh × kw values) unless gw is nil, and
// the input gradient to gx (n·C·H·W values) unless gx is nil, or, if
// store, writes it there (gx's contents are then unspecified). It panics
// on other lengths. The results are bit-identical for every number of
// workers.
//
// The weight gradient of a group of images is dY · colT, where dY holds
// the images' output gradients side by side and colT stacks their
// transposed im2col matrices, built from each image in channels-last order
// so that neither GEMM operand needs transposing while it is packed. Its
// columns are in (ki, kj, ci) order; the per-group partial sums are added
// up in group order and then reordered into the weight layout of gw.
// Stride-1 convolutions where gatherConv applies with at most 64 filters
// (input channels, for the input gradient) read the im2col matrix in
// place for the weight gradient too (blas.Engine.SgemmGatherT), and both
// gradients share one padded copy of each output gradient
// (gatherBackward).
//
// For stride 1 the input gradient is itself a convolution: of dY, padded by
// dilation·(k−1) − padding, with the filters flipped in space and with
// input and output channels swapped, which Winograd computes where it
// pays, or the channel-blocked Winograd where it pays (as for Forward;
// beside gatherBackward's weight gradient where that applies). The
// weight gradient of 3×3, stride-1 float32 convolutions with at least 32
// input and output channels (16 where the GEMM engine has no dot-product
// kernels, or where the products run as outer products in nchwc's
// blocked layout on AVX-512) and 512 tiles in the batch (winoWeightPays)
// is Winograd's F(2×2, 3×3) transposed (winoweight.go): 16 products of
// the transformed output gradients and images, summed over groups of
// images in a fixed order and transformed into filters once; beside the
// channel-blocked input gradient, each group's input gradient is computed
// first, on the output gradients the group then reads. The input
// gradient of stride-2 float32 convolutions with kernels of more than
// four taps and inputs twice their outputs is computed by phases
// (phasegrad.go: four small gathered products over one padded copy of
// dY, each phase added into every second value of dX); other larger
// strides fold Wᵀ·dY back onto each image with col2im. With a geometry
// from Geom.BF16 all products run in bfloat16: pairConv for
// the stride-1 input gradient, weightGradWords for the weight gradient of
// strides 1 and 2, otherwise im2col or col2im and blas.SgemmBF16.
func Backward(g *Geom, n, m int, x, w, gy, gx, gw []float32, store bool) {
	cout := m
	k, p, hw := g.rows, g.cols, g.h*g.w
	xSize, ySize := g.c*hw, cout*p
	if n < 0 || m < 1 || len(x) != n*xSize || len(w) != m*k || len(gy) != n*ySize ||
		(gx != nil && len(gx) != n*xSize) || (gw != nil && len(gw) != m*k) {
		panic(fmt.Sprintf("conv.Backward: %d images and %d filters of geometry %s need %d input, %d filter and %d output-gradient values, got %d, %d and %d (input gradient %d, weight gradient %d)",
			n, m, g, n*xSize, m*k, n*ySize, len(x), len(w), len(gy), len(gx), len(gw)))
	}
	needW, needX := gw != nil, gx != nil
	strideOne := g.sh == 1 && g.sw == 1
	var wf []float32
	var u *[16]*blas.PackedA
	var gd *Geom       // geometry of the input-gradient convolution
	wino := false      // whether it runs with Winograd
	blocked := false   // whether it runs with the channel-blocked Winograd
	overwrite := false // whether the stride-1 input gradient may be stored, not added
	if needX {
		if !strideOne {
			if store {
				clear(gx) // col2im adds to it
			}
		} else {
			overwrite = store
			gd = &Geom{
				c: cout, h: g.ho, w: g.wo, kh: g.kh, kw: g.kw, sh: 1, sw: 1,
				ph: g.dh*(g.kh-1) - g.ph, pw: g.dw*(g.kw-1) - g.pw,
				dh: g.dh, dw: g.dw, ho: g.h, wo: g.w,
				rows: cout * g.kh * g.kw, cols: hw, algo: g.algo, bf16: g.bf16,
			}
			switch blocked, wino = useBlocked(gd, n, g.c), useWinograd(gd, n, g.c); {
			case blocked: // blockedFilters packs the filters below
			case wino:
				wf = partialScratch.get(winoFiltersSize(g.c, cout))
				u = winoFilters(w, g.c, cout, true, wf)
			default:
				wf = partialScratch.get(len(w))
				flipFilters(g, cout, w, wf)
			}
			if wf != nil {
				defer partialScratch.put(wf)
			}
		}
	}
	// Both gradients from one padded output gradient where the weight
	// gradient would be gathered too (dot products, at most 64 inputs).
	// The channel-blocked input gradient takes the place of gatherConv's
	// there.
	var bf *nchwc.WinoFilter
	if blocked {
		buf := partialScratch.get(nchwc.WinogradSize(g.c, cout))
		defer partialScratch.put(buf)
		bf = blockedFilters(w, cout, g.c, true, buf)
	}
	winoW := needW && useWinoWeight(g, n, cout)
	dense := needW && !winoW && denseWeightOK(g, n, cout)
	if needW && needX && strideOne && !wino && !winoW && !dense && gatherWeightGrad(gd, g.c) {
		gatherBackward(g, gd, n, cout, x, wf, gy, gx, gw, !overwrite, bf)
		return
	}
	if winoW {
		if blocked {
			// The input gradient of each group of images first, on the
			// output gradients the weight gradient then reads.
			winoWeightGrad(g, n, cout, x, gy, gw, &fusedInputGrad{g: gd, f: bf, pb: blockedBias(bf, nil), gx: gx, accumulate: !overwrite})
			return
		}
		winoWeightGrad(g, n, cout, x, gy, gw, nil)
	} else if dense {
		denseWeightGrad(g, n, cout, x, gy, gw)
	} else if needW {
		ws := weightGroupSize(p)
		chunks := parallel.Chunks(n, ws)
		serial := serialGemm(chunks)
		merge, acc := newOrderedSum(chunks, cout*k) // acc in (Cout, kh, kw, Cin) order for weightGradGroup
		defer partialScratch.put(acc)
		// The gathered and wide weight gradients come in the layout of
		// the weights, weightGradGroup's in (Cout, kh, kw, Cin) order.
		var gp *groupProductT
		gather := gatherWeightGrad(g, cout)
		if gather {
			rows, runs := gatherOffsets(g)
			gp = newWeightProduct(g, cout, rows, runs, min(ws, n))
		}
		wide := !gather && wideWeightGrad(g, cout)
		parallel.For(n, ws, func(lo, hi int) {
			switch {
			case g.bf16 && pairConvOK(g):
				merge.done(lo/ws, weightGradWords(g, cout, x, gy, lo, hi))
			case g.bf16:
				merge.done(lo/ws, weightGradBF16(serial, g, cout, x, gy, lo, hi))
			case gather:
				merge.done(lo/ws, weightGradGather(g, gp, x, gy, lo, hi, ws))
			case wide:
				merge.done(lo/ws, weightGradWide(gemmOf(g.bf16, serial), g, cout, x, gy, lo, hi))
			default:
				merge.done(lo/ws, weightGradGroup(serial, g, cout, x, gy, lo, hi))
			}
		})
		if gather || wide || g.bf16 {
			addTo(gw, acc)
		} else {
			addFilterGrad(g, cout, gw, acc)
		}
	}
	if !needX {
		return
	}
	if strideOne && g.bf16 && pairConvOK(gd) {
		// The input gradient is the convolution of dY with the filters
		// flipped in space, input and output channels swapped.
		wd, cin, khw := w, g.c, g.kh*g.kw
		newPairConv(gd, g.c, func(ci, co, ki, kj int) float32 {
			return wd[(co*cin+ci)*khw+(g.kh-1-ki)*g.kw+(g.kw-1-kj)]
		}).run(n, gy, ySize, gx, xSize, !overwrite)
		return
	}
	if blocked {
		blockedConv(gd, n, bf, nil, gy, gx, !overwrite)
		return
	}
	if strideOne && !wino && useGather(gd) {
		buf := partialScratch.get(gatherPackedSize(gd, g.c))
		newGatherConv(gd, g.c, wf, true, buf).run(n, gy, ySize, gx, xSize, !overwrite, nil)
		partialScratch.put(buf)
		return
	}
	if !strideOne {
		if usePhaseGrad(g, cout) {
			buf := partialScratch.get(phaseGradPackedSize(g, cout))
			newPhaseGrad(g, cout, w, buf).run(n, gy, gx)
			partialScratch.put(buf)
			return
		}
		col2imGrad(g, n, cout, w, gy, gx)
		return
	}
	gs := groupSize(p)
	if wino {
		gs = winoGroupSize(gd)
	}
	serial := serialGemm(parallel.Chunks(n, gs))
	gemm := gemmOf(g.bf16, serial)
	parallel.For(n, gs, func(lo, hi int) {
		if wino {
			winoGroup(serial, gd, g.c, u, gy, ySize, gx, xSize, lo, hi, !overwrite, nil)
			return
		}
		convGroup(multiplier{gemm: gemm}, gd, g.c, wf, gy, ySize, gx, xSize, lo, hi, !overwrite)
	})
}

// col2imGrad adds the input gradients of the n images of gy to gx for a
// convolution of geometry g with the cout filters w, each image's as the
// column matrix Wᵀ·dY_i folded back onto the image by col2im.
func col2imGrad(g *Geom, n, cout int, w, gy, gx []float32) {
	k, p := g.rows, g.cols
	xSize, ySize := g.c*g.h*g.w, cout*p
	gs := groupSize(p)
	gemm := gemmOf(g.bf16, serialGemm(parallel.Chunks(n, gs)))
	parallel.For(n, gs, func(lo, hi int) {
		dcol := colScratch.get(k * p)
		defer colScratch.put(dcol)
		for i := lo; i < hi; i++ {
			gemm(true, false, k, p, cout, 1, w, k, gy[i*ySize:(i+1)*ySize], p, 0, dcol, p)
			col2im(g, dcol, gx[i*xSize:(i+1)*xSize])
		}
	})
}

// weightGradGroup returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·colT_i over the images i in [lo, hi) with its columns in
// (ki, kj, ci) order.
func weightGradGroup(serial bool, g *Geom, cout int, x, gy []float32, lo, hi int) []float32 {
	k, p, hw, cnt := g.rows, g.cols, g.h*g.w, hi-lo
	xSize, ySize := g.c*hw, cout*p
	kk := cnt * p // GEMM depth: the output positions of all images
	var pa *blas.PackedA
	if cnt > 1 {
		// The images' output gradients side by side (cout × kk), packed
		// for the GEMM straight from each image's cout × p block.
		e := blas.Default()
		buf := colScratch.get(e.PackedASize(cout, kk))
		defer colScratch.put(buf)
		pa = e.NewPackedA(false, cout, kk, buf)
		for j := 0; j < cnt; j++ {
			pa.Pack(gy[(lo+j)*ySize:(lo+j+1)*ySize], p, j*p, (j+1)*p)
		}
	}
	colT := colScratch.get(kk * k)
	defer colScratch.put(colT)
	var xT []float32
	if !g.direct() {
		xT = colScratch.get(xSize)
		defer colScratch.put(xT)
	}
	for j := 0; j < cnt; j++ {
		xi := x[(lo+j)*xSize : (lo+j+1)*xSize]
		block := colT[j*p*k : (j+1)*p*k]
		if g.direct() {
			kernels.Transpose(g.c, hw, xi, block)
			continue
		}
		kernels.Transpose(g.c, hw, xi, xT)
		im2colT(g, xT, block)
	}
	part := partialScratch.get(cout * k)
	switch {
	case pa == nil:
		gemmOf(false, serial)(false, false, cout, k, kk, 1, gy[lo*ySize:hi*ySize], kk, colT, k, 0, part, k)
	default:
		packedProduct(serial, pa, k, colT, part)
	}
	return part
}

// weightGradBF16 returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·col_iᵀ over the images i in [lo, hi) of a convolution
// that weightGradWords does not compute (strides above 1) in the (Cout,
// Cin, kh, kw) layout of the weights, computed in bfloat16 as its
// transpose col·dYᵀ: the im2col matrices of the images side by side are
// op(A), whose rows blas.SgemmBF16 converts as they lie, and the output
// gradients transposed are op(B), Cout columns wide.
func weightGradBF16(serial bool, g *Geom, cout int, x, gy []float32, lo, hi int) []float32 {
	k, p, cnt := g.rows, g.cols, hi-lo
	xSize, ySize := g.c*g.h*g.w, cout*p
	kk := cnt * p // GEMM depth
	col := colScratch.get(k * kk)
	defer colScratch.put(col)
	dyT := colScratch.get(kk * cout)
	defer colScratch.put(dyT)
	for j := 0; j < cnt; j++ {
		im2col(g, x[(lo+j)*xSize:(lo+j+1)*xSize], col[j*p:], kk)
		kernels.Transpose(cout, p, gy[(lo+j)*ySize:(lo+j+1)*ySize], dyT[j*p*cout:(j+1)*p*cout])
	}
	partT := colScratch.get(k * cout)
	defer colScratch.put(partT)
	gemmOf(true, serial)(false, false, k, cout, kk, 1, col, kk, dyT, cout, 0, partT, cout)
	part := partialScratch.get(cout * k)
	kernels.Transpose(k, cout, partT, part)
	return part
}

// wideWeightGrad reports whether the weight gradient of a convolution with
// geometry g and cout filters is computed by weightGradWide: for stride 1
// and fewer than 32 filters. Measured on ResNet-20's layers, the dot
// products of weightGradWide run the 16-filter GEMM 1.6 times as fast as
// weightGradGroup's and its contiguous im2col copies are cheaper than the
// transposed layout; from 32 filters on, the GEMMs are equally fast and
// the extra columns of the wide grid make weightGradWide the slower.
func wideWeightGrad(g *Geom, cout int) bool {
	return g.wide() && !g.direct() && cout < 32 && !g.bf16
}

// weightGradWide returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·col_iᵀ over the images i in [lo, hi) in the (Cout, Cin,
// kh, kw) layout of the weights, where col_i is the wide im2col matrix of
// image i (see im2colWide) and dY_i is laid out on the same wide grid with
// zeros in the extra columns. The product C = A·Bᵀ of two matrices with
// contiguous rows needs no transposition.
func weightGradWide(gemm gemmFunc, g *Geom, cout int, x, gy []float32, lo, hi int) []float32 {
	k, p, cnt := g.rows, g.cols, hi-lo
	xSize, ySize := g.c*g.h*g.w, cout*p
	pitch := g.widePitch()
	pp := g.ho * pitch
	kk := cnt * pp // GEMM depth: the wide output grids of all images
	a := colScratch.get(cout * kk)
	defer colScratch.put(a)
	col := colScratch.get(k * kk)
	defer colScratch.put(col)
	pad := colScratch.get(g.padSize())
	defer colScratch.put(pad)
	for j := 0; j < cnt; j++ {
		for o := 0; o < cout; o++ {
			src := gy[(lo+j)*ySize+o*p : (lo+j)*ySize+(o+1)*p]
			dst := a[o*kk+j*pp : o*kk+(j+1)*pp]
			for oh := 0; oh < g.ho; oh++ {
				row := dst[oh*pitch : (oh+1)*pitch]
				copy(row, src[oh*g.wo:(oh+1)*g.wo])
				clear(row[g.wo:])
			}
		}
		im2colWide(g, x[(lo+j)*xSize:(lo+j+1)*xSize], pad, col[j*pp:], kk)
	}
	part := partialScratch.get(cout * k)
	gemm(false, true, cout, k, kk, 1, a, kk, col, kk, 0, part, k)
	return part
}

// flipFilters writes the transposed filter matrix of the input-gradient
// convolution: wf has shape (Cout, kh, kw, Cin) with
// wf[o][a][b][c] = w[o][c][kh−1−a][kw−1−b].
func flipFilters(g *Geom, cout int, w, wf []float32) {
	khw := g.kh * g.kw
	for o := 0; o < cout; o++ {
		for c := 0; c < g.c; c++ {
			for t, v := range w[(o*g.c+c)*khw : (o*g.c+c+1)*khw] {
				wf[(o*khw+khw-1-t)*g.c+c] = v
			}
		}
	}
}

// addFilterGrad adds a weight gradient in (Cout, kh, kw, Cin) order to dw in
// the (Cout, Cin, kh, kw) order of the weights.
func addFilterGrad(g *Geom, cout int, dw, part []float32) {
	khw := g.kh * g.kw
	for o := 0; o < cout; o++ {
		for t := 0; t < khw; t++ {
			src := part[(o*khw+t)*g.c : (o*khw+t+1)*g.c]
			for c, v := range src {
				dw[(o*g.c+c)*khw+t] += v
			}
		}
	}
}

// direct reports whether the input image already is the im2col matrix: a
// 1×1 kernel with stride 1 and no padding.
func (g *Geom) direct() bool {
	return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0
}

// serialGemm reports whether the GEMMs inside a parallel loop of the
// given number of chunks run on the calling goroutine: when the chunks
// alone keep every worker busy. Serial and parallel GEMMs give identical
// results.
func serialGemm(chunks int) bool { return chunks >= parallel.Workers() }

// gemmOf returns blas.SgemmSerial if serial, else blas.Sgemm, or their
// bfloat16 versions if bf16.
func gemmOf(bf16, serial bool) gemmFunc {
	switch {
	case bf16 && serial:
		return blas.SgemmBF16Serial
	case bf16:
		return blas.SgemmBF16
	case serial:
		return blas.SgemmSerial
	}
	return blas.Sgemm
}

// packedProduct sets c to pa·b, where b and c have n columns and row
// stride n, on the calling goroutine if serial, else on the worker pool.
func packedProduct(serial bool, pa *blas.PackedA, n int, b, c []float32) {
	if serial {
		pa.SgemmSerial(false, n, 1, b, n, 0, c, n)
		return
	}
	pa.Sgemm(false, n, 1, b, n, 0, c, n)
}

// orderedSum combines per-chunk partial sums in chunk order as chunks
// finish, so the result is independent of which worker ran which chunk and
// at most a few partial buffers are alive at once.
type orderedSum struct {
	mu      sync.Mutex
	next    int
	pending [][]float32
	add     func(part []float32) // adds one partial sum to the total
}

// newOrderedSum returns an orderedSum of chunks partial sums of size
// values each and the zeroed total they are added to, a buffer from
// partialScratch for the caller to return.
func newOrderedSum(chunks, size int) (*orderedSum, []float32) {
	acc := partialScratch.get(size)
	clear(acc)
	return &orderedSum{
		pending: make([][]float32, chunks),
		add: func(part []float32) {
			for i, v := range part {
				acc[i] += v
			}
		},
	}, acc
}

// done hands over the partial sum of chunk c, which must come from
// partialScratch; it is returned there once it has been added.
func (s *orderedSum) done(c int, part []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[c] = part
	for s.next < len(s.pending) && s.pending[s.next] != nil {
		s.add(s.pending[s.next])
		partialScratch.put(s.pending[s.next])
		s.pending[s.next] = nil
		s.next++
	}
}

// addTo sets dst += src.
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// NewGeom returns the geometry of a convolution under cfg of images of c
// channels of h × w values with kh × kw filters (zero stride or dilation
// meaning 1), or an error saying what is wrong: a negative stride,
// padding or dilation, or an image too small for an output position.
func NewGeom(c, h, w, kh, kw int, cfg Config) (*Geom, error) {
	for i := range 2 {
		if cfg.Stride[i] == 0 {
			cfg.Stride[i] = 1
		}
		if cfg.Dilation[i] == 0 {
			cfg.Dilation[i] = 1
		}
		if cfg.Stride[i] < 0 || cfg.Dilation[i] < 0 || cfg.Padding[i] < 0 {
			return nil, fmt.Errorf("invalid stride %v, padding %v or dilation %v", cfg.Stride, cfg.Padding, cfg.Dilation)
		}
	}
	g := &Geom{
		c: c, h: h, w: w,
		kh: kh, kw: kw,
		sh: cfg.Stride[0], sw: cfg.Stride[1],
		ph: cfg.Padding[0], pw: cfg.Padding[1],
		dh: cfg.Dilation[0], dw: cfg.Dilation[1],
		algo: cfg.Algo,
	}
	g.ho = OutSize(g.h, g.kh, g.sh, g.ph, g.dh)
	g.wo = OutSize(g.w, g.kw, g.sw, g.pw, g.dw)
	if g.ho < 1 || g.wo < 1 {
		return nil, fmt.Errorf("an image of %d×%d is too small for a %d×%d kernel with stride %v, padding %v, dilation %v",
			h, w, kh, kw, cfg.Stride, cfg.Padding, cfg.Dilation)
	}
	g.rows = g.c * g.kh * g.kw
	g.cols = g.ho * g.wo
	return g, nil
}

// Out returns the height and width of one output image.
func (g *Geom) Out() (ho, wo int) { return g.ho, g.wo }

// BF16 returns a copy of g whose convolutions (Forward, Backward) compute
// their products in bfloat16 with float32 accumulation, on the
// algorithms that have a bfloat16 form (im2col's where another was
// chosen). The caller checks that the CPU has the instructions
// (blas.BF16Native).
func (g *Geom) BF16() *Geom {
	b := *g
	b.bf16, b.algo = true, AlgoIm2col
	return &b
}

// String describes g for messages: the image, the kernel, the stride,
// padding and dilation.
func (g *Geom) String() string {
	return fmt.Sprintf("%d×%d×%d, kernel %d×%d, stride [%d %d], padding [%d %d], dilation [%d %d]",
		g.c, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw)
}
