package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// TestStride2Rows checks Stride2Rows, with and without its AVX2 kernel,
// against the definition dst[r·ldd + i] = src[r·lds + 2i], for counts
// around multiples of 8, on sources cut right after the last value read
// (where the kernel must leave the last row to the Go loop) and longer
// ones, and that it writes nothing else.
func TestStride2Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	impl.ForEach("kernels", func(name string) {
		for _, rows := range []int{1, 2, 5, 16} {
			for n := 1; n <= 34; n++ {
				for _, extra := range []int{0, 1, 9} {
					ldd, lds := n+rng.IntN(3), 2*n+rng.IntN(5)
					src := make([]float32, (rows-1)*lds+2*n-1+extra)
					for i := range src {
						src[i] = float32(rng.NormFloat64())
					}
					dst := make([]float32, (rows-1)*ldd+n+3)
					for i := range dst {
						dst[i] = -7
					}
					Stride2Rows(dst, ldd, src, lds, rows, n)
					for k, v := range dst {
						r, i := k/ldd, k%ldd
						want := float32(-7)
						if r < rows && i < n {
							want = src[r*lds+2*i]
						}
						if v != want {
							t.Fatalf("%s rows=%d n=%d extra=%d ldd=%d lds=%d: dst[%d] (row %d, value %d) = %v, want %v", name, rows, n, extra, ldd, lds, k, r, i, v, want)
						}
					}
				}
			}
		}
	})
	mustPanic := func(f func()) {
		defer func() {
			if recover() == nil {
				t.Error("Stride2Rows with a short slice did not panic")
			}
		}()
		f()
	}
	mustPanic(func() { Stride2Rows(make([]float32, 8), 8, make([]float32, 30), 16, 2, 8) })
	mustPanic(func() { Stride2Rows(make([]float32, 15), 8, make([]float32, 64), 16, 2, 8) })
}

// TestAddStride2Rows checks AddStride2Rows, with and without its AVX2
// kernel, against the definition dst[r·ldd + 2i] += src[r·lds + i], bit
// for bit, for counts around multiples of 8, on destinations cut right
// after the last value written (where the kernel must leave the last row
// to the Go loop) and longer ones, and that every other value keeps its
// bits (negative zeros and NaNs among them).
func TestAddStride2Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	nan := math.Float32frombits(0x7fc00123)
	negZero := float32(math.Copysign(0, -1))
	impl.ForEach("kernels", func(name string) {
		for _, rows := range []int{1, 2, 5, 16} {
			for n := 1; n <= 34; n++ {
				for _, extra := range []int{0, 1, 9} {
					ldd, lds := 2*n+rng.IntN(5), n+rng.IntN(3)
					src := make([]float32, (rows-1)*lds+n+extra)
					for i := range src {
						src[i] = float32(rng.NormFloat64())
					}
					dst := make([]float32, (rows-1)*ldd+2*n-1+extra)
					for i := range dst {
						switch rng.IntN(4) {
						case 0:
							dst[i] = negZero
						case 1:
							dst[i] = nan
						default:
							dst[i] = float32(rng.NormFloat64())
						}
					}
					want := append([]float32(nil), dst...)
					for r := range rows {
						for i := range n {
							want[r*ldd+2*i] += src[r*lds+i]
						}
					}
					AddStride2Rows(dst, ldd, src, lds, rows, n)
					if i := sameBits(dst, want); i >= 0 {
						t.Fatalf("%s rows=%d n=%d extra=%d ldd=%d lds=%d: dst[%d] = %v (%#x), want %v (%#x)", name, rows, n, extra, ldd, lds, i, dst[i], math.Float32bits(dst[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	})
	defer func() {
		if recover() == nil {
			t.Error("AddStride2Rows with a short slice did not panic")
		}
	}()
	AddStride2Rows(make([]float32, 30), 16, make([]float32, 16), 8, 2, 8)
}
