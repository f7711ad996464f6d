package autograd

// Winograd minimal filtering F(m×m, 3×3) (Lavin and Gray, 2016) computes
// an m×m tile of a 3×3 convolution from an a×a tile of its input, a = m+2,
// as Y = Aᵀ[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]A. Over a whole layer the element-wise
// products become a² independent GEMMs, one per transform point ξ:
//
//	M_ξ (Cout × P) = U_ξ (Cout × Cin) · V_ξ (Cin × P)
//
// where U holds the transformed filters, V the transformed input tiles and
// P counts the tiles of a group of images. F(2×2, 3×3) needs 16/4 = 4
// multiplications per output instead of 9, F(4×4, 3×3) 36/16 = 2.25, at
// the price of the transforms and of a larger rounding error.

// convAlgo selects how a convolution is computed.
type convAlgo uint8

const (
	algoAuto      convAlgo = iota // chosen by chooseAlgo
	algoIm2col                    // im2col + GEMM
	algoWinograd2                 // Winograd F(2×2, 3×3)
	algoWinograd4                 // Winograd F(4×4, 3×3)
)

// winograd describes one algorithm F(m×m, 3×3). The transform matrices
// are kept as tables for the filter transform and for the tests; the data
// transforms are hand-written from them.
type winograd struct {
	m, a int
	bt   [][]float64 // a×a input transform Bᵀ
	g    [][]float64 // a×3 filter transform G
	at   [][]float64 // m×a output transform Aᵀ

	// inVert sets o[r][x] = Σ_k Bᵀ[r][k]·d[k][x] for x < len(o[0]).
	inVert func(o, d [][]float32)
	// inHorz sets o[s][q] = Σ_l Bᵀ[s][l]·t[m·q+l] for q < len(o[0]).
	inHorz func(o [][]float32, t []float32)
	// outHorz sets u[m·q+y] = Σ_s Aᵀ[y][s]·d[s][q] for q < len(d[0]).
	outHorz func(u []float32, d [][]float32)
	// outVert sets o[x][c] = Σ_r Aᵀ[x][r]·u[r][c] for c < len(o[0]).
	outVert func(o, u [][]float32)
}

var wino2 = &winograd{
	m: 2, a: 4,
	bt: [][]float64{
		{1, 0, -1, 0},
		{0, 1, 1, 0},
		{0, -1, 1, 0},
		{0, 1, 0, -1},
	},
	g: [][]float64{
		{1, 0, 0},
		{0.5, 0.5, 0.5},
		{0.5, -0.5, 0.5},
		{0, 0, 1},
	},
	at: [][]float64{
		{1, 1, 1, 0},
		{0, 1, -1, -1},
	},
	inVert:  inVert2,
	inHorz:  inHorz2,
	outHorz: outHorz2,
	outVert: outVert2,
}

// wino4 uses the interpolation points 0, 1, −1, 2, −1/2 and ∞ instead of
// the usual 0, ±1, ±2, ∞: measured in float32 over 64 input channels its
// largest error is about 3.5 times smaller (8e-6 against 3e-5 on outputs
// of unit scale), within the 1e-5 tolerance of the PyTorch fixtures.
var wino4 = &winograd{
	m: 4, a: 6,
	bt: [][]float64{
		{1, 1.5, -2, -1.5, 1, 0},
		{0, -1, -2.5, -0.5, 1, 0},
		{0, 1, 0.5, -2.5, 1, 0},
		{0, -0.5, -1, 0.5, 1, 0},
		{0, 2, -1, -2, 1, 0},
		{0, 1, 1.5, -2, -1.5, 1},
	},
	g: [][]float64{
		{1, 0, 0},
		{-1.0 / 3, -1.0 / 3, -1.0 / 3},
		{1.0 / 3, -1.0 / 3, 1.0 / 3},
		{1.0 / 15, 2.0 / 15, 4.0 / 15},
		{-16.0 / 15, 8.0 / 15, -4.0 / 15},
		{0, 0, 1},
	},
	at: [][]float64{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -0.5, 0},
		{0, 1, 1, 4, 0.25, 0},
		{0, 1, -1, 8, -0.125, 1},
	},
	inVert:  inVert4,
	inHorz:  inHorz4,
	outHorz: outHorz4,
	outVert: outVert4,
}

