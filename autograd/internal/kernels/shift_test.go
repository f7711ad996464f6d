package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// TestShiftStores checks ShiftStores against its definition under every
// implementation, bit for bit, for every epilogue, on 1 to 3 channels of
// rows of 1 to 33 values (vector loops and the Go loop), with −0 and NaN
// among the values, and that it writes nothing else.
func TestShiftStores(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, w := range []int{1, 5, 8, 16, 32, 33} {
		for _, h := range []int{1, 3, 8} {
			for _, c := range []int{1, 3} {
				n := w * h
				ldx, ldr := n+3, n+5
				x, r := randomSlice(rng, c*ldx), randomSlice(rng, c*ldr)
				x[0] = float32(math.Copysign(0, -1))
				x[2%n] = float32(math.NaN())
				// Per channel: img at 0, left at n+7, right at 2n+20; ld 3n+30.
				img, left, right, ld := 0, n+7, 2*n+20, 3*n+30
				for _, e := range []Epilogue{Plain, ReLU, AddReLU} {
					impl.ForEach("kernels", func(name string) {
						dst := randomSlice(rng, c*ld)
						orig := append([]float32(nil), dst...)
						ShiftStores(dst, img, left, right, ld, x, ldx, r, ldr, c, n, w, e)
						want := append([]float32(nil), orig...)
						for k := range c {
							for i := range n {
								v := x[k*ldx+i]
								if e == AddReLU {
									v += r[k*ldr+i]
								}
								if e != Plain && v < 0 {
									v = 0
								}
								want[k*ld+img+i], want[k*ld+left+i+1], want[k*ld+right+i] = v, v, v
							}
							for j := 0; j <= n; j += w {
								want[k*ld+left+j], want[k*ld+right+j] = 0, 0
							}
						}
						for i := range want {
							if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s w=%d h=%d c=%d e=%d: value %d = %v, want %v", name, w, h, c, e, i, dst[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

// TestSplitStores checks SplitStores against its definition under every
// implementation, bit for bit: widths that are multiples of 16 (the
// vector loop) and others, odd ones included, odd and even heights, 1 to 3 channels, and
// that it writes nothing else.
func TestSplitStores(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, w := range []int{1, 2, 5, 6, 16, 32, 48} {
		for _, h := range []int{1, 4, 7, 16} {
			for _, c := range []int{1, 3} {
				cols, rows := (w+1)/2, (h+1)/2+1
				ps := rows*cols + 5
				ld, ldx, at := 6*ps+9, h*w+3, 4
				x := randomSlice(rng, c*ldx)
				impl.ForEach("kernels", func(name string) {
					dst := randomSlice(rng, at+c*ld)
					want := append([]float32(nil), dst...)
					SplitStores(dst, at, ps, ld, x, ldx, c, h, w)
					for k := range c {
						for y := range h {
							ph, r := (y+1)%2, (y+1)/2
							for kx := range 3 {
								for j := range cols {
									v := float32(0)
									if col := 2*j + kx - 1; col >= 0 && col < w {
										v = x[k*ldx+y*w+col]
									}
									want[at+k*ld+(2*kx+ph)*ps+r*cols+j] = v
								}
							}
						}
					}
					for i := range want {
						if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s w=%d h=%d c=%d: value %d = %v, want %v", name, w, h, c, i, dst[i], want[i])
						}
					}
				})
			}
		}
	}
}

// TestSparseShiftRows checks SparseShiftRows against SparseRowsBlock and
// ShiftStores (under the generic kernels) bit for bit under every
// implementation: rows of 1 to 33 values, blocks of 16 to 64 columns with
// a partial last one, every epilogue, rows without terms, a dst of
// sentinels (nothing else written).
func TestSparseShiftRows(t *testing.T) {
	const sentinel = 0x7fc01234 // a NaN no store produces
	rng := rand.New(rand.NewPCG(13, 14))
	for _, w := range []int{1, 5, 8, 16, 32, 33} {
		for _, h := range []int{1, 3, 8} {
			for _, block := range []int{16, 48, 64} {
				const rows = 5
				n := w * h
				rowPtr, off, val := randomCSR(rng, rows, 12, 300)
				m := NewCSR(rowPtr, off, val)
				b := randomSlice(rng, 300+n)
				init := randomSlice(rng, rows)
				init[1] = float32(math.Copysign(0, -1)) // −0 passes the ReLU where row 1 has no terms
				b[3] = float32(math.NaN())
				ldr := n + 5
				r := randomSlice(rng, rows*ldr)
				img, left, right, ld := 0, n+7, 2*n+20, 3*n+30
				for _, e := range []Epilogue{Plain, ReLU, AddReLU} {
					for _, lohi := range [][2]int{{0, rows}, {1, 4}} {
						lo, hi := lohi[0], lohi[1]
						run := func() []float32 {
							dst := make([]float32, rows*ld)
							for i := range dst {
								dst[i] = math.Float32frombits(sentinel)
							}
							y := make([]float32, rows*n)
							SparseShiftRows(dst, img, left, right, ld, y, m, b, init, lo, hi, n, w, r, ldr, e, block)
							return dst
						}
						impl.Select("kernels", impl.Generic)
						want := run()
						impl.Reset("kernels")
						impl.ForEach("kernels", func(name string) {
							got := run()
							for i := range want {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s w=%d h=%d block=%d e=%d rows [%d, %d): value %d = %v, want %v", name, w, h, block, e, lo, hi, i, got[i], want[i])
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestSparseAffineRows checks SparseAffineRows against SparseRowsBlock
// and Affine (under the generic kernels) bit for bit under every
// implementation: 1 to 70 columns in blocks of 16 to 64, every epilogue,
// −0 and NaN among the sums, rows of dst apart by more than n (values
// between them not written).
func TestSparseAffineRows(t *testing.T) {
	const sentinel = 0x7fc01234 // a NaN no store produces
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 8, 16, 37, 64, 70} {
		for _, block := range []int{16, 48, 64} {
			const rows = 5
			rowPtr, off, val := randomCSR(rng, rows, 12, 300)
			m := NewCSR(rowPtr, off, val)
			b := randomSlice(rng, 300+n)
			b[3] = float32(math.NaN())
			init := randomSlice(rng, rows)
			init[1] = float32(math.Copysign(0, -1)) // −0 where row 1 has no terms
			ldd, ldr := n+3, n+5
			r := randomSlice(rng, rows*ldr)
			for _, e := range []Epilogue{Plain, ReLU, AddReLU} {
				for _, lohi := range [][2]int{{0, rows}, {1, 4}} {
					lo, hi := lohi[0], lohi[1]
					run := func() []float32 {
						dst := make([]float32, rows*ldd)
						for i := range dst {
							dst[i] = math.Float32frombits(sentinel)
						}
						SparseAffineRows(dst, ldd, m, b, init, lo, hi, n, r, ldr, e, block)
						return dst
					}
					// In place: the residual is dst itself (a block's
					// output written over its input).
					inPlace := func() []float32 {
						dst := make([]float32, rows*ldd)
						for i := range dst {
							dst[i] = math.Float32frombits(sentinel)
						}
						for i := lo; i < hi; i++ {
							copy(dst[(i-lo)*ldd:(i-lo)*ldd+n], r[(i-lo)*ldr:])
						}
						SparseAffineRows(dst, ldd, m, b, init, lo, hi, n, dst, ldd, e, block)
						return dst
					}
					impl.Select("kernels", impl.Generic)
					want := run()
					// The contract: SparseRowsBlock's sums, then Affine.
					sums := make([]float32, rows*n)
					SparseRowsBlock(sums, n, n, m, b, init, lo, hi, 0, block)
					for i := range hi - lo {
						var rr []float32
						if e == AddReLU {
							rr = r[i*ldr : i*ldr+n]
						}
						ref := make([]float32, n)
						Affine(ref, sums[i*n:], rr, 0, 1, 0, e)
						for j, v := range ref {
							if got := want[i*ldd+j]; math.Float32bits(got) != math.Float32bits(v) {
								t.Fatalf("generic n=%d block=%d e=%d rows [%d, %d): row %d column %d = %v, SparseRowsBlock and Affine %v", n, block, e, lo, hi, i, j, got, v)
							}
						}
					}
					impl.Reset("kernels")
					impl.ForEach("kernels", func(name string) {
						for how, f := range map[string]func() []float32{"": run, " in place": inPlace} {
							got := f()
							for i := range want {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s%s n=%d block=%d e=%d rows [%d, %d): value %d = %v, want %v", name, how, n, block, e, lo, hi, i, got[i], want[i])
								}
							}
						}
					})
				}
			}
		}
	}
}
