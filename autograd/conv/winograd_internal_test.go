package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWinogradKernelsMatchTables checks that the matrices compute a 3×3
// correlation, Aᵀ[(G·g) ⊙ (Bᵀ·d)] = the two outputs of the 1-D
// correlation of d with g, and the hand-written transforms against them,
// with and without the assembly kernels.
func TestWinogradKernelsMatchTables(t *testing.T) {
	for _, asm := range []bool{false, true} {
		t.Run(fmt.Sprintf("asm=%v", asm), func(t *testing.T) { testWinogradKernels(t, asm) })
	}
}

func testWinogradKernels(t *testing.T, asm bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 10; trial++ {
		var d [4]float64
		var g [3]float64
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		for y := range 2 {
			got := 0.0
			for j := range 4 {
				gj := winoG[j][0]*g[0] + winoG[j][1]*g[1] + winoG[j][2]*g[2]
				dj := 0.0
				for l := range 4 {
					dj += winoBT[j][l] * d[l]
				}
				got += winoAT[y][j] * gj * dj
			}
			want := d[y]*g[0] + d[y+1]*g[1] + d[y+2]*g[2]
			if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
				t.Fatalf("tables: output %d = %g, want %g", y, got, want)
			}
		}
	}
	for _, n := range []int{1, 5, 8, 19, 64} {
		vecs := func() (r [4][]float32) {
			for i := range r {
				r[i] = make([]float32, n)
				for j := range r[i] {
					r[i][j] = float32(rng.NormFloat64())
				}
			}
			return r
		}
		check := func(what string, got float32, want float64) {
			t.Helper()
			if math.Abs(float64(got)-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("n=%d: %s = %g, want %g", n, what, got, want)
			}
		}
		d, o := vecs(), vecs()
		winoInCols(&o, &d, asm)
		for r := range 4 {
			for x := 0; x < n; x++ {
				want := 0.0
				for l := range 4 {
					want += winoBT[r][l] * float64(d[l][x])
				}
				check(fmt.Sprintf("winoInCols[%d][%d]", r, x), o[r][x], want)
			}
		}
		two := [2][]float32{make([]float32, n), make([]float32, n)}
		winoOutCols(&two, &d, asm)
		for y := range 2 {
			for x := 0; x < n; x++ {
				want := 0.0
				for r := range 4 {
					want += winoAT[y][r] * float64(d[r][x])
				}
				check(fmt.Sprintf("winoOutCols[%d][%d]", y, x), two[y][x], want)
			}
		}
	}
	// The row transforms over whole planes of th×tw tiles, with an output
	// plane of even and odd size, stored and added.
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {5, 4}, {4, 4}, {2, 4}, {3, 8}, {2, 16}, {2, 19}, {2, 2}, {5, 2}} {
		th, tw := sz[0], sz[1]
		n, wp := th*tw, 2*tw+2
		plane := make([]float32, (2*th+2)*wp)
		for i := range plane {
			plane[i] = float32(rng.NormFloat64())
		}
		// The 16 vectors lie in one buffer, stride elements apart.
		stride := n + 3
		hb := make([]float32, 16*stride)
		var h [16][]float32
		for i := range h {
			h[i] = hb[i*stride : i*stride+n]
		}
		winoInRows(hb, stride, plane, wp, th, tw, asm)
		for l := range 4 {
			for s := range 4 {
				for i := 0; i < th; i++ {
					for q := 0; q < tw; q++ {
						want := 0.0
						for j := range 4 {
							want += winoBT[s][j] * float64(plane[(2*i+l)*wp+2*q+j])
						}
						if got := float64(h[4*l+s][i*tw+q]); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
							t.Fatalf("%d×%d tiles: winoInRows[%d][%d] = %g, want %g", th, tw, 4*l+s, i*tw+q, got, want)
						}
					}
				}
			}
		}
		ho := h[:8]
		for _, odd := range []int{0, 1} {
			oh, ow := 2*th-odd, 2*tw-odd
			for _, mode := range []outMode{outStore, outAdd, outBias} {
				const bias = -0.75
				out := make([]float32, oh*ow)
				for i := range out {
					out[i] = float32(i)
				}
				winoOutRows(out, oh, ow, hb, stride, th, tw, mode, bias, asm)
				for r := 0; r < oh; r++ {
					for c := 0; c < ow; c++ {
						want := 0.0
						for s := range 4 {
							want += winoAT[c%2][s] * float64(ho[(r%2)*4+s][(r/2)*tw+c/2])
						}
						switch mode {
						case outAdd:
							want += float64(r*ow + c)
						case outBias:
							want += bias
						}
						if got := float64(out[r*ow+c]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("%d×%d output, mode %d: winoOutRows[%d][%d] = %g, want %g", oh, ow, mode, r, c, got, want)
						}
					}
				}
			}
		}
	}
}