func inVert2(o, d [][]float32) {
	n := len(o[0])
	o0, o1, o2, o3 := o[0][:n], o[1][:n], o[2][:n], o[3][:n]
	d0, d1, d2, d3 := d[0][:n], d[1][:n], d[2][:n], d[3][:n]
	for x := range o0 {
		a, b, c, e := d0[x], d1[x], d2[x], d3[x]
		o0[x] = a - c
		o1[x] = b + c
		o2[x] = c - b
		o3[x] = b - e
	}
}

func inHorz2(o [][]float32, t []float32) {
	n := len(o[0])
	o0, o1, o2, o3 := o[0][:n], o[1][:n], o[2][:n], o[3][:n]
	t = t[:2*n+2]
	for q := range o0 {
		s := t[2*q : 2*q+4 : 2*q+4]
		a, b, c, e := s[0], s[1], s[2], s[3]
		o0[q] = a - c
		o1[q] = b + c
		o2[q] = c - b
		o3[q] = b - e
	}
}

func outHorz2(u []float32, d [][]float32) {
	n := len(d[0])
	d0, d1, d2, d3 := d[0][:n], d[1][:n], d[2][:n], d[3][:n]
	u = u[:2*n]
	for q := range d0 {
		s := u[2*q : 2*q+2 : 2*q+2]
		b, c := d1[q], d2[q]
		s[0] = d0[q] + b + c
		s[1] = b - c - d3[q]
	}
}

func outVert2(o, u [][]float32) {
	n := len(o[0])
	o0, o1 := o[0][:n], o[1][:n]
	u0, u1, u2, u3 := u[0][:n], u[1][:n], u[2][:n], u[3][:n]
	for x := range o0 {
		b, c := u1[x], u2[x]
		o0[x] = u0[x] + b + c
		o1[x] = b - c - u3[x]
	}
}

func inVert4(o, d [][]float32) {
	n := len(o[0])
	o0, o1, o2, o3, o4, o5 := o[0][:n], o[1][:n], o[2][:n], o[3][:n], o[4][:n], o[5][:n]
	d0, d1, d2, d3, d4, d5 := d[0][:n], d[1][:n], d[2][:n], d[3][:n], d[4][:n], d[5][:n]
	for x := range o0 {
		o0[x], o1[x], o2[x], o3[x], o4[x], o5[x] = bt4(d0[x], d1[x], d2[x], d3[x], d4[x], d5[x])
	}
}

func inHorz4(o [][]float32, t []float32) {
	n := len(o[0])
	o0, o1, o2, o3, o4, o5 := o[0][:n], o[1][:n], o[2][:n], o[3][:n], o[4][:n], o[5][:n]
	t = t[:4*n+2]
	for q := range o0 {
		v := t[4*q : 4*q+6 : 4*q+6]
		o0[q], o1[q], o2[q], o3[q], o4[q], o5[q] = bt4(v[0], v[1], v[2], v[3], v[4], v[5])
	}
}

// bt4 returns Bᵀ·d for wino4, computed in float64 and rounded once.
func bt4(e0, e1, e2, e3, e4, e5 float32) (o0, o1, o2, o3, o4, o5 float32) {
	d0, d1, d2, d3, d4, d5 := float64(e0), float64(e1), float64(e2), float64(e3), float64(e4), float64(e5)
	o0 = float32(d0 + 1.5*(d1-d3) - 2*d2 + d4)
	o1 = float32(d4 - d1 - 2.5*d2 - 0.5*d3)
	o2 = float32(d4 + d1 + 0.5*d2 - 2.5*d3)
	o3 = float32(d4 + 0.5*(d3-d1) - d2)
	o4 = float32(d4 + 2*(d1-d3) - d2)
	o5 = float32(d5 + d1 + 1.5*(d2-d4) - 2*d3)
	return
}

// at4 returns Aᵀ·d for wino4, computed in float64 and rounded once.
func at4(e0, e1, e2, e3, e4, e5 float32) (y0, y1, y2, y3 float32) {
	d0, d1, d2, d3, d4, d5 := float64(e0), float64(e1), float64(e2), float64(e3), float64(e4), float64(e5)
	p, m := d1+d2, d1-d2
	y0 = float32(d0 + p + d3 + d4)
	y1 = float32(m + 2*d3 - 0.5*d4)
	y2 = float32(p + 4*d3 + 0.25*d4)
	y3 = float32(m + 8*d3 - 0.125*d4 + d5)
	return
}

