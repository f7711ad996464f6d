package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// TestTransposeStrided checks TransposeStrided, with and without its AVX2
// kernels, against the definition dst[j·ldd + i] = src[i·lds + j], on row
// ranges and column counts around multiples of 8 and 16 and with strides
// wider than the rows (destination strides wider than the source's take
// the sixteen-row kernel), and that it writes nothing else.
func TestTransposeStrided(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	impl.ForEach("kernels", func(name string) {
		for _, c := range []struct{ rows, cols, lo, hi, lds, ldd int }{
			{8, 8, 0, 8, 8, 8}, {16, 32, 0, 16, 32, 16}, {16, 32, 0, 16, 1024, 16},
			{13, 21, 0, 13, 21, 13}, {24, 17, 3, 20, 40, 30}, {9, 7, 0, 9, 7, 9},
			{64, 8, 0, 64, 64, 64}, {40, 33, 8, 40, 35, 41}, {5, 50, 1, 4, 50, 5},
			// wider destination strides: sixteen rows at a time
			{32, 16, 0, 32, 16, 1024}, {19, 12, 1, 19, 12, 40}, {16, 5, 0, 16, 5, 20}, {48, 24, 5, 45, 30, 64},
		} {
			src := make([]float32, (c.rows-1)*c.lds+c.cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, (c.cols-1)*c.ldd+c.rows)
			for i := range dst {
				dst[i] = -7
			}
			TransposeStrided(c.cols, c.lo, c.hi, src, c.lds, dst, c.ldd)
			for j := 0; j < c.cols; j++ {
				for i := 0; i < c.rows; i++ {
					want := float32(-7)
					if i >= c.lo && i < c.hi {
						want = src[i*c.lds+j]
					}
					if got := dst[j*c.ldd+i]; got != want {
						t.Fatalf("%s %+v: dst[%d·%d+%d] = %v, want %v", name, c, j, c.ldd, i, got, want)
					}
				}
			}
			for k, v := range dst {
				if j, i := k/c.ldd, k%c.ldd; i >= c.rows && v != -7 {
					t.Fatalf("%s %+v: dst[%d] (row %d, column %d past the rows) = %v, written", name, c, k, j, i, v)
				}
			}
		}
	})
}

// BenchmarkTransposeStrided times the transposes of dY (Cout × 32·32, 16
// channels) onto the wide grid of the bfloat16 weight gradient, row by
// output row, with and without the AVX2 kernel.
func BenchmarkTransposeStrided(b *testing.B) {
	const cout, ho, wo, wp = 16, 32, 32, 34
	p := ho * wo
	gy := make([]float32, cout*p)
	dyT := make([]float32, ho*wp*cout)
	impl.ForEach("kernels", func(name string) {
		b.Run(fmt.Sprint(name), func(b *testing.B) {
			for b.Loop() {
				for oh := 0; oh < ho; oh++ {
					TransposeStrided(wo, 0, cout, gy[oh*wo:], p, dyT[oh*wp*cout:], cout)
				}
			}
		})
	})
}
