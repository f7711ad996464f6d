package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
)

// TestToBF16 checks the rounding of ToBF16 on values whose result is
// known, ties and special values included.
func TestToBF16(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even below
		{0x3f818000, 0x3f82}, // tie, even above
		{0x3f808001, 0x3f81}, // above the tie
		{0x3f807fff, 0x3f80}, // below the tie
		{0x7f7fffff, 0x7f80}, // the largest float32 rounds to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7f800001, 0x7fc0}, // signalling NaN made quiet
		{0xffc00000, 0xffc0}, // quiet NaN
		{0x00000001, 0x0000}, // denormal to +0
		{0x807fffff, 0x8000}, // denormal to -0
		{0x00800000, 0x0080}, // the smallest normal
		{0x80000000, 0x8000}, // -0
	}
	for _, c := range cases {
		if got := ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// bf16Values returns n values spread over many binades, with the special
// values of TestToBF16 among them if special, so that the rounding of
// every step of the contract shows.
func bf16Values(rng *rand.Rand, n int, special bool) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(24)-12))
	}
	if special {
		sp := []uint32{0x3f808000, 0x3f818000, 0x7f800001, 0x00000001, 0x807fffff, 0x80000000, 0x7f7fffff}
		for i, u := range sp {
			s[(i*7919)%n] = math.Float32frombits(u)
		}
	}
	return s
}

// TestBF16PackImpl packs the same matrices with every implementation and
// compares the words, special values included.
func TestBF16PackImpl(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, width := range []int{8, 16, 32} {
		for _, w := range []int{1, 5, 8, 13, 16, 17, 32} {
			for _, kcb := range []int{1, 2, 7, 64} {
				if w > width {
					continue
				}
				ld := w + 3
				src := bf16Values(rng, kcb*ld, true)
				kp := (kcb + 1) / 2
				var want []uint32
				impl.ForEach("blasbf16", func(name string) {
					dst := make([]uint32, kp*width)
					for i := range dst {
						dst[i] = 0xdeadbeef
					}
					bf16PackContiguous(src, ld, kcb, w, width, dst)
					if want == nil {
						want = dst
						for q := 0; q < kp; q++ {
							for j := 0; j < width; j++ {
								var x, y float32
								if j < w {
									x = src[2*q*ld+j]
									if 2*q+1 < kcb {
										y = src[(2*q+1)*ld+j]
									}
								}
								if g, e := dst[q*width+j], pairOf(x, y); g != e {
									t.Fatalf("generic pack width %d w %d kcb %d: pair %d column %d = %#x, want %#x", width, w, kcb, q, j, g, e)
								}
							}
						}
						return
					}
					for i := range dst {
						if dst[i] != want[i] {
							t.Fatalf("%s pack width %d w %d kcb %d: word %d = %#x, generic %#x", name, width, w, kcb, i, dst[i], want[i])
						}
					}
				})
			}
		}
	}
}

// contractGemm computes SgemmBF16's result by its documented contract,
// one element at a time, for comparison with the blocked driver.
func contractGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float32 {
	out := make([]float32, m*n)
	at := func(i, p int) float32 {
		if p >= k {
			return 0
		}
		if transA {
			return a[p*lda+i]
		}
		return a[i*lda+p]
	}
	bt := func(p, j int) float32 {
		if p >= k {
			return 0
		}
		if transB {
			return b[j*ldb+p]
		}
		return b[p*ldb+j]
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			cv := c[i*ldc+j]
			for pc := 0; pc < k; pc += bf16KC {
				var acc float32
				for p := pc; p < min(pc+bf16KC, k); p += 2 {
					acc = dotPair(acc, pairOf(at(i, p), at(i, p+1)), pairOf(bt(p, j), bt(p+1, j)))
				}
				be := beta
				if pc > 0 {
					be = 1
				}
				if be == 0 {
					cv = alpha * acc
				} else {
					cv = float32(alpha*acc) + float32(be*cv)
				}
			}
			out[i*n+j] = cv
		}
	}
	return out
}

var bf16Cases = []gemmCase{
	{false, false, 8, 32, 2, 1, 0, 0},
	{false, false, 17, 45, 31, 1, 0, 0},
	{true, false, 16, 100, 144, 1, 1, 0},
	{false, true, 33, 70, 401, 0.5, -2, 0},
	{true, true, 9, 33, 777, 1, 0, 0},
	{false, false, 200, 97, 900, 1, 0.25, 0},
	{true, false, 64, 1100, 576, 1, 0, 0},
}