func outHorz4(u []float32, d [][]float32) {
	n := len(d[0])
	d0, d1, d2, d3, d4, d5 := d[0][:n], d[1][:n], d[2][:n], d[3][:n], d[4][:n], d[5][:n]
	u = u[:4*n]
	for q := range d0 {
		s := u[4*q : 4*q+4 : 4*q+4]
		s[0], s[1], s[2], s[3] = at4(d0[q], d1[q], d2[q], d3[q], d4[q], d5[q])
	}
}

func outVert4(o, u [][]float32) {
	n := len(o[0])
	o0, o1, o2, o3 := o[0][:n], o[1][:n], o[2][:n], o[3][:n]
	u0, u1, u2, u3, u4, u5 := u[0][:n], u[1][:n], u[2][:n], u[3][:n], u[4][:n], u[5][:n]
	for x := range o0 {
		o0[x], o1[x], o2[x], o3[x] = at4(u0[x], u1[x], u2[x], u3[x], u4[x], u5[x])
	}
}

// winogradOK reports whether Winograd applies to geometry g: a 3×3 kernel
// with stride 1, dilation 1 and no negative padding.
func winogradOK(g *convGeom) bool {
	return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.ph >= 0 && g.pw >= 0
}

// tiles returns the number of output tile rows and columns of geometry g.
func (wa *winograd) tiles(g *convGeom) (th, tw int) {
	return (g.ho + wa.m - 1) / wa.m, (g.wo + wa.m - 1) / wa.m
}

// filters writes the transformed filters U (a² × m × k, point-major) of a
// convolution with m output and k input channels. With swap false the
// filter of output o and input c is w[o][c] (w is m×k×3×3); with swap true
// it is w[c][o] rotated by 180° (w is k×m×3×3), the filter of the input
// gradient. The transform is computed in float64.
func (wa *winograd) filters(w []float32, m, k int, swap bool, u []float32) {
	a := wa.a
	var f [3][3]float64
	var t [6][3]float64 // G·f
	for o := 0; o < m; o++ {
		for c := 0; c < k; c++ {
			if swap {
				src := w[(c*m+o)*9 : (c*m+o+1)*9]
				for i := range 9 {
					f[i/3][i%3] = float64(src[8-i])
				}
			} else {
				src := w[(o*k+c)*9 : (o*k+c+1)*9]
				for i := range 9 {
					f[i/3][i%3] = float64(src[i])
				}
			}
			for i := 0; i < a; i++ {
				for j := range 3 {
					t[i][j] = wa.g[i][0]*f[0][j] + wa.g[i][1]*f[1][j] + wa.g[i][2]*f[2][j]
				}
			}
			for i := 0; i < a; i++ {
				for j := 0; j < a; j++ {
					v := t[i][0]*wa.g[j][0] + t[i][1]*wa.g[j][1] + t[i][2]*wa.g[j][2]
					u[((i*a+j)*m+o)*k+c] = float32(v)
				}
			}
		}
	}
}

