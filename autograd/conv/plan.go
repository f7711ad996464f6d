package conv

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// Plan is a convolution prepared once for inference on images of one
// size: its filters are kept in the layouts its algorithms read (the
// packed panels of the gathered product, the Winograd-transformed filters
// where Winograd can pay, the filter matrix packed for im2col's GEMM, or a
// SparseWeight), so that a call packs no filters, and Run applies the bias,
// a residual and the ReLU to each block of the output right after the
// product has written it, while it is in the cache. A Plan is
// immutable and safe for concurrent use.
//
// Run chooses the algorithm for the batch size of the call by the rule of
// planWinograd, else the gathered product where it applies, else im2col;
// the results equal Forward's followed by the
// epilogue to float32 rounding and are bit-identical for every number of
// workers.
type Plan struct {
	g      *Geom
	cout   int
	bias   []float32
	sparse *SparseWeight
	gather *gatherConv        // the gathered product's packed filters, or nil
	wino   *[16]*blas.PackedA // the Winograd-transformed filters, or nil
	packed *blas.PackedA      // the filter matrix packed for im2col's GEMM
	// halves are the plans of the first and second half of the filters,
	// or nil: a batch smaller than the workers runs each image of a layer
	// that its algorithm cannot split into bands of rows (see Run) as two
	// halves on two workers.
	halves [2]*Plan
}

// NewPlan prepares the convolution of images of cin × h × wd (cin =
// shape[1]) with the filters w of shape (Cout, Cin, kh, kw), the bias
// (Cout values, or nil) and the geometry cfg. With sparse (made from w by
// NewSparseWeight) the product skips w's zeros as ForwardSparse does. The
// plan copies what it keeps: w and bias may change afterwards. It panics
// if the shapes do not fit, naming them.
func NewPlan(w []float32, shape []int, bias []float32, cfg Config, h, wd int, sparse *SparseWeight) *Plan {
	if len(shape) != 4 || shape[0] < 1 || shape[2] < 1 || shape[3] < 1 || len(w) != shape[0]*shape[1]*shape[2]*shape[3] {
		panic(fmt.Sprintf("conv.NewPlan: weight must have rank 4 (Cout,Cin,kh,kw) with no empty dimension but Cin, got shape %v with %d values", shape, len(w)))
	}
	if bias != nil && len(bias) != shape[0] {
		panic(fmt.Sprintf("conv.NewPlan: %d bias values for weight %v", len(bias), shape))
	}
	g, err := NewGeom(shape[1], h, wd, shape[2], shape[3], cfg)
	if err != nil {
		panic(fmt.Sprintf("conv.NewPlan: %v (weight %v)", err, shape))
	}
	if sparse != nil {
		mustMatchSparse("NewPlan", shape, sparse)
	}
	cout := shape[0]
	wino := winogradOK(g) && (g.algo == AlgoWinograd || (g.algo == AlgoAuto || g.algo == AlgoBlocked) && g.c >= 32 && cout >= 32)
	p := newPlan(g, w, cout, bias, sparse, wino)
	if sparse == nil && cout >= 2*splitRows && cout%(2*splitRows) == 0 {
		// The halves of the filters, for the two workers of a small batch.
		per, half := g.rows, cout/2
		for h := range p.halves {
			var hb []float32
			if bias != nil {
				hb = bias[h*half : (h+1)*half]
			}
			p.halves[h] = newPlan(g, w[h*half*per:(h+1)*half*per], half, hb, nil, wino)
		}
	}
	return p
}

// splitRows is the granule of the filter halves: a multiple of every
// kernel's row panel, so that each output element is computed by the same
// sequence of operations in a half as in the whole.
const splitRows = 16

// newPlan prepares the m filters w of geometry g: Winograd's filters
// if wino, the gathered product's where it applies, and im2col's packed
// filter matrix; only the sparse product if sparse is not nil.
func newPlan(g *Geom, w []float32, m int, bias []float32, sparse *SparseWeight, wino bool) *Plan {
	p := &Plan{g: g, cout: m, sparse: sparse}
	if bias != nil {
		p.bias = append([]float32(nil), bias...)
	}
	if sparse != nil {
		return p
	}
	if wino {
		// Forced, or planWinograd may choose it at some batch size.
		buf := make([]float32, winoFiltersSize(m, g.c))
		p.wino = winoFilters(w, m, g.c, false, buf)
	}
	if useGather(g) {
		buf := make([]float32, gatherPackedSize(g, m))
		p.gather = newGatherConv(g, m, w, false, buf)
	}
	p.packed = blas.Default().PackA(false, m, g.rows, w, g.rows)
	return p
}

