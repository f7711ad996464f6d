package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
)

// TestWinoGradTransforms checks the transforms of the output gradients
// against A' = diag(winoGradSigns)·A, A the transpose of Forward's winoAT,
// and the AVX2 kernels against the Go loops bit for bit, on planes whose
// tile rows take every path of winoGradRows.
func TestWinoGradTransforms(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	// aT[s][x] = A'[s][x] = winoGradSigns[s]·Aᵀ[x][s].
	var aT [4][2]float64
	for s := range 4 {
		for x := range 2 {
			aT[s][x] = winoGradSigns[s] * winoAT[x][s]
		}
	}
	asms := []bool{false}
	if haveAVX2 {
		asms = append(asms, true)
	}
	for _, sz := range [][2]int{{1, 8}, {3, 8}, {1, 4}, {3, 4}, {4, 4}, {2, 16}, {2, 17}, {3, 24}, {2, 2}, {5, 3}} {
		th, tw := sz[0], sz[1]
		n, ld := th*tw, 2*tw+3
		plane := randVec(2 * th * ld)
		stride := n + 5
		var h [2][]float32
		for k, asm := range asms {
			h[k] = make([]float32, 8*stride)
			winoGradRows(h[k], stride, plane, ld, th, tw, asm)
		}
		for y := range 2 {
			for s := range 4 {
				for i := range th {
					for q := range tw {
						want := aT[s][0]*float64(plane[(2*i+y)*ld+2*q]) + aT[s][1]*float64(plane[(2*i+y)*ld+2*q+1])
						if got := h[0][(y*4+s)*stride+i*tw+q]; float64(got) != float64(float32(want)) {
							t.Fatalf("%d×%d tiles: winoGradRows row %d, output %d, tile (%d, %d) = %g, want %g", th, tw, y, s, i, q, got, want)
						}
					}
				}
			}
		}
		if len(asms) == 2 && !slices.Equal(h[0], h[1]) {
			t.Fatalf("%d×%d tiles: winoGradRows in AVX2 differs from Go", th, tw)
		}
		d := [2][]float32{randVec(n), randVec(n)}
		var o [2][4][]float32
		for k, asm := range asms {
			for r := range o[k] {
				o[k][r] = make([]float32, n)
			}
			winoGradCols(&o[k], &d, asm)
		}
		for r := range 4 {
			for x := range n {
				want := aT[r][0]*float64(d[0][x]) + aT[r][1]*float64(d[1][x])
				if got := o[0][r][x]; float64(got) != float64(float32(want)) {
					t.Fatalf("n=%d: winoGradCols[%d][%d] = %g, want %g", n, r, x, got, want)
				}
			}
			if len(asms) == 2 && !slices.Equal(o[0][r], o[1][r]) {
				t.Fatalf("n=%d: winoGradCols vector %d in AVX2 differs from Go", n, r)
			}
		}
	}
}

// TestWinoWeightError compares the weight gradient of Winograd and those
// of the other algorithms (im2col's GEMM and gatherConv's dot products,
// which the PyTorch fixtures accept) with one accumulated in float64, on
// random images and output gradients of unit scale and ResNet-20's and
// VGG-16's channel counts. Each weight is a sum of n·h·w products (about
// 100 in size here), so the fixtures' tolerance, 1e-5 plus 1e-5 relative,
// is not the measure; Winograd sums products of transformed values, V
// and D, each a sum of up to four values of the window or tile, twice
// their scale for random signs, so its terms and their rounding are up to
// four times those of the direct sums: its largest error must stay within
// four times the larger of the other two's (measured: at most 1.3× with
// the AVX-512 kernels, 2.1× with the pure-Go ones). It runs with every
// GEMM engine this CPU has, the default one on all the layers.
func TestWinoWeightError(t *testing.T) {
	layers := []struct{ n, c, hw int }{
		{8, 16, 32}, {8, 32, 16}, {16, 64, 8}, {4, 128, 8}, {8, 256, 4},
	}
	if testing.Short() {
		layers = layers[:3]
	}
	def := blas.Default()
	for _, name := range blas.Kernels() {
		e, err := blas.NewEngine(name)
		if err != nil {
			t.Fatal(err)
		}
		ls := layers
		if name != def.Kernel() {
			ls = layers[1:3]
		}
		t.Run(name, func(t *testing.T) {
			defer blas.SetDefault(blas.SetDefault(e))
			testWinoWeightError(t, ls)
		})
	}
}

