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
					fillSpecial(rng, dst)
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

// TestAddInterleaveRows checks AddInterleaveRows, with and without its
// AVX2 kernel, against the definition dst[r·ldd + 2i] += a[r·lds + i],
// dst[r·ldd + 2i + 1] += b[r·lds + i], bit for bit, for counts around
// multiples of 8, on slices cut right after the last value used and
// longer ones, and that every other value keeps its bits (negative zeros
// and NaNs among them).
func TestAddInterleaveRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	impl.ForEach("kernels", func(name string) {
		for _, rows := range []int{1, 2, 5, 16} {
			for n := 1; n <= 34; n++ {
				for _, extra := range []int{0, 1, 9} {
					ldd, lds := 2*n+rng.IntN(5), n+rng.IntN(3)
					a := make([]float32, (rows-1)*lds+n+extra)
					b := make([]float32, len(a))
					for i := range a {
						a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
					}
					dst := make([]float32, (rows-1)*ldd+2*n+extra)
					fillSpecial(rng, dst)
					want := append([]float32(nil), dst...)
					for r := range rows {
						for i := range n {
							want[r*ldd+2*i] += a[r*lds+i]
							want[r*ldd+2*i+1] += b[r*lds+i]
						}
					}
					AddInterleaveRows(dst, ldd, a, b, lds, rows, n)
					if i := sameBits(dst, want); i >= 0 {
						t.Fatalf("%s rows=%d n=%d extra=%d ldd=%d lds=%d: dst[%d] = %v (%#x), want %v (%#x)", name, rows, n, extra, ldd, lds, i, dst[i], math.Float32bits(dst[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	})
	defer func() {
		if recover() == nil {
			t.Error("AddInterleaveRows with a short slice did not panic")
		}
	}()
	AddInterleaveRows(make([]float32, 31), 16, make([]float32, 16), make([]float32, 16), 8, 2, 8)
}

// BenchmarkAddInterleaveRows times adding two phase planes into every
// second value of an input gradient of 16 channels at 32×32 (rows of 16
// values), by AddInterleaveRows (interleave) and by two AddStride2Rows
// (stride2), alternating.
func BenchmarkAddInterleaveRows(b *testing.B) {
	const c, h, w = 16, 32, 32
	dst := make([]float32, c*h*w)
	even, odd := make([]float32, c*h*w/4), make([]float32, c*h*w/4)
	for _, path := range []string{"interleave", "stride2"} {
		b.Run(path, func(b *testing.B) {
			b.SetBytes(int64(4 * len(dst)))
			for b.Loop() {
				for a := range 2 {
					if path == "interleave" {
						AddInterleaveRows(dst[a*w:], 2*w, even, odd, w/2, c*h/2, w/2)
						continue
					}
					AddStride2Rows(dst[a*w:], 2*w, even, w/2, c*h/2, w/2)
					AddStride2Rows(dst[a*w+1:], 2*w, odd, w/2, c*h/2, w/2)
				}
			}
		})
	}
}

// fillSpecial fills dst with normal values, a quarter of them negative
// zeros and a quarter NaNs with a payload.
func fillSpecial(rng *rand.Rand, dst []float32) {
	nan := math.Float32frombits(0x7fc00123)
	negZero := float32(math.Copysign(0, -1))
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
}