// OutShape returns the channels, height and width of one output image.
func (p *Plan) OutShape() (c, h, w int) { return p.cout, p.g.ho, p.g.wo }

// InSize returns the number of values of one input image.
func (p *Plan) InSize() int { return p.g.c * p.g.h * p.g.w }

// OutSize returns the number of values of one output image.
func (p *Plan) OutSize() int { return p.cout * p.g.cols }

// Algorithm names the algorithm Run uses for a batch of n images:
// "sparse", "winograd", "gather" or "im2col".
func (p *Plan) Algorithm(n int) string {
	switch {
	case p.sparse != nil:
		return "sparse"
	case p.wino != nil && planWinograd(p.g, n, p.cout):
		return "winograd"
	case p.gather != nil:
		return "gather"
	}
	return "im2col"
}

// Run sets out to the convolution of the n images in x plus the bias,
// plus residual (when not nil; laid out as out), clamped at zero if relu.
// x holds n·InSize values, out and residual n·OutSize; out must not
// overlap x or residual. It panics on other lengths.
func (p *Plan) Run(n int, x, out, residual []float32, relu bool) {
	xSize, ySize := p.InSize(), p.OutSize()
	if n < 1 || len(x) != n*xSize || len(out) != n*ySize || (residual != nil && len(residual) != n*ySize) {
		panic(fmt.Sprintf("conv.Plan.Run: %d images need %d input and %d output values, got %d, %d and residual %d",
			n, n*xSize, n*ySize, len(x), len(out), len(residual)))
	}
	alg := p.Algorithm(n)
	if w := parallel.Workers(); n < w {
		// Few images: each image's output rows in bands on several
		// workers where the algorithm allows (Winograd's tile rows,
		// im2col's rows; the gathered product splits its own).
		th, tw := winoTiles(p.g)
		switch {
		case alg == "winograd" && splits(th, tw, w):
			p.winoBands(n, w, x, out, residual, relu)
			return
		case alg == "im2col" && !p.g.wide() && splits(p.g.ho, p.g.wo, w):
			p.im2colBands(n, w, x, out, residual, relu)
			return
		}
	}
	if h := p.halves; h[0] != nil && n < parallel.Workers() && (alg != "gather" || p.g.cols < 128) {
		// Few images, too small for bands: each image's two halves of the
		// output channels on two workers (the gathered product splits its
		// rows instead where it has at least two parts of 64 columns).
		hx, hy := h[0].OutSize(), p.OutSize()
		parallel.For(2*n, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				i, k := t/2, t%2
				var r []float32
				if residual != nil {
					r = residual[i*hy+k*hx : i*hy+(k+1)*hx]
				}
				h[k].run(alg, 1, x[i*xSize:(i+1)*xSize], out[i*hy+k*hx:i*hy+(k+1)*hx], r, relu)
			}
		})
		return
	}
	p.run(alg, n, x, out, residual, relu)
}

// winoBands is Run with Winograd for fewer images than workers: each
// image's tile rows are split into parts bands (winoBand), one per task,
// so that no two workers transform the same input or write the same
// output. The results are those of the whole image.
func (p *Plan) winoBands(n, parts int, x, out, residual []float32, relu bool) {
	th, tw := winoTiles(p.g)
	per, parts := bands(th, tw, min(parts, maxBands))
	xSize, ySize := p.InSize(), p.OutSize()
	parallel.For(n*parts, 1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			i, k := t/parts, t%parts
			t0, t1 := min(k*per, th), min((k+1)*per, th)
			if t0 == t1 {
				continue
			}
			winoBand(true, p.g, p.cout, p.wino, x, xSize, out, ySize, i, i+1, t0, t1, false, p.bias)
			p.epilogue(i, 2*t0*p.g.wo, min(2*t1, p.g.ho)*p.g.wo, false, out, residual, relu)
		}
	})
}

