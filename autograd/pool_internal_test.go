package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMaxPool2PlaneMatchesGeneric checks the 2×2, stride-2 max-pool loop
// and its AVX2 kernel against the general loop, bit for bit in the values
// and the indices, on planes with ties, NaNs and −∞, of odd sizes and of
// the widths the kernel takes one or two rows at a time.
func TestMaxPool2PlaneMatchesGeneric(t *testing.T) {
	for _, asm := range []bool{false, true} {
		t.Run(fmt.Sprintf("asm=%v", asm), func(t *testing.T) { testMaxPool2(t, asm) })
	}
}

func testMaxPool2(t *testing.T, asm bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, 1, -1, float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN())}
	for _, hw := range [][2]int{{2, 2}, {3, 3}, {4, 6}, {7, 5}, {16, 16}, {33, 17}, {8, 8}, {9, 9}, {6, 8}, {5, 40}, {4, 34}, {6, 16}, {7, 17}} {
		for trial := range 20 {
			x := New(1, 1, hw[0], hw[1])
			for i := range x.Data {
				if trial%2 == 0 {
					x.Data[i] = special[rng.IntN(len(special))]
				} else {
					x.Data[i] = float32(rng.NormFloat64())
				}
			}
			g := poolGeometry("MaxPool2d", x, 2, 2, 0)
			want, got := make([]float32, g.cols), make([]float32, g.cols)
			wantArg, gotArg := make([]float32, g.cols), make([]float32, g.cols)
			maxPoolPlane(g, x.Data, want, wantArg)
			maxPool2(g, x.Data, got, gotArg, asm)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) || math.Float32bits(wantArg[i]) != math.Float32bits(gotArg[i]) {
					t.Fatalf("%v trial %d output %d: got %v at %d, want %v at %d", hw, trial, i, got[i], math.Float32bits(gotArg[i]), want[i], math.Float32bits(wantArg[i]))
				}
			}
			maxPool2(g, x.Data, got, nil, asm)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%v trial %d output %d without indices: got %v, want %v", hw, trial, i, got[i], want[i])
				}
			}
		}
	}
}

// TestMaxPool2GradMatchesScatter checks the backward pass of the 2×2,
// stride-2 max pool, with the Go loop and the AVX2 kernel, bit for bit
// against adding each output gradient at its maximum's index: adding to a
// gradient, and storing into a buffer of garbage as if it were zeroed
// first, with gradients that include −0.
func TestMaxPool2GradMatchesScatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	negZero := float32(math.Copysign(0, -1))
	for _, hw := range [][2]int{{2, 2}, {3, 3}, {4, 6}, {7, 5}, {16, 16}, {33, 17}, {8, 8}, {9, 9}, {6, 8}, {5, 40}, {4, 34}, {6, 16}, {7, 17}} {
		x := New(1, 1, hw[0], hw[1])
		for i := range x.Data {
			x.Data[i] = float32(rng.IntN(3)) // ties
		}
		g := poolGeometry("MaxPool2d", x, 2, 2, 0)
		out, arg := make([]float32, g.cols), make([]float32, g.cols)
		maxPoolPlane(g, x.Data, out, arg)
		gy := make([]float32, g.cols)
		for i := range gy {
			gy[i] = float32(rng.NormFloat64())
			if i%5 == 0 {
				gy[i] = negZero
			}
		}
		init := make([]float32, len(x.Data))
		for i := range init {
			init[i] = float32(rng.NormFloat64())
			if i%7 == 0 {
				init[i] = negZero
			}
		}
		for _, store := range []bool{false, true} {
			want := make([]float32, len(init))
			if !store {
				copy(want, init)
			}
			for o, v := range gy {
				want[math.Float32bits(arg[o])] += v
			}
			for _, asm := range []bool{false, true} {
				got := slices.Clone(init)
				if store {
					for i := range got {
						got[i] = float32(math.NaN())
					}
				}
				maxPool2Grad(g, gy, arg, got, store, asm)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v store=%v asm=%v: gx[%d] = %v, want %v", hw, store, asm, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// BenchmarkMaxPool2 times the 2×2, stride-2 max pool with indices and its
// backward pass (storing) on the plane sizes of VGG-16's pools, with the
// Go loops and the AVX2 kernels.
func BenchmarkMaxPool2(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, hw := range []int{32, 16, 8, 4} {
		x := New(1, 1, hw, hw)
		for i := range x.Data {
			x.Data[i] = float32(rng.NormFloat64())
		}
		g := poolGeometry("MaxPool2d", x, 2, 2, 0)
		out, arg := make([]float32, g.cols), make([]float32, g.cols)
		gx := make([]float32, len(x.Data))
		for _, asm := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dx%d/asm=%v", hw, hw, asm), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x.Data)))
				for b.Loop() {
					maxPool2(g, x.Data, out, arg, asm)
				}
			})
			b.Run(fmt.Sprintf("%dx%d/grad/asm=%v", hw, hw, asm), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x.Data)))
				for b.Loop() {
					maxPool2Grad(g, out, arg, gx, true, asm)
				}
			})
		}
	}
}
