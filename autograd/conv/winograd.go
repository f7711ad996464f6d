package conv

import (
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// Winograd's minimal filtering F(2×2, 3×3) (Lavin and Gray, 2016)
// computes a 2×2 tile of a 3×3 convolution from the 4×4 window of its input
// as Y = Aᵀ[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]A. Over a whole layer the element-wise
// products become 16 independent GEMMs, one per transform point ξ:
//
//	M_ξ (Cout × P) = U_ξ (Cout × Cin) · V_ξ (Cin × P)
//
// where U holds the transformed filters, V the transformed input windows
// and P counts the tiles of a group of images: 16/4 = 4 multiplications
// per output instead of 9, at the price of the transforms.
//
// F(4×4, 3×3) (36/16 = 2.25 multiplications per output) was implemented
// and measured too and left out: its float32 error exceeds the 1e-5
// tolerance of the PyTorch fixtures from about 64 input channels on, even
// with the better-conditioned points 0, ±1, 2, −1/2 and float64 transforms
// (see docs/benchmarks.md), and it was slower than F(2×2, 3×3) on every
// layer measured.

// The transform matrices of F(2×2, 3×3): Bᵀ (4×4), G (4×3) and Aᵀ (2×4).
// The data transforms below are written out from them.
var (
	winoBT = [4][4]float64{
		{1, 0, -1, 0},
		{0, 1, 1, 0},
		{0, -1, 1, 0},
		{0, 1, 0, -1},
	}
	winoG = [4][3]float64{
		{1, 0, 0},
		{0.5, 0.5, 0.5},
		{0.5, -0.5, 0.5},
		{0, 0, 1},
	}
	winoAT = [2][4]float64{
		{1, 1, 1, 0},
		{0, 1, -1, -1},
	}
)

// winoFilters transforms the filters of a convolution with m output and
// k input channels and packs them once for the 16 GEMMs of every image
// group: u[ξ] is U_ξ (m × k), packed from its transpose, so that the GEMMs
// read it where it lies. With swap false the filter of output o and input
// c is w[o][c] (w is m×k×3×3); with swap true it is w[c][o] rotated by
// 180° (w is k×m×3×3), the filter of the input gradient. The transform is
// computed in float64. buf holds the packed filters if its capacity is at
// least winoFiltersSize(m, k).
func winoFilters(w []float32, m, k int, swap bool, buf []float32) *[16]*blas.PackedA {
	e := blas.Default()
	size := e.PackedASize(m, k)
	if cap(buf) < 16*size {
		buf = make([]float32, 16*size)
	}
	var u [16]*blas.PackedA
	for xi := range u {
		u[xi] = e.NewPackedA(true, m, k, buf[xi*size:(xi+1)*size])
	}
	// Rows of the scratch are a cache line longer than m, which is often
	// a power of two, so that the 16 rows written at once do not collide
	// in the caches; each U_ξᵀ is packed from every 16th row.
	pitch := m + 16
	parallel.For(k, max(1, 4096/m), func(lo, hi int) {
		tmp := colScratch.get(16 * pitch * (hi - lo))
		defer colScratch.put(tmp)
		winoFilterRange(w, m, k, swap, tmp, pitch, lo, hi, true)
		for xi, pa := range u {
			pa.Pack(tmp[xi*pitch:], 16*pitch, lo, hi)
		}
	})
	return &u
}

// winoFiltersSize returns how many float32 values the packed filters of
// winoFilters take.
func winoFiltersSize(m, k int) int { return 16 * blas.Default().PackedASize(m, k) }

// winoFilterRange writes the transformed filters of the input channels c
// in [lo, hi) into t, as rows t[c−lo][ξ] of pitch elements indexed by o.
// For each c it transforms the filters of all output channels in turn,
// four at a time with the AVX2 kernel if asm allows it and the CPU has
// it; the results are bit-identical to winoFilter's.
func winoFilterRange(w []float32, m, k int, swap bool, t []float32, pitch, lo, hi int, asm bool) {
	for c := lo; c < hi; c++ {
		dst := t[(c-lo)*16*pitch : (c-lo)*16*pitch+15*pitch+m]
		// The filter of output o starts at src[o·stride].
		src, stride := w[c*9:], k*9
		if swap {
			src, stride = w[c*m*9:], 9
		}
		o0 := 0
		if asm && haveAVX2 && m >= 4 {
			o0 = m &^ 3
			_ = src[(o0-1)*stride+8]
			winoFilterAVX2(&dst[0], pitch, &src[0], stride, o0, swap)
		}
		for o := o0; o < m; o++ {
			winoFilter(dst[o:], pitch, src[o*stride:o*stride+9], swap)
		}
	}
}

// winoFilter writes the transform U = G·f·Gᵀ (4×4) of the 3×3 filter f
// held in src, rotated by 180° if swap, to dst[ξ·pitch] for ξ = 4i+j
// (kernels.WinogradFilter, which package nchwc's Winograd shares).
func winoFilter(dst []float32, pitch int, src []float32, swap bool) {
	kernels.WinogradFilter(dst, pitch, src, swap)
}

// winoInRows applies Bᵀ along the rows of the 4×4 windows of the th×tw
// tiles of a padded plane with row pitch wp: h[(l·4+s)·stride + i·tw+q] =
// Σ_j Bᵀ[s][j]·plane[(2i+l)·wp + 2q+j].
//
// The four transforms take asm, which allows the AVX2 kernels where the
// CPU has them, so that the tests can compare them with the Go loops; the
// results are bit-identical.
func winoInRows(h []float32, stride int, plane []float32, wp, th, tw int, asm bool) {
	n := th * tw
	_ = h[15*stride+n-1]
	if n == 1 {
		// A single tile: 16 values, the loops' overheads saved.
		for l := range 4 {
			w := plane[l*wp : l*wp+4 : l*wp+4]
			a, b, c, d := w[0], w[1], w[2], w[3]
			h[4*l*stride], h[(4*l+1)*stride], h[(4*l+2)*stride], h[(4*l+3)*stride] = a-c, b+c, c-b, b-d
		}
		return
	}
	for l := range 4 {
		o := h[4*l*stride:] // the outputs of row l, stride apart
		i0 := 0             // the tile rows before i0 are done
		if asm && haveAVX2 {
			i0 = rowsAVX2(winoInRowsAVX2, o, stride, plane, wp, th, tw, l, 2*tw+2)
			if i0 == 0 && tw == 2 && th >= 2 {
				// Four tiles at a time from two tile rows.
				i0 = th &^ 1
				_ = plane[(2*i0-2+l)*wp+2*tw+1]
				winoInRows2AVX2(&plane[l*wp], &o[0], &o[stride], &o[2*stride], &o[3*stride], i0*tw, wp)
			}
		}
		if i0 == th {
			continue
		}
		h0, h1, h2, h3 := o[:n], o[stride:stride+n], o[2*stride:2*stride+n], o[3*stride:3*stride+n]
		for i := i0; i < th; i++ {
			row := plane[(2*i+l)*wp : (2*i+l)*wp+2*tw+2]
			t0 := i * tw
			o0, o1, o2, o3 := h0[t0:t0+tw], h1[t0:t0+tw], h2[t0:t0+tw], h3[t0:t0+tw]
			q0 := 0
			if asm && haveAVX2 && tw >= 8 {
				q0 = tw &^ 7
				winoInRowsAVX2(&row[0], &o0[0], &o1[0], &o2[0], &o3[0], q0, 8, 16)
			}
			for q := q0; q < tw; q++ {
				w := row[2*q : 2*q+4 : 2*q+4]
				a, b, c, d := w[0], w[1], w[2], w[3]
				o0[q] = a - c
				o1[q] = b + c
				o2[q] = c - b
				o3[q] = b - d
			}
		}
	}
}

// rowsKernel is an AVX2 row transform of winograd_amd64.s
// (winoInRowsAVX2, winoGradRowsAVX2): n tiles, the values of the first
// four of every eight at row and those of the other four half elements
// further, then row moved on by adv elements.
type rowsKernel func(row, o0, o1, o2, o3 *float32, n, half, adv int)

// rowsAVX2 runs kern over the th×tw tiles of row y of their windows
// (plane row 2i+y for tile row i, rows ld apart, kern reading span values
// of each from its first), writing tile t's outputs at o[s·stride + t],
// as far as the kernel's steps allow: the whole plane in one call for
// tw = 8 (a tile row a step) and tw = 4 (four tiles from each of two tile
// rows), a call per tile row for other multiples of 8. It returns the
// number of tile rows done, 0 or from the first; the caller's Go loop
// does the rest.
func rowsAVX2(kern rowsKernel, o []float32, stride int, plane []float32, ld, th, tw, y, span int) int {
	switch {
	case tw == 8 || tw == 4 && th >= 2:
		half, adv, i0 := 8, 2*ld, th
		if tw == 4 {
			half, adv, i0 = 2*ld, 4*ld, th&^1
		}
		_ = plane[(2*i0-2+y)*ld+span-1]
		kern(&plane[y*ld], &o[0], &o[stride], &o[2*stride], &o[3*stride], i0*tw, half, adv)
		return i0
	case tw%8 == 0:
		_ = plane[(2*th-2+y)*ld+span-1]
		for i := range th {
			r, t := (2*i+y)*ld, i*tw
			kern(&plane[r], &o[t], &o[stride+t], &o[2*stride+t], &o[3*stride+t], tw, 8, 16)
		}
		return th
	}
	return 0
}

// winoInCols sets o[r][x] = Σ_l Bᵀ[r][l]·d[l][x] for x < len(o[0]).
func winoInCols(o, d *[4][]float32, asm bool) {
	n := len(o[0])
	o0, o1, o2, o3 := o[0][:n], o[1][:n], o[2][:n], o[3][:n]
	d0, d1, d2, d3 := d[0][:n], d[1][:n], d[2][:n], d[3][:n]
	x0 := 0
	if asm && haveAVX2 && n >= 8 {
		x0 = n &^ 7
		winoInColsAVX2(&o0[0], &o1[0], &o2[0], &o3[0], &d0[0], &d1[0], &d2[0], &d3[0], x0)
	}
	for x := x0; x < n; x++ {
		a, b, c, e := d0[x], d1[x], d2[x], d3[x]
		o0[x] = a - c
		o1[x] = b + c
		o2[x] = c - b
		o3[x] = b - e
	}
}

// winoOutCols sets o[y][x] = Σ_r Aᵀ[y][r]·d[r][x] for x < len(o[0]).
func winoOutCols(o *[2][]float32, d *[4][]float32, asm bool) {
	n := len(o[0])
	o0, o1 := o[0][:n], o[1][:n]
	d0, d1, d2, d3 := d[0][:n], d[1][:n], d[2][:n], d[3][:n]
	x0 := 0
	if asm && haveAVX2 && n >= 8 {
		x0 = n &^ 7
		winoOutColsAVX2(&o0[0], &o1[0], &d0[0], &d1[0], &d2[0], &d3[0], x0)
	}
	for x := x0; x < n; x++ {
		b, c := d1[x], d2[x]
		o0[x] = d0[x] + b + c
		o1[x] = b - c - d3[x]
	}
}

// outMode says how winoOutRows writes the output plane.
type outMode int

const (
	outStore outMode = iota // store the results
	outAdd                  // add them to the plane
	outBias                 // store them plus a bias
)

// winoOutRows applies Aᵀ along the rows of the th×tw tiles of an ho×wo
// output plane and writes the results as mode says: output
// (2i+x, 2q+y) = Σ_s Aᵀ[y][s]·h[(x·4+s)·stride + i·tw+q] (+ bias for
// outBias), dropping a last row or column past the plane's edge.
func winoOutRows(out []float32, ho, wo int, h []float32, stride, th, tw int, mode outMode, bias float32, asm bool) {
	n := th * tw
	full := wo / 2 // tiles whose two columns lie inside the plane
	_ = h[7*stride+n-1]
	if n == 1 {
		// A single tile, the loops' overheads saved.
		for x := 0; x < 2 && x < ho; x++ {
			d0, b, c, d3 := h[4*x*stride], h[(4*x+1)*stride], h[(4*x+2)*stride], h[(4*x+3)*stride]
			y := [2]float32{d0 + b + c, b - c - d3}
			for q, v := range out[x*wo : x*wo+min(wo, 2)] {
				switch mode {
				case outAdd:
					y[q] = v + y[q]
				case outBias:
					y[q] += bias
				}
				out[x*wo+q] = y[q]
			}
		}
		return
	}
	for x := range 2 {
		d := h[4*x*stride:] // the inputs of output row x, stride apart
		i0 := 0             // the tile rows before i0 are done
		if rows := (ho - x + 1) / 2; asm && haveAVX2 && (tw == 8 && full == 8 || tw == 4 && full == 4 && rows >= 2) {
			// All the tile rows in one call: eight tiles at a time from
			// one tile row, or from two: output rows 2i+x and 2i+2+x.
			half, adv := 8, 2*wo
			i0 = rows
			if tw == 4 {
				half, adv = 2*wo, 4*wo
				i0 = rows &^ 1
			}
			_ = out[(2*i0-2+x)*wo+2*full-1]
			winoOutRowsAVX2(&out[x*wo], &d[0], &d[stride], &d[2*stride], &d[3*stride], i0*tw, int(mode), bias, half, adv)
		} else if asm && haveAVX2 && tw == 2 && full == 2 && rows >= 2 {
			// Four tiles at a time from two tile rows.
			i0 = rows &^ 1
			_ = out[(2*i0-2+x)*wo+2*full-1]
			winoOutRows2AVX2(&out[x*wo], &d[0], &d[stride], &d[2*stride], &d[3*stride], i0*tw, int(mode), bias, wo)
		}
		if rows := (ho - x + 1) / 2; asm && haveAVX2 && i0 == 0 && full == tw && tw%8 == 0 {
			// A call per tile row, eight tiles at a time along it.
			_ = out[(2*rows-2+x)*wo+2*full-1]
			for i := range rows {
				t := i * tw
				winoOutRowsAVX2(&out[(2*i+x)*wo], &d[t], &d[stride+t], &d[2*stride+t], &d[3*stride+t], tw, int(mode), bias, 8, 16)
			}
			continue
		}
		if i0 >= th || 2*i0+x >= ho {
			continue
		}
		h0, h1, h2, h3 := d[:n], d[stride:stride+n], d[2*stride:2*stride+n], d[3*stride:3*stride+n]
		for i := i0; i < th && 2*i+x < ho; i++ {
			row := out[(2*i+x)*wo : (2*i+x+1)*wo]
			t0 := i * tw
			d0, d1, d2, d3 := h0[t0:t0+tw], h1[t0:t0+tw], h2[t0:t0+tw], h3[t0:t0+tw]
			r := row[:2*full]
			q0 := 0
			if asm && haveAVX2 && full >= 8 {
				q0 = full &^ 7
				winoOutRowsAVX2(&r[0], &d0[0], &d1[0], &d2[0], &d3[0], q0, int(mode), bias, 8, 16)
			}
			switch mode {
			case outAdd:
				for q := q0; q < full; q++ {
					b, c := d1[q], d2[q]
					s := r[2*q : 2*q+2 : 2*q+2]
					s[0] += d0[q] + b + c
					s[1] += b - c - d3[q]
				}
				if full < tw {
					row[2*full] += d0[full] + d1[full] + d2[full]
				}
			case outBias:
				for q := q0; q < full; q++ {
					b, c := d1[q], d2[q]
					s := r[2*q : 2*q+2 : 2*q+2]
					s[0] = d0[q] + b + c + bias
					s[1] = b - c - d3[q] + bias
				}
				if full < tw {
					row[2*full] = d0[full] + d1[full] + d2[full] + bias
				}
			default:
				for q := q0; q < full; q++ {
					b, c := d1[q], d2[q]
					s := r[2*q : 2*q+2 : 2*q+2]
					s[0] = d0[q] + b + c
					s[1] = b - c - d3[q]
				}
				if full < tw {
					row[2*full] = d0[full] + d1[full] + d2[full]
				}
			}
		}
	}
}

// winogradOK reports whether Winograd applies to geometry g: a 3×3 kernel
// with stride 1, dilation 1 and no negative padding.
func winogradOK(g *Geom) bool {
	return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.ph >= 0 && g.pw >= 0
}

// winoTiles returns the number of output tile rows and columns of
// geometry g.
func winoTiles(g *Geom) (th, tw int) {
	return (g.ho + 1) / 2, (g.wo + 1) / 2
}

// winoGroup is convGroup computed with Winograd F(2×2, 3×3) for the
// images i in [lo, hi): out_i (m channels) = conv(src_i, filters U) where
// U comes from winoFilters, adding to out_i if accumulate, else plus
// bias[o] in output channel o if bias is not nil. The GEMMs run on the
// calling goroutine if serial, else on the worker pool.
//
// The transforms run along the rows of the tile windows on short vectors
// (the tiles of one tile row) and along their columns on long contiguous
// vectors (all tiles of the group). The input of each channel is copied
// into a zero-padded plane covering every tile; Bᵀ applied along the rows
// of its windows gives 16 vectors with one element per tile of the group,
// and Bᵀ along the columns turns them into the channel's rows of the 16
// matrices V. The 16 GEMMs take the tiles of all images of the group as
// columns. The output transform applies Aᵀ along the columns of the
// products of one output channel, then along the rows straight into the
// output rows.
func winoGroup(serial bool, g *Geom, m int, u *[16]*blas.PackedA, src []float32, srcSize int, dst []float32, dstSize int, lo, hi int, accumulate bool, bias []float32) {
	th, _ := winoTiles(g)
	winoBand(serial, g, m, u, src, srcSize, dst, dstSize, lo, hi, 0, th, accumulate, bias)
}

// winoBand is winoGroup for the tile rows [t0, t1) alone: it writes the
// output rows [2·t0, min(2·t1, ho)) of each image, each element computed
// exactly as winoGroup computes it (the tiles are independent, and each
// column of the GEMMs is computed alike whatever their width), so that
// the bands of one image can run on several workers.
func winoBand(serial bool, g *Geom, m int, u *[16]*blas.PackedA, src []float32, srcSize int, dst []float32, dstSize int, lo, hi, t0, t1 int, accumulate bool, bias []float32) {
	k := g.c
	_, tw := winoTiles(g)
	th := t1 - t0
	tpi := th * tw // tiles per image
	cnt := hi - lo
	p := cnt * tpi
	ho := min(2*t1, g.ho) - 2*t0
	v := colScratch.get(16 * k * p)
	defer colScratch.put(v)
	prod := colScratch.get(16 * m * p)
	defer colScratch.put(prod)
	work := colScratch.get(winoInputWork(g, cnt, t0, t1))
	defer colScratch.put(work)
	half := work[len(work)-16*p:]
	var ins [4][]float32
	var two [2][]float32

	winoInput(g, src, srcSize, lo, hi, t0, t1, v, work)

	for xi, pa := range u {
		packedProduct(serial, pa, p, v[xi*k*p:(xi+1)*k*p], prod[xi*m*p:(xi+1)*m*p])
	}

	// Output transform: half[x·4+s] = Σ_r Aᵀ[x][r]·M[r·4+s][o], then
	// output row 2i+x of tile row i = Σ_s Aᵀ[y][s]·half[x·4+s].
	mode, bo := outStore, float32(0)
	if accumulate {
		mode = outAdd
	}
	for o := 0; o < m; o++ {
		if bias != nil && !accumulate {
			mode, bo = outBias, bias[o]
		}
		for s := 0; s < 4; s++ {
			for r := 0; r < 4; r++ {
				off := ((r*4+s)*m + o) * p
				ins[r] = prod[off : off+p]
			}
			two[0], two[1] = half[s*p:(s+1)*p], half[(4+s)*p:(5+s)*p]
			winoOutCols(&two, &ins, true)
		}
		for j := 0; j < cnt; j++ {
			at := (lo+j)*dstSize + o*g.ho*g.wo + 2*t0*g.wo
			winoOutRows(dst[at:at+ho*g.wo], ho, g.wo, half[j*tpi:], p, th, tw, mode, bo, true)
		}
	}
}

// winoInputWork returns the scratch values winoInput needs for cnt
// images and the tile rows [t0, t1) of geometry g.
func winoInputWork(g *Geom, cnt, t0, t1 int) int {
	_, tw := winoTiles(g)
	th := t1 - t0
	return (2*th+2)*(2*tw+2) + 16*cnt*th*tw
}

// winoInput writes into v the transformed input windows V_ξ = Bᵀ·d·B of
// the tiles of the tile rows [t0, t1) of the images [lo, hi) of src
// (srcSize values each, geometry g): with p = (hi−lo)·(t1−t0)·tw tiles,
// image j's tile (i, q) at column t = j·(t1−t0)·tw + (i−t0)·tw + q,
// V_ξ[c][t] at v[(ξ·g.c + c)·p + t]. work holds winoInputWork(g, hi−lo,
// t0, t1) values of scratch, of which winoBand reuses the last 16·p.
//
// Along the rows, half[l·4+s] = Σ_j Bᵀ[s][j]·window[l][j], then
// V[r·4+s][c] = Σ_l Bᵀ[r][l]·half[l·4+s]. Every image fills the same part
// of a zero-padded plane, so its border is written once.
func winoInput(g *Geom, src []float32, srcSize, lo, hi, t0, t1 int, v, work []float32) {
	k, hw, cnt := g.c, g.h*g.w, hi-lo
	_, tw := winoTiles(g)
	th := t1 - t0
	tpi := th * tw
	p := cnt * tpi
	hp, wp := 2*th+2, 2*tw+2
	r0 := 2*t0 - g.ph // the image row of the plane's first row
	plane, half := work[:hp*wp], work[hp*wp:hp*wp+16*p]
	var ins, outs [4][]float32
	clear(plane)
	for c := 0; c < k; c++ {
		for j := 0; j < cnt; j++ {
			img := src[(lo+j)*srcSize+c*hw : (lo+j)*srcSize+(c+1)*hw]
			for ih := max(0, r0); ih < min(g.h, r0+hp); ih++ {
				copy(plane[(ih-r0)*wp+g.pw:], img[ih*g.w:(ih+1)*g.w])
			}
			winoInRows(half[j*tpi:], p, plane, wp, th, tw, true)
		}
		for s := 0; s < 4; s++ {
			for r := 0; r < 4; r++ {
				ins[r] = half[(r*4+s)*p : (r*4+s+1)*p]
				off := ((r*4+s)*k + c) * p
				outs[r] = v[off : off+p]
			}
			winoInCols(&outs, &ins, true)
		}
	}
}

// winoGroupSize returns how many images of geometry g share the GEMMs of
// winoGroup: enough for about 256 GEMM columns (tiles).
func winoGroupSize(g *Geom) int {
	th, tw := winoTiles(g)
	return max(1, (256+th*tw-1)/(th*tw))
}

// useWinograd reports whether a convolution with geometry g, n images and
// m output channels runs with Winograd: where it applies, if forced by g.algo or
// else if winogradPays.
func useWinograd(g *Geom, n, m int) bool {
	if !winogradOK(g) {
		return false
	}
	switch g.algo {
	case AlgoIm2col, AlgoGather:
		return false
	case AlgoBlocked:
		if blockedOK(g) {
			return false
		}
	case AlgoWinograd:
		return true
	}
	return winogradPays(g, n, m)
}

// winogradPays is the per-layer rule, measured on the 3×3 layers of
// ResNet-20, VGG-16 and ResNet-34 (autograd's BenchmarkConv2dAlgos and
// BenchmarkConv2dAlgosBatch, docs/benchmarks.md): Winograd for at least 32
// input and m ≥ 32 output channels (with 16 the transforms, which grow
// with the channels while the saving grows with their product, cost what
// the GEMM saves), at least 128 tiles in the batch (the filter transform,
// a fixed cost per call, is otherwise not paid back: 512 channels at 2×2
// pixels lose at batch 32 and win at 128), and tiles that waste little of
// their 2×2 outputs past the edges (16 multiplications per tile at most
// 0.65 of im2col's 9 per output, which excludes outputs of 3×3 or one
// pixel wide).
func winogradPays(g *Geom, n, m int) bool {
	if gatherOK(g) && g.gatherWide() && min(g.c, m) < 64 {
		// gatherConv in the wide layout, which copies each image once, is
		// faster than Winograd up to 32 channels (32 channels at 16×16:
		// 11.1 against 12.7-12.9 ms per layer pass at batch 128), slower
		// from 64 on (64 at 32×32: 133 against 124-125). In the flat
		// layout, three copies, it is slower (32 channels at 8×8: 3.9
		// against 3.2 ms).
		return false
	}
	th, tw := winoTiles(g)
	return g.c >= 32 && m >= 32 && n*th*tw >= 128 && winoEdgeOK(g)
}

// winoEdgeOK reports whether the 2×2 tiles of geometry g waste little of
// their outputs past the edges: 16 multiplications per tile at most 0.65
// of im2col's 9 per output.
func winoEdgeOK(g *Geom) bool {
	th, tw := winoTiles(g)
	return 16*th*tw*100 <= 65*9*g.ho*g.wo
}