func testWinoWeightError(t *testing.T, layers []struct{ n, c, hw int }) {
	for _, l := range layers {
		rng := rand.New(rand.NewPCG(uint64(l.c), 6))
		x := make([]float32, l.n*l.c*l.hw*l.hw)
		gy := make([]float32, len(x))
		for _, s := range [][]float32{x, gy} {
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
		}
		w := make([]float32, l.c*l.c*9)
		ref := directWeightGrad64(x, gy, l.n, l.c, l.c, l.hw)
		maxAbs := map[Algo]float64{}
		for _, algo := range []Algo{AlgoIm2col, AlgoGather, AlgoWinograd} {
			g, err := NewGeom(l.c, l.hw, l.hw, 3, 3, Config{Padding: [2]int{1, 1}, Algo: algo})
			if err != nil {
				t.Fatal(err)
			}
			if got := useWinoWeight(g, l.n, l.c); got != (algo == AlgoWinograd) {
				t.Fatalf("%v: Winograd weight gradient %v", algo, got)
			}
			gw := make([]float32, len(w))
			Backward(g, l.n, l.c, x, w, gy, nil, gw, true)
			maxRel := 0.0
			for i, v := range gw {
				e := math.Abs(float64(v) - ref[i])
				maxAbs[algo] = max(maxAbs[algo], e)
				maxRel = max(maxRel, e/max(math.Abs(ref[i]), 1e-3))
			}
			t.Logf("%d×%d×%d, %d images, %s: max abs error %.2g, max rel error %.2g",
				l.c, l.hw, l.hw, l.n, algo, maxAbs[algo], maxRel)
		}
		if bound := 4 * max(maxAbs[AlgoIm2col], maxAbs[AlgoGather]); maxAbs[AlgoWinograd] > bound {
			t.Errorf("%d channels at %d px: Winograd's weight gradient is off by up to %.2g, more than %.2g",
				l.c, l.hw, maxAbs[AlgoWinograd], bound)
		}
	}
}

// directWeightGrad64 returns the weight gradient (cout × c × 3 × 3) of the
// 3×3, stride-1, padding-1 convolution of x (n × c × hw × hw) given its
// output gradient gy, accumulated in float64.
func directWeightGrad64(x, gy []float32, n, c, cout, hw int) []float64 {
	gw := make([]float64, cout*c*9)
	for i := 0; i < n; i++ {
		for o := 0; o < cout; o++ {
			dy := gy[(i*cout+o)*hw*hw : (i*cout+o+1)*hw*hw]
			for ci := 0; ci < c; ci++ {
				img := x[(i*c+ci)*hw*hw : (i*c+ci+1)*hw*hw]
				for ki := range 3 {
					for kj := range 3 {
						s := 0.0
						for oh := max(0, 1-ki); oh < min(hw, hw+1-ki); oh++ {
							for ow := max(0, 1-kj); ow < min(hw, hw+1-kj); ow++ {
								s += float64(dy[oh*hw+ow]) * float64(img[(oh+ki-1)*hw+ow+kj-1])
							}
						}
						gw[(o*c+ci)*9+ki*3+kj] += s
					}
				}
			}
		}
	}
	return gw
}

// TestWinoWeightGroups checks that the Winograd weight gradient does not
// depend on the number of workers, on a layer with several groups and on
// one with a single group whose products run in parallel.
func TestWinoWeightGroups(t *testing.T) {
	for _, l := range []struct{ n, c, hw int }{{9, 32, 16}, {3, 32, 6}, {9, 16, 16}, {40, 16, 7}} {
		rng := rand.New(rand.NewPCG(uint64(l.hw), 9))
		x := make([]float32, l.n*l.c*l.hw*l.hw)
		gy := make([]float32, len(x))
		for _, s := range [][]float32{x, gy} {
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
		}
		g, err := NewGeom(l.c, l.hw, l.hw, 3, 3, Config{Padding: [2]int{1, 1}, Algo: AlgoWinograd})
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for _, workers := range []int{1, 2, 3, 8} {
			t.Run(fmt.Sprintf("%dch_%dpx/workers=%d", l.c, l.hw, workers), func(t *testing.T) {
				defer parallel.SetWorkers(parallel.SetWorkers(workers))
				gw := make([]float32, l.c*l.c*9)
				winoWeightGrad(g, l.n, l.c, x, gy, gw, nil)
				if want == nil {
					want = gw
					return
				}
				if !slices.Equal(gw, want) {
					t.Errorf("%d workers differ from 1", workers)
				}
			})
		}
	}
}