// TestSgemmBF16 checks every implementation of SgemmBF16 against the
// documented contract bit for bit (values over many binades, so that
// the order of the roundings shows), and against the float64 product
// within bfloat16's precision, with 1 and several workers.
func TestSgemmBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range bf16Cases {
		m, n, k := tc.m, tc.n, tc.k
		ar, ac := m, k
		if tc.transA {
			ar, ac = k, m
		}
		br, bc := k, n
		if tc.transB {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+1, bc+2, n+3
		a := bf16Values(rng, ar*lda, false)
		b := bf16Values(rng, br*ldb, false)
		c0 := bf16Values(rng, m*ldc, false)
		want := contractGemm(tc.transA, tc.transB, m, n, k, tc.alpha, a, lda, b, ldb, tc.beta, c0, ldc)
		name := fmt.Sprintf("%v", tc)
		impl.ForEach("blasbf16", func(impName string) {
			for _, workers := range []int{1, 2, 3} {
				prev := parallel.SetWorkers(workers)
				c := append([]float32(nil), c0...)
				SgemmBF16(tc.transA, tc.transB, m, n, k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
				parallel.SetWorkers(prev)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						if g, w := c[i*ldc+j], want[i*n+j]; math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%s %s workers %d: C[%d][%d] = %v, contract %v", impName, name, workers, i, j, g, w)
						}
					}
					for j := n; j < ldc && i*ldc+j < len(c); j++ {
						if c[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("%s %s: C[%d][%d] past n changed", impName, name, i, j)
						}
					}
				}
			}
		})
		// Against the exact product: each operand is off by at most
		// 2⁻⁸ relatively (half a unit in the last of 8 significant
		// bits), each product by about 2⁻⁷, and the float32 sums add far
		// less.
		ref, mag := refGemm(tc.transA, tc.transB, m, n, k, tc.alpha, a, lda, b, ldb, tc.beta, c0, ldc)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				if d := math.Abs(float64(want[i*n+j]) - ref[i*n+j]); d > 1e-2*mag[i*n+j] {
					t.Fatalf("%s: C[%d][%d] = %v, float64 %v: off by %.3g of %.3g", name, i, j, want[i*n+j], ref[i*n+j], d, mag[i*n+j])
				}
			}
		}
	}
}

// TestSgemmBF16Serial checks that the serial entry point gives the same
// values.
func TestSgemmBF16Serial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, n, k := 40, 300, 500
	a, b := randSlice(rng, m*k), randSlice(rng, k*n)
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	SgemmBF16(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
	SgemmBF16Serial(false, false, m, n, k, 1, a, k, b, n, 0, c2, n)
	for i := range c1 {
		if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) {
			t.Fatalf("C[%d]: SgemmBF16 %v, SgemmBF16Serial %v", i, c1[i], c2[i])
		}
	}
}