// TestWinogradAsmMatchesGo checks that the assembly transforms give the
// Go loops' results bit for bit, so that results do not depend on the CPU.
func TestWinogradAsmMatchesGo(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, sz := range [][2]int{{1, 8}, {3, 8}, {3, 16}, {2, 17}, {4, 31}, {2, 2}, {5, 2}} {
		th, tw := sz[0], sz[1]
		n, wp := th*tw, 2*tw+2
		plane := randVec((2*th + 2) * wp)
		stride := n + 5
		var hb [2][]float32
		var h [2][16][]float32
		for k := range h {
			hb[k] = make([]float32, 16*stride)
			for i := range h[k] {
				h[k][i] = hb[k][i*stride : i*stride+n]
			}
			winoInRows(hb[k], stride, plane, wp, th, tw, k == 1)
		}
		var c [2][4][]float32
		var o [2][2][]float32
		d := [4][]float32{h[0][0], h[0][5], h[0][10], h[0][15]}
		for k := range c {
			for i := range c[k] {
				c[k][i] = make([]float32, n)
			}
			o[k] = [2][]float32{make([]float32, n), make([]float32, n)}
			winoInCols(&c[k], &d, k == 1)
			winoOutCols(&o[k], &d, k == 1)
		}
		// The output transforms read the second eight vectors.
		var rows [2][]float32
		for k := range rows {
			rows[k] = hb[k][8*stride:]
		}
		base := randVec(4 * n)
		var out, outB [2][]float32
		for k := range out {
			out[k] = append([]float32(nil), base...)
			winoOutRows(out[k], 2*th, 2*tw, rows[k], stride, th, tw, outStore, 0, k == 1)
			winoOutRows(out[k], 2*th-1, 2*tw-1, rows[k], stride, th, tw, outAdd, 0, k == 1)
			outB[k] = append([]float32(nil), base...)
			winoOutRows(outB[k], 2*th, 2*tw, rows[k], stride, th, tw, outBias, 0.3, k == 1)
		}
		if !slices.Equal(outB[0], outB[1]) {
			t.Fatalf("%d×%d tiles: winoOutRows with a bias differs", th, tw)
		}
		for i := range h[0] {
			if !slices.Equal(h[0][i], h[1][i]) {
				t.Fatalf("%d×%d tiles: winoInRows vector %d differs", th, tw, i)
			}
		}
		for i := range 4 {
			if !slices.Equal(c[0][i], c[1][i]) {
				t.Fatalf("n=%d: winoInCols vector %d differs", n, i)
			}
		}
		for i := range 2 {
			if !slices.Equal(o[0][i], o[1][i]) {
				t.Fatalf("n=%d: winoOutCols vector %d differs", n, i)
			}
		}
		if !slices.Equal(out[0], out[1]) {
			t.Fatalf("%d×%d tiles: winoOutRows differs", th, tw)
		}
	}
}