// splits reports whether rows of width columns make at least two bands
// for the workers w.
func splits(rows, width, w int) bool {
	_, n := bands(rows, width, min(w, maxBands))
	return n > 1
}

// bandColumns is the fewest GEMM columns of a band: at least every
// kernel's tile width, so that a band's product takes the path the whole
// image's takes and computes each element alike.
const bandColumns = 32

// bands splits rows of width columns into at most parts bands of per rows
// (the last may be shorter), each at least bandColumns wide, and returns
// per and the number of bands (1 when rows are too few to split).
func bands(rows, width, parts int) (per, n int) {
	least := (bandColumns + width - 1) / width // rows
	for n = min(parts, rows/least); n > 1; n-- {
		per = (rows + n - 1) / n
		if rows-(n-1)*per >= least {
			return per, n
		}
	}
	return rows, 1
}

// im2colBands is Run with im2col (not in the wide layout) for fewer
// images than workers: each image's output rows are split into parts
// bands, one per task, each unrolling only the input its rows read
// (im2colRows) and multiplying every filter by it; the product goes
// straight into the output. The results are those of the whole image.
func (p *Plan) im2colBands(n, parts int, x, out, residual []float32, relu bool) {
	g := p.g
	per, parts := bands(g.ho, g.wo, min(parts, maxBands))
	xSize, ySize := p.InSize(), p.OutSize()
	parallel.For(n*parts, 1, func(lo, hi int) {
		col := colScratch.get(g.rows * per * g.wo)
		defer colScratch.put(col)
		for t := lo; t < hi; t++ {
			i, k := t/parts, t%parts
			oh0, oh1 := min(k*per, g.ho), min((k+1)*per, g.ho)
			if oh0 == oh1 {
				continue
			}
			cols := (oh1 - oh0) * g.wo
			im2colRows(g, x[i*xSize:(i+1)*xSize], col, cols, oh0, oh1)
			j0 := oh0 * g.wo
			p.packed.SgemmSerial(false, cols, 1, col, cols, 0, out[i*ySize+j0:(i+1)*ySize], g.cols)
			p.epilogue(i, j0, j0+cols, true, out, residual, relu)
		}
	})
}

// run is Run with the algorithm alg.
func (p *Plan) run(alg string, n int, x, out, residual []float32, relu bool) {
	c := planCall{p: p, n: n, x: x, out: out, residual: residual, relu: relu}
	g := p.g
	switch alg {
	case "sparse":
		// The whole batch at once: sparseConv groups small images. With
		// fewer images than workers the rows of one image stay on one
		// worker: split over two, the sparse product of a ResNet-20 image
		// takes 1.5 times as long (measured with bench infer -batch 1);
		// split by output rows (each worker every filter over half the
		// padded image, one hand-off per layer), a 90 %-zero ResNet-20
		// ran 1,015-1,115 images/s at 2 threads against 1,243-1,445.
		serial := n < parallel.Workers()
		if residual != nil && !relu {
			// kernels.Affine adds a residual only before a ReLU: a
			// separate pass.
			sparseConv(g, p.sparse, n, x, out, p.bias, nil, kernels.Plain, serial)
			c.loop(stepEpilogue, 1)
			return
		}
		sparseConv(g, p.sparse, n, x, out, p.bias, residual, epilogueOf(residual, relu), serial)
	case "winograd":
		gs := winoGroupSize(g)
		c.serial = serialGemm(parallel.Chunks(n, gs))
		c.loop(stepWinograd, gs)
	case "gather":
		p.gather.run(n, x, p.InSize(), out, p.OutSize(), false, &c)
	default:
		gs := groupSize(g.cols)
		c.serial = serialGemm(parallel.Chunks(n, gs))
		c.loop(stepIm2col, gs)
	}
}

// planCall is one call of Plan.Run: what its loops over the images
// need, handed to methods by pointer rather than captured by closures, so
// that a call whose loops run on the calling goroutine allocates nothing.
type planCall struct {
	p                *Plan
	n                int
	x, out, residual []float32
	relu             bool
	serial           bool // the GEMMs of a step on the calling goroutine
}