// TestBF16PackAImpl packs blocks of A, both orientations, with every
// implementation, special values included, and compares the words with
// pairOf taken element by element.
func TestBF16PackAImpl(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, transA := range []bool{false, true} {
		for _, mcb := range []int{1, 8, 13} {
			for _, kcb := range []int{1, 2, 31, 32, 33, 70} {
				lda := max(mcb, kcb) + 5
				a := bf16Values(rng, (mcb+kcb+3)*lda, true)
				kp := (kcb + 1) / 2
				impl.ForEach("blasbf16", func(name string) {
					dst := make([]uint32, ceilDiv(mcb, bf16MR)*bf16MR*kp)
					for i := range dst {
						dst[i] = 0xdeadbeef
					}
					bf16PackA(transA, a, lda, 1, mcb, 2, kcb, dst)
					for i := 0; i < ceilDiv(mcb, bf16MR)*bf16MR; i++ {
						for q := 0; q < kp; q++ {
							var x, y float32
							if i < mcb {
								at := func(p int) float32 {
									if transA {
										return a[(2+p)*lda+1+i]
									}
									return a[(1+i)*lda+2+p]
								}
								x = at(2 * q)
								if 2*q+1 < kcb {
									y = at(2*q + 1)
								}
							}
							got := dst[(i/bf16MR)*kp*bf16MR+(i%bf16MR)*kp+q]
							if want := pairOf(x, y); got != want {
								t.Fatalf("%s transA=%v mcb %d kcb %d: row %d pair %d = %#x, want %#x", name, transA, mcb, kcb, i, q, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestMulPairRows checks BF16PackedA.MulPairRows with every
// implementation against SgemmBF16 of the same bfloat16 values stored
// out as a float32 matrix, bit for bit, for pair rows at scattered
// offsets.
func TestMulPairRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		m, n, k int
		transA  bool
		beta    float32
	}{{16, 100, 144, false, 0}, {13, 37, 31, true, 1}, {64, 80, 576, false, 0.5}, {3, 16, 900, true, 0}} {
		ar, ac := tc.m, tc.k
		if tc.transA {
			ar, ac = tc.k, tc.m
		}
		a := bf16Values(rng, ar*ac, false)
		pa := PackBF16A(tc.transA, tc.m, tc.k, a, ac)
		kp := pa.Pairs()
		src := make([]uint32, 4096)
		for i := range src {
			src[i] = pairOf(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
		}
		offs := make([]int32, kp)
		b := make([]float32, tc.k*tc.n)
		for q := range offs {
			offs[q] = int32(rng.IntN(len(src) - tc.n))
			for j := 0; j < tc.n; j++ {
				w := src[int(offs[q])+j]
				b[2*q*tc.n+j] = FromBF16(uint16(w))
				if 2*q+1 < tc.k {
					b[(2*q+1)*tc.n+j] = FromBF16(uint16(w >> 16))
				}
			}
		}
		c0 := bf16Values(rng, tc.m*tc.n, false)
		want := append([]float32(nil), c0...)
		SgemmBF16(tc.transA, false, tc.m, tc.n, tc.k, 1, a, ac, b, tc.n, tc.beta, want, tc.n)
		impl.ForEach("blasbf16", func(name string) {
			c := append([]float32(nil), c0...)
			pa.MulPairRows(tc.n, PairRows{Src: src, Offs: offs}, tc.beta, c, tc.n)
			for i := range c {
				if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: C[%d] = %v, SgemmBF16 %v", name, tc, i, c[i], want[i])
				}
			}
		})
	}
}

// TestBF16Pairs compares BF16Pairs of every implementation with pairOf.
func TestBF16Pairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	src := bf16Values(rng, 300, true)
	for _, n := range []int{1, 31, 32, 100} {
		for _, single := range []bool{false, true} {
			impl.ForEach("blasbf16", func(name string) {
				dst := make([]uint32, n)
				BF16Pairs(dst, src, 150, n, single)
				for j, got := range dst {
					y := src[150+j]
					if single {
						y = 0
					}
					if want := pairOf(src[j], y); got != want {
						t.Fatalf("%s n %d single %v: word %d = %#x, want %#x", name, n, single, j, got, want)
					}
				}
			})
		}
	}
}

// TestSgemmBF16WordRows checks SgemmBF16WordRows with every
// implementation against SgemmBF16 of the same bfloat16 values stored
// out, bit for bit, for rows at odd and even word offsets.
func TestSgemmBF16WordRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	vals := bf16Values(rng, 5000, false)
	src := make([]uint32, (len(vals)+1)/2)
	BF16Words(src, vals)
	for i, v := range vals {
		if got := FromBF16(uint16(word(src, i))); math.Float32bits(got) != math.Float32bits(FromBF16(ToBF16(v))) {
			t.Fatalf("BF16Words: word %d = %v, want %v", i, got, FromBF16(ToBF16(v)))
		}
	}
	for _, tc := range []struct {
		m, n, k int
		beta    float32
	}{{144, 16, 1088, 0}, {13, 37, 31, 1}, {9, 64, 800, 0.5}, {20, 5, 1, 0}} {
		offs := make([]int32, tc.m)
		a := make([]float32, tc.m*tc.k)
		for i := range offs {
			offs[i] = int32(rng.IntN(len(vals) - tc.k - 1))
			for p := 0; p < tc.k; p++ {
				a[i*tc.k+p] = FromBF16(uint16(word(src, int(offs[i])+p)))
			}
		}
		b := bf16Values(rng, tc.k*tc.n, false)
		c0 := bf16Values(rng, tc.m*tc.n, false)
		want := append([]float32(nil), c0...)
		SgemmBF16(false, false, tc.m, tc.n, tc.k, 1, a, tc.k, b, tc.n, tc.beta, want, tc.n)
		impl.ForEach("blasbf16", func(name string) {
			c := append([]float32(nil), c0...)
			SgemmBF16WordRows(tc.m, tc.n, tc.k, WordRows{Src: src, Offs: offs}, b, tc.n, tc.beta, c, tc.n)
			for i := range c {
				if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: C[%d] = %v, SgemmBF16 %v", name, tc, i, c[i], want[i])
				}
			}
		})
	}
}

// TestBF16PlaneRows compares BF16PlaneRows of every implementation with
// pairOf, for row lengths around the 16-value chunks.
func TestBF16PlaneRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	src := bf16Values(rng, 2000, true)
	for _, w := range []int{1, 8, 16, 17, 32, 33} {
		for _, single := range []bool{false, true} {
			const rows, sstride, ld, dstride = 5, 40, 900, 50
			impl.ForEach("blasbf16", func(name string) {
				dst := make([]uint32, rows*dstride)
				for i := range dst {
					dst[i] = 0xdeadbeef
				}
				BF16PlaneRows(dst, dstride, src, sstride, ld, rows, w, single)
				for r := 0; r < rows; r++ {
					for j := 0; j < dstride; j++ {
						want := uint32(0xdeadbeef)
						if j < w {
							y := src[ld+r*sstride+j]
							if single {
								y = 0
							}
							want = pairOf(src[r*sstride+j], y)
						}
						if got := dst[r*dstride+j]; got != want {
							t.Fatalf("%s w %d single %v: row %d word %d = %#x, want %#x", name, w, single, r, j, got, want)
						}
					}
				}
			})
		}
	}
}