// TestWinoWeightOuterKernels checks the kernels of winoWeightOuter: every
// implementation of outer and winoGradIn against the Go loops bit for bit
// (impl.ForEach), outerGo against float64 sums, and winoGradIn on blocked
// output gradients against winoGradOut's D' on the same gradients in NCHW
// bit for bit, on odd and even sizes (the blocked layout's zero border in
// place of winoGradOut's padded plane).
func TestWinoWeightOuterKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, n := range []int{1, 3, 64, 100} {
		d, v, base := randVec(16*n), randVec(16*n), randVec(256)
		var want []float32
		impl.ForEach("conv", func(name string) {
			c := slices.Clone(base)
			outer(d, n, v, c)
			if want == nil {
				want = c
				for o := range 16 {
					for l := range 16 {
						ref := float64(base[16*o+l])
						for tt := range n {
							ref += float64(d[16*tt+o]) * float64(v[16*tt+l])
						}
						if e := math.Abs(float64(c[16*o+l]) - ref); e > 1e-5*float64(n+1) {
							t.Fatalf("outerGo, %d tiles: c[%d][%d] = %v, want %v", n, o, l, c[16*o+l], ref)
						}
					}
				}
				return
			}
			if !slices.Equal(c, want) {
				t.Errorf("outer (%s), %d tiles: differs from the Go loop", name, n)
			}
		})
	}
	for _, sz := range [][2]int{{8, 8}, {7, 9}, {3, 2}, {1, 5}} {
		h, w := sz[0], sz[1]
		th, tw := (h+1)/2, (w+1)/2
		p := th * tw
		g, err := NewGeom(16, h, w, 3, 3, Config{Padding: [2]int{1, 1}})
		if err != nil {
			t.Fatal(err)
		}
		gy := randVec(32 * h * w) // two blocks of 16 channels
		ref := make([]float32, 16*32*p)
		winoGradOut(g, 32, gy, len(gy), 0, 1, ref, make([]float32, winoGradOutWork(g, 1)))
		a := nchwc.NewAct(32, h, w)
		a.FromNCHW(gy)
		xs := 32*p + 3
		var want []float32
		impl.ForEach("conv", func(name string) {
			dv := make([]float32, 16*xs)
			for b := range 2 {
				for i := range th {
					winoGradIn(a.Data, b*a.BlockStride()+(2*i+1)*a.RowStride()+16, a.RowStride(), tw, dv, (b*p+i*tw)*16, xs)
				}
			}
			for xi := range 16 {
				for o := range 32 {
					for tt := range p {
						if got, r := dv[xi*xs+((o/16)*p+tt)*16+o%16], ref[(xi*32+o)*p+tt]; got != r {
							t.Fatalf("winoGradIn (%s), %d×%d: D'_%d of channel %d, tile %d: %v, winoGradOut %v", name, h, w, xi, o, tt, got, r)
						}
					}
				}
			}
			if want == nil {
				want = dv
			} else if !slices.Equal(dv, want) {
				t.Errorf("winoGradIn (%s), %d×%d: differs from the Go loop", name, h, w)
			}
		})
	}
}

// winoWeightFiltersRef is winoWeightFilters as loops over G', the
// reference its unrolled, parallel form must match bit for bit.
func winoWeightFiltersRef(mp []float32, m, k int, gw []float32) {
	var gs [4][3]float64 // G'
	for r := range 4 {
		for a := range 3 {
			gs[r][a] = winoGradSigns[r] * winoG[r][a]
		}
	}
	mk := m * k
	for i := range mk {
		var t [3][4]float64
		for r := range 4 {
			for s := range 4 {
				v := float64(mp[(r*4+s)*mk+i])
				for a, c := range gs[r] {
					t[a][s] += c * v
				}
			}
		}
		for a := range 3 {
			for b := range 3 {
				var f float64
				for s := range 4 {
					f += t[a][s] * gs[s][b]
				}
				gw[i*9+a*3+b] += float32(f)
			}
		}
	}
}

// TestWinoWeightFilters checks winoWeightFilters against the loops of
// winoWeightFiltersRef bit for bit, with 1 and 3 workers, on sizes that
// leave a partial range of filters.
func TestWinoWeightFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, mk := range [][2]int{{3, 5}, {64, 96}, {96, 128}} {
		m, k := mk[0], mk[1]
		mp := make([]float32, 16*m*k)
		for i := range mp {
			if i%7 != 3 {
				mp[i] = float32(rng.NormFloat64())
			}
		}
		gw0 := make([]float32, 9*m*k)
		for i := range gw0 {
			gw0[i] = float32(rng.NormFloat64())
		}
		want := slices.Clone(gw0)
		winoWeightFiltersRef(mp, m, k, want)
		for _, workers := range []int{1, 3} {
			got := slices.Clone(gw0)
			func() {
				defer parallel.SetWorkers(parallel.SetWorkers(workers))
				winoWeightFilters(mp, m, k, got)
			}()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d×%d, %d workers: gw[%d] = %v, want %v", m, k, workers, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkWinoWeightFilters times the transform of the products into
// filters of a 512 × 512-channel layer, the loops (ref) against
// winoWeightFilters.
func BenchmarkWinoWeightFilters(b *testing.B) {
	const m, k = 512, 512
	mp := make([]float32, 16*m*k)
	for i := range mp {
		mp[i] = float32(i%13) - 6
	}
	gw := make([]float32, 9*m*k)
	for _, name := range []string{"ref", "new"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if name == "ref" {
					winoWeightFiltersRef(mp, m, k, gw)
				} else {
					winoWeightFilters(mp, m, k, gw)
				}
			}
		})
	}
}
