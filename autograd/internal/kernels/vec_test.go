package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// data returns n values: normal samples with exact zeros, negative zeros
// and values equal to m mixed in, so that masks and clamps meet their edge
// cases.
func data(rng *rand.Rand, n int, m float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch rng.IntN(10) {
		case 0:
			s[i] = 0
		case 1:
			s[i] = float32(math.Copysign(0, -1))
		case 2:
			s[i] = m
		default:
			s[i] = float32(rng.NormFloat64()*2 + 0.3)
		}
	}
	return s
}

// both runs f with the Go loops and with the assembly kernels (where the
// CPU has them) and returns the two results.
func both[T any](f func() T) (goLoop, asm T) {
	impl.ForEach("kernels", func(name string) {
		v := f()
		if name == impl.Generic {
			goLoop, asm = v, v
		} else {
			asm = v
		}
	})
	return goLoop, asm
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestKernelsMatchGoLoops checks every kernel against its Go loop, bit for
// bit, for all lengths up to 70 and offsets that misalign the slices.
func TestKernelsMatchGoLoops(t *testing.T) {
	if !haveAsm {
		t.Log("no assembly kernels: the Go loops are compared with themselves")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 70; n++ {
		for _, off := range []int{0, 1, 3} {
			const m = 0.25
			x := data(rng, n+off, m)[off:]
			g := data(rng, n+off, m)[off:]
			y := data(rng, n+off, m)[off:]
			r := data(rng, n+off, m)[off:]
			init := data(rng, n+off, m)[off:]
			k := 0.125

			s1, s2 := both(func() [2]float64 { a, b := Stats(x, k); return [2]float64{a, b} })
			if s1 != s2 {
				t.Fatalf("Stats n=%d off=%d: Go %v, asm %v", n, off, s1, s2)
			}
			for _, mask := range [][]float32{nil, y} {
				a, b := both(func() [2]float64 { p, q := GradSums(g, mask, x, k); return [2]float64{p, q} })
				if a != b {
					t.Fatalf("GradSums n=%d off=%d masked=%v: Go %v, asm %v", n, off, mask != nil, a, b)
				}
			}
			for _, e := range []Epilogue{Plain, ReLU, AddReLU} {
				a, b := both(func() []float32 {
					dst := make([]float32, n)
					Affine(dst, x, r, m, -1.5, 0.5, e)
					return dst
				})
				if i := sameBits(a, b); i >= 0 {
					t.Fatalf("Affine n=%d off=%d epilogue %d: element %d Go %v, asm %v", n, off, e, i, a[i], b[i])
				}
			}
			for _, mask := range [][]float32{nil, y} {
				for _, store := range []bool{false, true} {
					a, b := both(func() []float32 {
						dst := append([]float32(nil), init...)
						AffineGrad(dst, g, mask, x, m, 1.25, -0.75, 0.375, store)
						return dst
					})
					if i := sameBits(a, b); i >= 0 {
						t.Fatalf("AffineGrad n=%d off=%d masked=%v store=%v: element %d Go %v, asm %v", n, off, mask != nil, store, i, a[i], b[i])
					}
					if mask == nil {
						continue
					}
					a, b = both(func() []float32 {
						dst := append([]float32(nil), init...)
						MaskedGrad(dst, g, mask, store)
						return dst
					})
					if i := sameBits(a, b); i >= 0 {
						t.Fatalf("MaskedGrad n=%d off=%d store=%v: element %d Go %v, asm %v", n, off, store, i, a[i], b[i])
					}
				}
			}
			// The ReLU mask recomputed from x: the same bits as the
			// kernels that read y, the output of Affine with the ReLU
			// epilogue, with an affine map that is exactly zero where x
			// is m, and for AffineGradReLU on x with NaNs and
			// infinities too (which make every sum NaN).
			xn := append([]float32(nil), x...)
			for i := 5; i < n; i += 11 {
				xn[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[i%3]
			}
			for _, ab := range [][2]float32{{-1.5, 0.5}, {2, 0}} {
				yr := make([]float32, n)
				Affine(yr, x, nil, m, ab[0], ab[1], ReLU)
				want := func() [2]float64 { p, q := GradSums(g, yr, x, k); return [2]float64{p, q} }()
				a, b := both(func() [2]float64 { p, q := GradSumsReLU(g, yr, x, k, m, ab[0], ab[1]); return [2]float64{p, q} })
				if a != want || b != want {
					t.Fatalf("GradSumsReLU n=%d off=%d a,b=%v: Go %v, asm %v, GradSums %v", n, off, ab, a, b, want)
				}
				Affine(yr, xn, nil, m, ab[0], ab[1], ReLU)
				for _, store := range []bool{false, true} {
					want := append([]float32(nil), init...)
					AffineGrad(want, g, yr, xn, m, 1.25, -0.75, 0.375, store)
					a, b := both(func() []float32 {
						dst := append([]float32(nil), init...)
						AffineGradReLU(dst, g, yr, xn, m, 1.25, -0.75, 0.375, ab[0], ab[1], store)
						return dst
					})
					for _, got := range [][]float32{a, b} {
						if i := sameBits(got, want); i >= 0 {
							t.Fatalf("AffineGradReLU n=%d off=%d a,b=%v store=%v: element %d %v, AffineGrad %v (Go %v, asm %v)", n, off, ab, store, i, got[i], want[i], a[i], b[i])
						}
					}
				}
			}
			a, b := both(func() []float32 {
				dst := make([]float32, n)
				ReLUForward(dst, x)
				return dst
			})
			if i := sameBits(a, b); i >= 0 {
				t.Fatalf("ReLUForward n=%d off=%d: element %d Go %v, asm %v", n, off, i, a[i], b[i])
			}
		}
	}
}

// TestKernelValues checks the kernels against direct float64 formulas.
func TestKernelValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, m = 1003, 0.5
	x, g, y, r := data(rng, n, m), data(rng, n, m), data(rng, n, m), data(rng, n, m)
	impl.ForEach("kernels", func(asm string) {
		var w1, w2, wd, wdx float64
		for i := range x {
			d := float64(x[i]) - 0.1
			w1 += d
			w2 += d * d
			if y[i] > 0 {
				wd += float64(g[i])
				wdx += float64(g[i]) * (float64(x[i]) - 0.2)
			}
		}
		s1, s2 := Stats(x, 0.1)
		sd, sdx := GradSums(g, y, x, 0.2)
		for _, c := range [][2]float64{{s1, w1}, {s2, w2}, {sd, wd}, {sdx, wdx}} {
			if math.Abs(c[0]-c[1]) > 1e-9*math.Max(1, math.Abs(c[1])) {
				t.Errorf("asm=%v: sum %v, want %v", asm, c[0], c[1])
			}
		}
		dst := make([]float32, n)
		Affine(dst, x, r, m, 2, -1, AddReLU)
		for i, v := range dst {
			want := math.Max(float64((x[i]-m)*2-1+r[i]), 0)
			if float64(v) != want {
				t.Fatalf("asm=%v: Affine AddReLU[%d] = %v, want %v", asm, i, v, want)
			}
		}
		MaskedGrad(dst, g, y, true)
		for i, v := range dst {
			if want := float32(0); y[i] > 0 && v != g[i] || !(y[i] > 0) && v != want {
				t.Fatalf("asm=%v: MaskedGrad[%d] = %v for g %v, y %v", asm, i, v, g[i], y[i])
			}
		}
		ReLUForward(dst[:9], []float32{float32(math.NaN()), -1, 2, float32(math.Copysign(0, -1)), 0, 3, -4, 5, 6})
		if !math.IsNaN(float64(dst[0])) || dst[1] != 0 || dst[2] != 2 || dst[5] != 3 || dst[6] != 0 {
			t.Errorf("asm=%v: ReLUForward = %v, want [NaN 0 2 -0 0 3 0 5 6 ...]", asm, dst[:9])
		}
	})
}

func BenchmarkAffineGrad(b *testing.B) {
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(5, 6))
	dst, g, y, x := data(rng, n, 0), data(rng, n, 0), data(rng, n, 0), data(rng, n, 0)
	impl.ForEach("kernels", func(name string) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				AffineGrad(dst, g, y, x, 0.1, 1, 2, 3, false)
			}
		})
	})
}
