package autograd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxPool2PlaneMatchesGeneric checks the 2×2, stride-2 max-pool loop
// against the general one, bit for bit in the values and the indices, on
// planes with ties, NaNs and −∞ and of odd sizes.
func TestMaxPool2PlaneMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, 1, -1, float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN())}
	for _, hw := range [][2]int{{2, 2}, {3, 3}, {4, 6}, {7, 5}, {16, 16}, {33, 17}} {
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
			maxPool2Plane(g, x.Data, got, gotArg)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) || math.Float32bits(wantArg[i]) != math.Float32bits(gotArg[i]) {
					t.Fatalf("%v trial %d output %d: got %v at %d, want %v at %d", hw, trial, i, got[i], math.Float32bits(gotArg[i]), want[i], math.Float32bits(wantArg[i]))
				}
			}
			maxPool2Plane(g, x.Data, got, nil)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%v trial %d output %d without indices: got %v, want %v", hw, trial, i, got[i], want[i])
				}
			}
		}
	}
}