// TestWinogradFilterTransform checks the filter transform against
// G·f·Gᵀ, and the AVX2 kernel against the Go loop bit for bit, for
// numbers of output channels that leave 0 to 3 filters to the Go loop,
// both filter layouts, two chunks of input channels, and taps that span
// 40 binary orders of magnitude, so that some float64 sums are inexact.
func TestWinogradFilterTransform(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mk := range [][2]int{{1, 2}, {3, 1}, {4, 3}, {7, 5}, {13, 2}, {32, 3}} {
		m, k := mk[0], mk[1]
		w := make([]float32, m*k*9)
		for i := range w {
			w[i] = float32(math.Ldexp(rng.NormFloat64(), rng.IntN(40)-20))
		}
		for _, swap := range []bool{false, true} {
			pitch := m + 3
			var u [2][]float32
			for a := range u {
				u[a] = make([]float32, 16*pitch*k)
				// Two calls, as two chunks of input channels.
				winoFilterRange(w, m, k, swap, u[a], pitch, 0, 1, a == 1)
				winoFilterRange(w, m, k, swap, u[a][16*pitch:], pitch, 1, k, a == 1)
			}
			if haveAVX2 {
				if !slices.EqualFunc(u[0], u[1], sameFloat32) {
					t.Fatalf("m=%d k=%d swap=%v: the AVX2 kernel's filters differ from the Go loop's", m, k, swap)
				}
			}
			for o := 0; o < m; o++ {
				for c := 0; c < k; c++ {
					var f [3][3]float64
					for a := range 3 {
						for b := range 3 {
							if swap {
								f[a][b] = float64(w[(c*m+o)*9+(2-a)*3+2-b])
							} else {
								f[a][b] = float64(w[(o*k+c)*9+a*3+b])
							}
						}
					}
					for i := range 4 {
						for j := range 4 {
							want, scale := 0.0, 0.0
							for a := range 3 {
								for b := range 3 {
									want += winoG[i][a] * f[a][b] * winoG[j][b]
									scale += math.Abs(winoG[i][a] * f[a][b] * winoG[j][b])
								}
							}
							got := float64(u[1][(c*16+4*i+j)*pitch+o])
							if math.Abs(got-want) > 1e-7*scale {
								t.Fatalf("m=%d k=%d swap=%v: U[%d][%d] of filter (%d, %d) = %g, want %g", m, k, swap, i, j, o, c, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestWinogradRule checks the per-layer choice on the layers it was
// measured on.
func TestWinogradRule(t *testing.T) {
	cases := []struct {
		n, cin, cout, hw, pad, stride int
		want                          bool
	}{
		{128, 16, 16, 32, 1, 1, false},  // ResNet-20, first stage
		{128, 3, 16, 32, 1, 1, false},   // first layer
		{128, 32, 32, 16, 1, 1, false},  // ResNet-20, second stage: gatherConv
		{128, 32, 32, 8, 1, 1, true},    // gatherConv's flat layout is slower
		{128, 64, 64, 8, 1, 1, true},    // ResNet-20, third stage
		{128, 16, 32, 16, 1, 1, false},  // too few input channels
		{128, 64, 64, 32, 1, 1, true},   // VGG-16
		{128, 128, 128, 16, 1, 1, true}, // VGG-16, ResNet-34
		{128, 256, 256, 8, 1, 1, true},
		{128, 512, 512, 4, 1, 1, true},
		{128, 512, 512, 2, 1, 1, true},
		{32, 512, 512, 2, 1, 1, false}, // too few tiles
		{1, 128, 128, 16, 1, 1, false},
		{8, 128, 128, 16, 1, 1, true},
		{128, 256, 256, 3, 1, 1, false}, // 3×3 outputs waste 7 of 16
		{128, 256, 256, 8, 1, 2, false}, // stride 2
		{128, 256, 256, 8, 0, 1, true},  // 6×6 outputs
	}
	for _, c := range cases {
		ho := OutSize(c.hw, 3, c.stride, c.pad, 1)
		g := &Geom{
			c: c.cin, h: c.hw, w: c.hw, kh: 3, kw: 3, sh: c.stride, sw: c.stride,
			ph: c.pad, pw: c.pad, dh: 1, dw: 1, ho: ho, wo: ho,
		}
		if got := useWinograd(g, c.n, c.cout); got != c.want {
			t.Errorf("%d images, %d→%d channels at %d px, padding %d, stride %d: Winograd %v, want %v",
				c.n, c.cin, c.cout, c.hw, c.pad, c.stride, got, c.want)
		}
	}
}

// TestWinogradError measures the float32 error of each algorithm against
// a float64 direct convolution on layers of realistic size (He-initialised
// filters, unit-variance inputs) and fails if it exceeds the 1e-5
// absolute plus 1e-5 relative tolerance of the PyTorch fixtures. Run with
// -v to see the largest absolute and relative errors.
func TestWinogradError(t *testing.T) {
	layers := []struct{ n, c, hw int }{
		{2, 16, 32}, {2, 64, 8}, {1, 128, 16}, {1, 256, 8}, {2, 512, 4},
	}
	if testing.Short() {
		layers = layers[:2]
	}
	for _, l := range layers {
		rng := rand.New(rand.NewPCG(uint64(l.c), 5))
		x := make([]float32, l.n*l.c*l.hw*l.hw)
		w := make([]float32, l.c*l.c*9)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		std := math.Sqrt(2 / float64(9*l.c))
		for i := range w {
			w[i] = float32(std * rng.NormFloat64())
		}
		ref := directConv64(x, w, l.n, l.c, l.c, l.hw)
		for _, algo := range []Algo{AlgoIm2col, AlgoWinograd, AlgoBlocked} {
			g, err := NewGeom(l.c, l.hw, l.hw, 3, 3, Config{Padding: [2]int{1, 1}, Algo: algo})
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(x))
			Forward(g, l.n, l.c, x, w, nil, out)
			maxAbs, maxRel, worst := 0.0, 0.0, 0.0
			for i, v := range out {
				e := math.Abs(float64(v) - ref[i])
				maxAbs = max(maxAbs, e)
				maxRel = max(maxRel, e/max(math.Abs(ref[i]), 1e-3))
				worst = max(worst, e/(1e-5+1e-5*math.Abs(ref[i])))
			}
			t.Logf("%d×%d×%d, %d images, %s: max abs error %.2g, max rel error %.2g (|y| ≥ 1e-3), %.2f of the fixture tolerance",
				l.c, l.hw, l.hw, l.n, algo, maxAbs, maxRel, worst)
			if worst > 1 {
				t.Errorf("%d channels at %d px: algorithm %v exceeds the fixture tolerance by %.2f×", l.c, l.hw, algo, worst)
			}
		}
	}
}

// directConv64 returns the 3×3, stride-1, padding-1 convolution of x (n ×
// c × hw × hw) with w (cout × c × 3 × 3), accumulated in float64.
func directConv64(x, w []float32, n, c, cout, hw int) []float64 {
	out := make([]float64, n*cout*hw*hw)
	for i := 0; i < n; i++ {
		for o := 0; o < cout; o++ {
			y := out[(i*cout+o)*hw*hw : (i*cout+o+1)*hw*hw]
			for ci := 0; ci < c; ci++ {
				img := x[(i*c+ci)*hw*hw : (i*c+ci+1)*hw*hw]
				f := w[(o*c+ci)*9 : (o*c+ci+1)*9]
				for ki := 0; ki < 3; ki++ {
					for kj := 0; kj < 3; kj++ {
						fv := float64(f[ki*3+kj])
						for oh := 0; oh < hw; oh++ {
							ih := oh + ki - 1
							if ih < 0 || ih >= hw {
								continue
							}
							for ow := 0; ow < hw; ow++ {
								iw := ow + kj - 1
								if iw >= 0 && iw < hw {
									y[oh*hw+ow] += fv * float64(img[ih*hw+iw])
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// BenchmarkWinoFilters times the filter transform of a 512-channel layer,
// as the forward pass (swap false) and the input gradient (swap true) do it.
func BenchmarkWinoFilters(b *testing.B) {
	const m, k = 512, 512
	w := make([]float32, m*k*9)
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range w { // written, so that w is not the kernel's shared zero page
		w[i] = float32(rng.NormFloat64())
	}
	u := make([]float32, winoFiltersSize(m, k))
	for _, swap := range []bool{false, true} {
		b.Run(fmt.Sprintf("swap=%v", swap), func(b *testing.B) {
			for range b.N {
				winoFilters(w, m, k, swap, u)
			}
		})
	}
}

// sameFloat32 reports whether a and b are equal bit for bit or both NaN.
func sameFloat32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}