// winoGroup is convGroup computed with Winograd algorithm wa for the
// images i in [lo, hi): out_i (m channels) = conv(src_i, filters U) where
// U comes from wa.filters, adding to out_i if accumulate.
//
// The input of each channel is copied into a zero-padded plane covering
// every tile; the input transform runs along the columns of a row of tiles
// and then along its rows, writing each transform point's values of
// consecutive tiles contiguously into V. The a² GEMMs take the tiles of all
// images of the group as columns. The output transform runs the other way
// round, so that its vertical pass produces whole output rows.
func winoGroup(gemm gemmFunc, wa *winograd, g *convGeom, m int, u, src []float32, srcSize int, dst []float32, dstSize int, lo, hi int, accumulate bool) {
	a, mt, k := wa.a, wa.m, g.c
	a2 := a * a
	th, tw := wa.tiles(g)
	tpi := th * tw // tiles per image
	cnt := hi - lo
	p := cnt * tpi
	hp, wp := th*mt+2, tw*mt+2
	v := colScratch.get(a2 * k * p)
	defer colScratch.put(v)
	prod := colScratch.get(a2 * m * p)
	defer colScratch.put(prod)
	work := colScratch.get(hp*wp + a*wp)
	defer colScratch.put(work)
	plane, tbuf := work[:hp*wp], work[hp*wp:]
	var rows, outs [6][]float32
	hw := g.h * g.w

	// Input transform.
	for j := 0; j < cnt; j++ {
		img := src[(lo+j)*srcSize : (lo+j+1)*srcSize]
		for c := 0; c < k; c++ {
			clear(plane)
			for ih := 0; ih < g.h; ih++ {
				copy(plane[(ih+g.ph)*wp+g.pw:], img[c*hw+ih*g.w:c*hw+(ih+1)*g.w])
			}
			for i := 0; i < th; i++ {
				for r := 0; r < a; r++ {
					rows[r] = plane[(i*mt+r)*wp : (i*mt+r+1)*wp]
					outs[r] = tbuf[r*wp : (r+1)*wp]
				}
				wa.inVert(outs[:a], rows[:a])
				base := c*p + j*tpi + i*tw
				for r := 0; r < a; r++ {
					for s := 0; s < a; s++ {
						off := (r*a+s)*k*p + base
						rows[s] = v[off : off+tw]
					}
					wa.inHorz(rows[:a], tbuf[r*wp:(r+1)*wp])
				}
			}
		}
	}

	for xi := 0; xi < a2; xi++ {
		gemm(false, false, m, p, k, 1, u[xi*m*k:(xi+1)*m*k], k, v[xi*k*p:(xi+1)*k*p], p, 0, prod[xi*m*p:(xi+1)*m*p], p)
	}

	// Output transform.
	wide := tw * mt
	ubuf, obuf := tbuf[:a*wide], plane[:mt*wide]
	for j := 0; j < cnt; j++ {
		out := dst[(lo+j)*dstSize : (lo+j+1)*dstSize]
		for o := 0; o < m; o++ {
			for i := 0; i < th; i++ {
				base := o*p + j*tpi + i*tw
				for r := 0; r < a; r++ {
					for s := 0; s < a; s++ {
						off := (r*a+s)*m*p + base
						rows[s] = prod[off : off+tw]
					}
					wa.outHorz(ubuf[r*wide:(r+1)*wide], rows[:a])
				}
				for r := 0; r < a; r++ {
					rows[r] = ubuf[r*wide : (r+1)*wide]
				}
				for x := 0; x < mt; x++ {
					outs[x] = obuf[x*wide : (x+1)*wide]
				}
				wa.outVert(outs[:mt], rows[:a])
				for x := 0; x < mt && i*mt+x < g.ho; x++ {
					oh := i*mt + x
					d := out[o*g.ho*g.wo+oh*g.wo : o*g.ho*g.wo+(oh+1)*g.wo]
					s := obuf[x*wide : x*wide+g.wo]
					if !accumulate {
						copy(d, s)
						continue
					}
					for q, val := range s {
						d[q] += val
					}
				}
			}
		}
	}
}

// winoGroupSize returns how many images share the GEMMs of winoGroup when
// each has tpi tiles: enough for about 256 GEMM columns.
func winoGroupSize(tpi int) int {
	return max(1, (256+tpi-1)/tpi)
}

// tilesPerImage returns the number of output tiles of one image.
func (wa *winograd) tilesPerImage(g *convGeom) int {
	th, tw := wa.tiles(g)
	return th * tw
}

// winogradFor returns the Winograd algorithm for a convolution with
// geometry g and m output channels, or nil for im2col: the one forced by
// g.algo where it applies, else the one chooseWinograd picks.
func winogradFor(g *convGeom, m int) *winograd {
	if !winogradOK(g) {
		return nil
	}
	switch g.algo {
	case algoIm2col:
		return nil
	case algoWinograd2:
		return wino2
	case algoWinograd4:
		return wino4
	}
	return chooseWinograd(g, m)
}

// chooseWinograd is the per-layer rule.
func chooseWinograd(g *convGeom, m int) *winograd {
	return nil
}
