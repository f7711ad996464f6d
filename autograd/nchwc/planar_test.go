package nchwc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// TestPlanarLayouts checks that every layout holds the image it was given
// (At), and that Shifted and Split hold the shifted and split copies
// their filters read (through the convolutions of TestSparseConv).
func TestPlanarLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, l := range []Layout{Flat, Shifted, Split} {
		for _, sz := range [][2]int{{1, 1}, {5, 7}, {8, 8}, {32, 32}} {
			h, w := sz[0], sz[1]
			p := NewPlanar(3, h, w, l)
			x := randSlice(rng, 3*h*w, 1)
			for c := range 3 {
				p.SetImage(c, x[c*h*w:(c+1)*h*w])
			}
			for c := range 3 {
				for y := range h {
					for xx := range w {
						if got, want := p.At(c, y, xx), x[(c*h+y)*w+xx]; got != want {
							t.Fatalf("layout %d %d×%d: At(%d, %d, %d) = %v, want %v", l, h, w, c, y, xx, got, want)
						}
					}
				}
			}
		}
	}
}

// TestSparseConv checks the sparse convolution of planar activations
// against refConv (float64 sums) for 1×1 and 3×3 filters at stride 1 and
// 2, odd and even sizes, many zero fractions, with and without residual
// and ReLU, under every implementation of the sparse row kernels; and
// that the output channels split into runs give the same bits.
func TestSparseConv(t *testing.T) {
	names, _ := impl.List("kernels")
	for _, kernels := range append([]string{impl.Generic}, names...) {
		if !impl.Select("kernels", kernels) {
			continue
		}
		rng := rand.New(rand.NewPCG(7, 8))
		for _, tc := range []struct{ cin, cout, h, w, k, s int }{
			{3, 16, 32, 32, 3, 1}, {16, 16, 32, 32, 3, 1}, {16, 32, 32, 32, 3, 2}, {16, 32, 32, 32, 1, 2},
			{64, 63, 8, 8, 3, 1}, {63, 64, 8, 8, 3, 1}, {5, 7, 7, 5, 3, 2}, {5, 7, 7, 5, 1, 2}, {6, 3, 5, 9, 1, 1}, {4, 4, 1, 1, 3, 1},
		} {
			for _, zeros := range []float64{0, 0.5, 0.95, 1} {
				name := fmt.Sprintf("%s/%+v/z%g", kernels, tc, zeros)
				x := randSlice(rng, tc.cin*tc.h*tc.w, 1)
				wt := randSlice(rng, tc.cout*tc.cin*tc.k*tc.k, 0.3)
				for i := range wt {
					if rng.Float64() < zeros {
						wt[i] = 0
					}
				}
				bias := randSlice(rng, tc.cout, 0.5)
				f := PackSparse(wt, tc.cout, tc.cin, tc.k, tc.s, tc.h, tc.w)
				in := NewPlanar(tc.cin, tc.h, tc.w, f.InLayout())
				for c := range tc.cin {
					in.SetImage(c, x[c*tc.h*tc.w:(c+1)*tc.h*tc.w])
				}
				n := f.OutSize()
				resX := randSlice(rng, tc.cout*n, 1)
				res := NewPlanar(tc.cout, f.Ho, f.Wo, Flat)
				for c := range tc.cout {
					res.SetImage(c, resX[c*n:(c+1)*n])
				}
				for _, withRes := range []bool{false, true} {
					var r *Planar
					var rs []float32
					if withRes {
						r, rs = res, resX
					}
					want := refConv(x, tc.cin, tc.h, tc.w, wt, tc.cout, tc.k, tc.s, bias, rs, true)
					var outs [2]*Planar
					for parts := 1; parts <= 2; parts++ {
						out := NewPlanar(tc.cout, f.Ho, f.Wo, Shifted)
						y := make([]float32, tc.cout*n)
						per := (tc.cout + parts - 1) / parts
						for lo := 0; lo < tc.cout; lo += per {
							hi := min(lo+per, tc.cout)
							f.Rows(in, bias, y[lo*n:], lo, hi)
							Store(out, y[lo*n:], r, true, lo, hi)
						}
						outs[parts-1] = out
					}
					for i := range outs[0].Data {
						if math.Float32bits(outs[0].Data[i]) != math.Float32bits(outs[1].Data[i]) {
							t.Fatalf("%s: value %d differs between 1 and 2 runs of channels", name, i)
						}
					}
					for c := range tc.cout {
						for i, v := range outs[0].Image(c) {
							w := want[c*n+i]
							if math.Abs(float64(v-w)) > 1e-4*(1+math.Abs(float64(w))) {
								t.Fatalf("%s res %v: channel %d value %d: %v, want %v", name, withRes, c, i, v, w)
							}
						}
					}
				}
			}
		}
	}
	impl.Reset("kernels")
}
