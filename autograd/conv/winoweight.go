package conv

import (
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// The weight gradient on Winograd F(2×2, 3×3). Forward computes each 2×2
// output tile of output channel o as Y = Aᵀ·[Σ_c U[o][c] ⊙ V[c]]·A, with
// U = G·f·Gᵀ the transform of the 3×3 filter f of (o, c) and V = Bᵀ·d·B
// that of the tile's 4×4 input window d in channel c (winograd.go's
// matrices, which package nchwc's kernels compute alike). Its gradient
// follows by transposing each step: the tile's 4×4 product receives
// D = A·dY·Aᵀ from the tile's output gradient dY, the transformed filter
// dU[o][c] = Σ_tiles D[o] ⊙ V[c], and the filter df = Gᵀ·dU·G. Over a
// group of images the sums over tiles become 16 products, one per
// transform point ξ,
//
//	M_ξ (Cout × Cin) = D_ξ (Cout × P) · V_ξ (Cin × P)ᵀ,
//
// P the group's tiles: 16 multiplications per tile and filter where the
// weight gradient of im2col takes 9 per output pixel, 36 per tile, at the
// price of the transforms of the images (winoInput, as Forward's Winograd
// computes them) and of their output gradients (winoGradOut). The rows of
// both operands lie along the tiles, so the products are dot products of
// rows (blas.Sgemm with B transposed). The groups' M_ξ are added up in
// group order, whatever the worker that computed them, and transformed
// once (winoWeightFilters).
//
// The signs: A's last row is (0, −1), so D's row and column 3 carry a
// minus sign. The transforms of the output gradients leave it out (they
// compute D' = A'·dY·A'ᵀ with A' = diag(1, 1, 1, −1)·A, only additions),
// and winoWeightFilters puts it back with G' = diag(1, 1, 1, −1)·G: the
// products change only in sign, exactly, so the result is the same.

// useWinoWeight reports whether the weight gradient of a convolution with
// geometry g, n images and cout filters runs with Winograd
// (winoWeightGrad): where Winograd applies in float32, if forced by g.algo
// (AlgoWinograd, or AlgoBlocked where the channel-blocked Winograd
// applies) or else if winoWeightPays.
func useWinoWeight(g *Geom, n, cout int) bool {
	if !winogradOK(g) || g.bf16 || g.noWinoWeight {
		return false
	}
	switch g.algo {
	case AlgoWinograd:
		return true
	case AlgoBlocked:
		return blockedOK(g)
	case AlgoAuto:
		return winoWeightPays(g, n, cout)
	}
	return false
}

// winoWeightPays is the per-layer rule of the Winograd weight gradient,
// measured by BenchmarkBlockedLayers (batch 128, CPU time per pass,
// docs/benchmarks.md) against the weight gradients of gatherConv and
// im2col:
//   - at least 32 input and output channels where the GEMM engine
//     computes those gradients' products as dot products of rows read in
//     place (blas.Engine.DotProducts, the AVX-512 engine): with 16 the
//     NCHW transforms of the images and of the output gradients, which
//     grow with the channels while the products' saving grows with their
//     product, cost more than the saving (16 channels at 32×32 1.4×
//     slower; 32 at 16×16 1.1× faster, 64 at 8×8 1.3×, VGG-16's 64 to
//     512 channels down to 4×4 1.3–1.4×);
//   - at least 16 where it packs their operands instead (the AVX2 engine:
//     16 channels at 32×32 1.5× faster for both gradients, 32 at 16×16
//     1.7×, 64 at 8×8 1.1×), or where the products run as outer
//     products in the blocked layout (winoWeightBlocked: 16 channels at
//     32×32 1.6× faster than gatherConv's weight gradient, both gradients
//     1.3×);
//   - tiles that waste little of their outputs past the edges
//     (winoEdgeOK);
//   - at least 512 tiles in the batch: the products' final sums across
//     the lanes and their transform into filters, costs that grow with
//     the filters alone, are otherwise not paid back (512 channels at
//     2×2, 128 tiles, 1.4× slower).
func winoWeightPays(g *Geom, n, cout int) bool {
	th, tw := winoTiles(g)
	least := 32
	if !blas.Default().DotProducts() || winoWeightBlocked(g, cout) {
		least = 16
	}
	return g.c >= least && cout >= least && n*th*tw >= 512 && winoEdgeOK(g)
}

// winoGradSigns are the signs of A' = diag(winoGradSigns)·A.
var winoGradSigns = [4]float64{1, 1, 1, -1}

// winoWeightTarget is the number of tiles that a group of images of
// winoWeightGrad aims at: enough for the dot products to pay for their
// final sums across the vector lanes, few enough for the group's
// transformed images and output gradients to stay in the caches.
const winoWeightTarget = 512

// winoWeightScratch bounds the transformed images and output gradients of
// a group, 16·(Cin + Cout)·P values: as much as Forward's Winograd takes
// for 512 channels (winoGroupSize).
const winoWeightScratch = 16 * 1024 * 256

// winoWeightGroupSize returns how many images of geometry g with cout
// filters make one group of winoWeightGrad: about winoWeightTarget tiles,
// fewer where they would take more than winoWeightScratch values. It
// depends only on the layer, so the groups never depend on the worker
// count.
func winoWeightGroupSize(g *Geom, cout int) int {
	th, tw := winoTiles(g)
	p := min(winoWeightTarget, winoWeightScratch/(16*(g.c+cout)))
	return max(1, (p+th*tw-1)/(th*tw))
}

// winoWeightGrad adds to gw (cout × g.c × 3 × 3) the weight gradient of
// the convolution of geometry g (winogradOK) of the n images in x with
// cout filters, given its output gradient gy, computed with Winograd as
// the comment above says. Groups of winoWeightGroupSize images run in
// parallel. Unless gx is nil, each group also computes its images' input
// gradient with the channel-blocked Winograd (blockedImages), on the
// output gradients it is about to read — where the products run in the
// blocked layout (winoWeightBlocked), on the same conversion of each
// output gradient to that layout. The result is bit-identical for every
// number of workers.
func winoWeightGrad(g *Geom, n, cout int, x, gy, gw []float32, gx *fusedInputGrad) {
	gs := winoWeightGroupSize(g, cout)
	chunks := parallel.Chunks(n, gs)
	serial := serialGemm(chunks)
	merge, acc := newOrderedSum(chunks, 16*cout*g.c)
	defer partialScratch.put(acc)
	parallel.For(n, gs, func(lo, hi int) {
		merge.done(lo/gs, winoWeightGroup(serial, g, cout, x, gy, lo, hi, gx))
	})
	winoWeightFilters(acc, cout, g.c, gw)
}

// fusedInputGrad is the input gradient winoWeightGrad computes beside the
// weight gradient: blockedImages' geometry, filters, padded bias,
// destination and whether it adds to it.
type fusedInputGrad struct {
	g          *Geom
	f          *nchwc.WinoFilter
	pb, gx     []float32
	accumulate bool
}

// winoWeightGroup returns, in a buffer from partialScratch, the products
// M'_ξ (cout × g.c, at [ξ·cout·g.c]) of the images [lo, hi): with D'
// in place of D (the signs above). The products run on the calling
// goroutine if serial.
func winoWeightGroup(serial bool, g *Geom, cout int, x, gy []float32, lo, hi int, gx *fusedInputGrad) []float32 {
	k, cnt := g.c, hi-lo
	th, tw := winoTiles(g)
	p := cnt * th * tw
	xSize, ySize := k*g.h*g.w, cout*g.ho*g.wo
	d := colScratch.get(16*cout*p + 16*16 + 16) // winoWeightOuter's planes a line apart
	defer colScratch.put(d)
	part := partialScratch.get(16 * cout * k)
	if winoWeightBlocked(g, cout) {
		return winoWeightOuter(g, cout, x, gy, lo, hi, d, part, gx)
	}
	if gx != nil {
		blockedImages(gx.g, gx.f, gx.pb, gy, gx.gx, gx.accumulate, lo, hi)
	}
	gemm := gemmOf(false, serial)
	v := colScratch.get(16 * k * p)
	defer colScratch.put(v)
	work := colScratch.get(max(winoInputWork(g, cnt, 0, th), winoGradOutWork(g, cnt)))
	defer colScratch.put(work)
	winoInput(g, x, xSize, lo, hi, 0, th, v, work)
	winoGradOut(g, cout, gy, ySize, lo, hi, d, work)
	for xi := range 16 {
		gemm(false, true, cout, k, p, 1, d[xi*cout*p:(xi+1)*cout*p], p, v[xi*k*p:(xi+1)*k*p], p, 0, part[xi*cout*k:(xi+1)*cout*k], k)
	}
	return part
}

// winoWeightOuter is winoWeightGroup where winoWeightBlocked: it
// converts each image and output gradient to nchwc's blocked layout
// (nchwc.Act), transforms the images as nchwc's Winograd does
// (nchwc.WinogradInput) and the output gradients with winoGradIn, both
// into planes ξ of [block of 16 channels][tile][16 channels], and adds
// the products M'_ξ[o][c] = Σ_t D'_ξ[t][o]·V_ξ[t][c] up as outer products
// of those vectors (outer), a 16×16 block of (output, input) channels at
// a time, in runs of winoOuterRun tiles. d holds 16·cout·p + 272 values
// of scratch; part (16·cout·g.c values), the group's sums, is returned.
// Unless gx is nil, each output gradient, once in the blocked layout,
// also gives its image's input gradient (blockedImager).
func winoWeightOuter(g *Geom, cout int, x, gy []float32, lo, hi int, d, part []float32, gx *fusedInputGrad) []float32 {
	k, cnt := g.c, hi-lo
	th, tw := winoTiles(g)
	tpi := th * tw
	p := cnt * tpi
	xSize, ySize := k*g.h*g.w, cout*g.ho*g.wo
	nb := k / 16
	xs := nb*p*16 + 16 // a line more: the 16 planes not 4 KiB apart
	ys := cout*p + 16
	buf := colScratch.get(16*xs + 16)
	defer colScratch.put(buf)
	v := lineAligned(buf, 16*xs)
	if len(d) < 16*ys+16 {
		panic("conv.winoWeightOuter: scratch too small")
	}
	dv := lineAligned(d, 16*ys)
	aLen := k * (g.h + 2) * (g.w + 2)
	bLen := cout * (g.h + 2) * (g.w + 2)
	abuf := colScratch.get(aLen + bLen + 32)
	defer colScratch.put(abuf)
	in := &nchwc.Act{C: k, H: g.h, W: g.w, CB: 16, Data: lineAligned(abuf, aLen)}
	dy := &nchwc.Act{C: cout, H: g.h, W: g.w, CB: 16, Data: lineAligned(abuf[len(abuf)-bLen-16:], bLen)}
	clear(abuf) // the borders stay zero
	rs, bs := dy.RowStride(), dy.BlockStride()
	var inputGrad *blockedImager
	if gx != nil {
		inputGrad = &blockedImager{g: gx.g, f: gx.f, pb: gx.pb, dst: gx.gx, accumulate: gx.accumulate}
		defer inputGrad.release()
	}
	for j := range cnt {
		in.FromNCHW(x[(lo+j)*xSize : (lo+j+1)*xSize])
		nchwc.WinogradInput(in, v, j*tpi*16, p*16, xs, 0, th)
		dy.FromNCHW(gy[(lo+j)*ySize : (lo+j+1)*ySize])
		if inputGrad != nil {
			inputGrad.image(lo+j, dy)
		}
		for b := range cout / 16 {
			for i := range th {
				// Tile row i's output gradients: padded rows 2i+1 and 2i+2
				// from pixel 1 on (past the edges the border's zeros).
				winoGradIn(dy.Data, b*bs+(2*i+1)*rs+16, rs, tw, dv, b*p*16+(j*tpi+i*tw)*16, ys)
			}
		}
	}
	var c [256]float32
	for xi := range 16 {
		for ob := range cout / 16 {
			dx := dv[xi*ys+ob*p*16 : xi*ys+(ob+1)*p*16]
			for b := range nb {
				vx := v[xi*xs+b*p*16 : xi*xs+(b+1)*p*16]
				clear(c[:])
				for t := 0; t < p; t += winoOuterRun {
					outer(dx[16*t:], min(winoOuterRun, p-t), vx[16*t:], c[:])
				}
				for o := range 16 {
					at := (xi*cout+16*ob+o)*k + 16*b
					copy(part[at:at+16], c[16*o:16*o+16])
				}
			}
		}
	}
	return part
}

// winoWeightBlocked reports whether winoWeightGroup computes the products
// of geometry g and cout filters as outer products (outer) of the output
// gradients' transforms with the images' transformed in nchwc's
// channel-blocked layout (nchwc.WinogradInput), rather than as dot
// products of the NCHW transforms: where that layout applies (blockedOK),
// for whole blocks of 16 input and output channels, with the AVX-512
// kernel, which keeps all 16×16 sums of a block of a product in
// registers. Measured by BenchmarkBlockedLayers (batch 128, the weight
// gradient alone, 1 worker, CPU ms, against the NCHW transforms and dot
// products): 16 channels at 32×32 9.4–11.6 → 5.0–5.4, 32 at 16×16
// 6.8–9.0 → 4.9–5.2, 64 at 8×8 6.3–8.4 → 4.4–6.2, 64 at 32×32 93–95 →
// 64–67, 128 at 16×16 101–108 → 63–70, 256 at 8×8 79–82 → 64–73, 512 at
// 4×4 124 → 107–110.
func winoWeightBlocked(g *Geom, cout int) bool {
	return haveAVX512 && blockedOK(g) && g.c%16 == 0 && cout%16 == 0 && !g.nchwWinoWeight
}

// winoOuterRun is the number of tiles whose outer products winoWeightGroup
// sums in registers before adding them to the group's sums: runs as long
// as the dot products' lanes, for an error like theirs.
const winoOuterRun = 64

// winoGradOutWork returns the scratch values winoGradOut needs for cnt
// images of geometry g.
func winoGradOutWork(g *Geom, cnt int) int {
	th, tw := winoTiles(g)
	return 4*th*tw + 8*cnt*th*tw
}

// winoGradOut writes into d the transformed output gradients D'_ξ =
// A'·dY·A'ᵀ of the tiles of the images [lo, hi) of gy (ySize values each,
// m channels of geometry g's output), in the order of winoInput's V:
// with p = (hi−lo)·th·tw tiles, D'_ξ[o][t] at d[(ξ·m + o)·p + t]. work
// holds winoGradOutWork(g, hi−lo) values of scratch.
//
// Along the rows, half[y·4+s] = Σ_x A'[s][x]·dY[y][x], then D'[r·4+s] =
// Σ_y A'[r][y]·half[y·4+s]. An output of odd height or width is copied
// into a plane of whole tiles whose last row or column stays zero (the
// outputs past the edge, which forward drops, have no gradient); one of
// even size is read in place.
func winoGradOut(g *Geom, m int, gy []float32, ySize, lo, hi int, d, work []float32) {
	cnt := hi - lo
	th, tw := winoTiles(g)
	tpi := th * tw
	p := cnt * tpi
	hp, wp := 2*th, 2*tw
	plane, half := work[:hp*wp], work[hp*wp:hp*wp+8*p]
	pad := g.ho%2 != 0 || g.wo%2 != 0
	if pad {
		clear(plane)
	}
	var ins [2][]float32
	var outs [4][]float32
	hw := g.ho * g.wo
	for o := 0; o < m; o++ {
		for j := 0; j < cnt; j++ {
			img := gy[(lo+j)*ySize+o*hw : (lo+j)*ySize+(o+1)*hw]
			src, ld := img, g.wo
			if pad {
				for r := 0; r < g.ho; r++ {
					copy(plane[r*wp:], img[r*g.wo:(r+1)*g.wo])
				}
				src, ld = plane, wp
			}
			winoGradRows(half[j*tpi:], p, src, ld, th, tw, true)
		}
		for s := 0; s < 4; s++ {
			ins[0], ins[1] = half[s*p:(s+1)*p], half[(4+s)*p:(5+s)*p]
			for r := 0; r < 4; r++ {
				off := ((r*4+s)*m + o) * p
				outs[r] = d[off : off+p]
			}
			winoGradCols(&outs, &ins, true)
		}
	}
}

// winoGradRows applies A' along the rows of the th×tw tiles of a plane of
// 2·th rows of at least 2·tw values, ld apart: h[(y·4+s)·stride + i·tw+q]
// = Σ_x A'[s][x]·plane[(2i+y)·ld + 2q+x], that is (a, a+b, a−b, b) for the
// pair (a, b) of the tile's row y.
//
// asm allows the AVX2 kernel where the CPU has it, so that the tests can
// compare it with the Go loop; the results are bit-identical.
func winoGradRows(h []float32, stride int, plane []float32, ld, th, tw int, asm bool) {
	n := th * tw
	_ = h[7*stride+n-1]
	for y := range 2 {
		o := h[4*y*stride:] // the outputs of row y, stride apart
		i0 := 0             // the tile rows before i0 are done
		if asm && haveAVX2 {
			i0 = rowsAVX2(winoGradRowsAVX2, o, stride, plane, ld, th, tw, y, 2*tw)
		}
		h0, h1, h2, h3 := o[:n], o[stride:stride+n], o[2*stride:2*stride+n], o[3*stride:3*stride+n]
		for i := i0; i < th; i++ {
			row := plane[(2*i+y)*ld : (2*i+y)*ld+2*tw]
			t0 := i * tw
			o0, o1, o2, o3 := h0[t0:t0+tw], h1[t0:t0+tw], h2[t0:t0+tw], h3[t0:t0+tw]
			q0 := 0
			if asm && haveAVX2 && tw >= 8 {
				q0 = tw &^ 7
				winoGradRowsAVX2(&row[0], &o0[0], &o1[0], &o2[0], &o3[0], q0, 8, 16)
			}
			for q := q0; q < tw; q++ {
				a, b := row[2*q], row[2*q+1]
				o0[q] = a
				o1[q] = a + b
				o2[q] = a - b
				o3[q] = b
			}
		}
	}
}

// winoGradCols sets o[r][x] = Σ_y A'[r][y]·d[y][x] for x < len(o[0]):
// (a, a+b, a−b, b) for a = d[0][x], b = d[1][x].
func winoGradCols(o *[4][]float32, d *[2][]float32, asm bool) {
	n := len(o[0])
	o0, o1, o2, o3 := o[0][:n], o[1][:n], o[2][:n], o[3][:n]
	d0, d1 := d[0][:n], d[1][:n]
	x0 := 0
	if asm && haveAVX2 && n >= 8 {
		x0 = n &^ 7
		winoGradColsAVX2(&o0[0], &o1[0], &o2[0], &o3[0], &d0[0], &d1[0], x0)
	}
	for x := x0; x < n; x++ {
		a, b := d0[x], d1[x]
		o0[x] = a
		o1[x] = a + b
		o2[x] = a - b
		o3[x] = b
	}
}

// winoWeightFilters adds to gw (m × k × 3 × 3) the filters df = G'ᵀ·M'·G'
// of the products mp (M'_ξ[o][c] at mp[(ξ·m + o)·k + c]), G' =
// diag(winoGradSigns)·G, computed in float64: along the columns, t[a][s]
// = Σ_r G'[r][a]·M'[r][s], then df[a][b] = Σ_s t[a][s]·G'[s][b], each sum
// from zero in the order of its index (winoWeightFiltersRef, the test's
// loop, computes the same bits). The filters are independent of each
// other: ranges of winoFilterGrain of them run in parallel, with the same
// results for every number of workers.
func winoWeightFilters(mp []float32, m, k int, gw []float32) {
	mk := m * k
	_ = mp[16*mk-1]
	_ = gw[9*mk-1]
	parallel.For(mk, winoFilterGrain, func(lo, hi int) {
		winoWeightFilterRange(mp, mk, gw, lo, hi)
	})
}

// winoFilterGrain is the number of filters a call of
// winoWeightFilterRange transforms: enough to pay for handing them to a
// worker (about 40 µs).
const winoFilterGrain = 4096

// winoWeightFilterRange is winoWeightFilters for the filters [lo, hi) of
// the mk in mp and gw, the loops over G' unrolled with its entries held in
// variables (the products by its zeros kept: the same operations in the
// same order as the loops).
func winoWeightFilterRange(mp []float32, mk int, gw []float32, lo, hi int) {
	var gs [4][3]float64 // G'
	for r := range 4 {
		for a := range 3 {
			gs[r][a] = winoGradSigns[r] * winoG[r][a]
		}
	}
	g00, g01, g02 := gs[0][0], gs[0][1], gs[0][2]
	g10, g11, g12 := gs[1][0], gs[1][1], gs[1][2]
	g20, g21, g22 := gs[2][0], gs[2][1], gs[2][2]
	g30, g31, g32 := gs[3][0], gs[3][1], gs[3][2]
	var ms [16][]float32
	for xi := range ms {
		ms[xi] = mp[xi*mk+lo : xi*mk+hi : xi*mk+hi]
	}
	gw = gw[9*lo : 9*hi : 9*hi]
	for i := range hi - lo {
		var f [9]float64
		for s := range 4 {
			v0 := float64(ms[s][i])
			v1 := float64(ms[4+s][i])
			v2 := float64(ms[8+s][i])
			v3 := float64(ms[12+s][i])
			t0 := 0 + g00*v0
			t1 := 0 + g01*v0
			t2 := 0 + g02*v0
			t0 += g10 * v1
			t1 += g11 * v1
			t2 += g12 * v1
			t0 += g20 * v2
			t1 += g21 * v2
			t2 += g22 * v2
			t0 += g30 * v3
			t1 += g31 * v3
			t2 += g32 * v3
			gs0, gs1, gs2 := gs[s][0], gs[s][1], gs[s][2]
			f[0] += t0 * gs0
			f[1] += t0 * gs1
			f[2] += t0 * gs2
			f[3] += t1 * gs0
			f[4] += t1 * gs1
			f[5] += t1 * gs2
			f[6] += t2 * gs0
			f[7] += t2 * gs1
			f[8] += t2 * gs2
		}
		dst := gw[i*9 : i*9+9 : i*9+9]
		for j, v := range f {
			dst[j] += float32(v)
		}
	}
}

// outerGo adds to the 16×16 matrix c (row o at c[16o:16o+16]) the sum
// over t < n of the outer products d[16t:16t+16] ⊗ v[16t:16t+16] (c[16o +
// l] += Σ_t d[16t + o]·v[16t + l]): each of the 256 sums runs from zero
// in the order of t, one fused multiply-add per term, and is then added
// to c. outer's AVX-512 kernel computes the same values bit for bit, all
// 256 sums in registers.
func outerGo(d []float32, n int, v, c []float32) {
	if n == 0 {
		return
	}
	_ = d[16*n-1]
	_ = v[16*n-1]
	_ = c[255]
	for o := range 16 {
		var acc [16]float32
		for t := range n {
			x, vt := d[16*t+o], v[16*t:16*t+16]
			for l := range acc {
				acc[l] = kernels.FMA32(x, vt[l], acc[l])
			}
		}
		co := c[16*o : 16*o+16]
		for l := range co {
			co[l] += acc[l]
		}
	}
}

// winoGradInGo computes the transformed output gradients D'_ξ =
// A'·dY·A'ᵀ (winoGradOut's, bit for bit) of n tiles along a tile row of
// output gradients in nchwc's blocked layout: tile t's pixel (y, x), 16
// channels, at src[so + y·rs + 32t + 16x], its D'_ξ stored at dst[do +
// ξ·xs + 16t]. Along the rows first, h[y] = (a, a+b, a−b, b) of the pair
// (a, b) of row y, then D'[·][s] = (h0, h0+h1, h0−h1, h1).
func winoGradInGo(src []float32, so, rs, n int, dst []float32, do, xs int) {
	for t := range n {
		for l := range 16 {
			var h [2][4]float32
			for y := range 2 {
				a, b := src[so+y*rs+32*t+l], src[so+y*rs+32*t+16+l]
				h[y] = [4]float32{a, a + b, a - b, b}
			}
			for s := range 4 {
				o := do + s*xs + 16*t + l
				dst[o] = h[0][s]
				dst[o+4*xs] = h[0][s] + h[1][s]
				dst[o+8*xs] = h[0][s] - h[1][s]
				dst[o+12*xs] = h[1][s]
			}
		}
	}
}