// callStep is what planCall.step computes for a range of images.
type callStep uint8

const (
	stepWinograd callStep = iota // Winograd, then the epilogue
	stepIm2col                   // im2col and the GEMM, then the epilogue with the bias
	stepEpilogue                 // the epilogue alone
)

// loop runs step s over the images in chunks of grain, as parallel.For
// does, on the calling goroutine when parallel.For would run it there.
func (c *planCall) loop(s callStep, grain int) {
	if parallel.Workers() <= 1 || parallel.Chunks(c.n, grain) <= 1 {
		for lo := 0; lo < c.n; lo += grain {
			c.step(s, lo, min(lo+grain, c.n))
		}
		return
	}
	shared := *c // only a parallel loop puts the call on the heap
	parallel.For(c.n, grain, func(lo, hi int) { shared.step(s, lo, hi) })
}

// step computes s for the images [lo, hi).
func (c *planCall) step(s callStep, lo, hi int) {
	p := c.p
	g, cols := p.g, p.g.cols
	switch s {
	case stepWinograd:
		winoGroup(c.serial, g, p.cout, p.wino, c.x, p.InSize(), c.out, p.OutSize(), lo, hi, false, p.bias)
	case stepIm2col:
		// convGroup's GEMMs multiply the filter matrix, packed once.
		convGroup(multiplier{pa: p.packed, serial: c.serial}, g, p.cout, nil, c.x, p.InSize(), c.out, p.OutSize(), lo, hi, false)
	}
	for i := lo; i < hi; i++ {
		c.after(i, 0, cols, s == stepIm2col)
	}
}

// after applies the epilogue to the columns [j0, j1) of image i, adding
// the bias if withBias.
func (c *planCall) after(i, j0, j1 int, withBias bool) {
	c.p.epilogue(i, j0, j1, withBias, c.out, c.residual, c.relu)
}

// planWinograd reports whether a Plan of geometry g and m filters runs
// a batch of n images with Winograd: where it applies (or is forced),
// for at least 32 input and output channels, at least 64 tiles in the
// batch and little waste past the edges (winoEdgeOK). Its filters are
// transformed once, so the rule differs from winogradPays, measured with
// the transform paid per call: by BenchmarkPlan (docs/benchmarks.md),
// 32 channels at 16×16 run with Winograd in 52-74 µs per image at batch 1
// against 81-108 gathered, and 55-66 against 77-97 at batch 64; 64
// channels at 8×8 (16 tiles an image) lose at batch 1 (149-156 against
// 97-105) and win at 64 (36 against 64-87); with 16 channels the two are
// level within the noise, and the gathered product stays.
func planWinograd(g *Geom, n, m int) bool {
	if g.algo != AlgoAuto && g.algo != AlgoBlocked { // Plan has no blocked path: AlgoAuto's choice
		return useWinograd(g, n, m) // forced
	}
	th, tw := winoTiles(g)
	return winogradOK(g) && g.c >= 32 && m >= 32 && n*th*tw >= 64 && winoEdgeOK(g)
}

// epilogue adds the bias (if withBias), the residual (when not nil) and
// the ReLU (if relu) to the columns [j0, j1) of image i of out.
func (p *Plan) epilogue(i, j0, j1 int, withBias bool, out, residual []float32, relu bool) {
	withBias = withBias && p.bias != nil
	if !withBias && residual == nil && !relu {
		return
	}
	e := epilogueOf(residual, relu)
	ySize, cols := p.OutSize(), p.g.cols
	for o := range p.cout {
		d := out[i*ySize+o*cols+j0 : i*ySize+o*cols+j1]
		var bo float32
		if withBias {
			bo = p.bias[o]
		}
		if residual != nil && !relu {
			// kernels.Affine adds a residual only before a ReLU.
			r := residual[i*ySize+o*cols+j0:]
			for k := range d {
				d[k] += bo + r[k]
			}
			continue
		}
		var r []float32
		if residual != nil {
			r = residual[i*ySize+o*cols+j0 : i*ySize+o*cols+j1]
		}
		kernels.Affine(d, d, r, 0, 1, bo, e)
	}
}
