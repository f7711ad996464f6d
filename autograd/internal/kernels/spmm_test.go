package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// randomCSR returns a rows-row sparse matrix whose rows have between 0 and
// maxNNZ terms with offsets in [0, maxOff].
func randomCSR(rng *rand.Rand, rows, maxNNZ, maxOff int) (rowPtr []int32, off []int, val []float32) {
	rowPtr = []int32{0}
	for range rows {
		k := rng.IntN(maxNNZ + 1)
		row := make([]int, k)
		for j := range row {
			row[j] = rng.IntN(maxOff + 1)
			val = append(val, float32(rng.NormFloat64()))
		}
		slices.Sort(row)
		off = append(off, row...)
		rowPtr = append(rowPtr, int32(len(off)))
	}
	return rowPtr, off, val
}

func randomSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestSparseRowsMatchesGo checks the assembly kernel against the Go loop
// bit for bit for all widths up to 150 (every block size and tail) and some across
// column blocks, with and without offset windows, on misaligned slices.
func TestSparseRowsMatchesGo(t *testing.T) {
	if !spmmAsm {
		t.Log("no assembly kernel: the Go loop is compared with itself")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	widths := []int{256, 257, 300, 520}
	for n := 1; n <= 150; n++ {
		widths = append(widths, n)
	}
	for _, n := range widths {
		for _, shift := range []int{0, 1, 5} {
			span := []int{0, 37, 100}[shift%3]
			const rows, ldd = 5, 530
			rowPtr, off, val := randomCSR(rng, rows, 9, 300)
			b := randomSlice(rng, 300+n+shift)[shift:]
			start := randomSlice(rng, rows*ldd+shift)[shift:]
			for _, init := range [][]float32{nil, randomSlice(rng, rows)} {
				var g []float32
				impl.ForEach("kernels", func(name string) {
					d := append([]float32(nil), start...)
					SparseRows(d, ldd, n, NewCSR(rowPtr, off, val), b, init, 1, rows, span)
					if name == impl.Generic {
						g = d
						return
					}
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(d[i]) {
							t.Fatalf("n=%d shift=%d init=%v: element %d: Go %v, %s %v", n, shift, init != nil, i, g[i], name, d[i])
						}
					}
				})
			}
		}
	}
}

// TestRowsValues checks Rows against a float64 reference of the sum.
func TestRowsValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 8, 33, 64, 100, 257} {
		const rows = 4
		rowPtr, off, val := randomCSR(rng, rows, 20, 500)
		b := randomSlice(rng, 500+n)
		for _, init := range [][]float32{nil, randomSlice(rng, rows)} {
			dst := randomSlice(rng, rows*n)
			want := make([]float64, len(dst))
			for i := range rows {
				for j := range n {
					s := float64(dst[i*n+j])
					if init != nil {
						s = float64(init[i])
					}
					for p := rowPtr[i]; p < rowPtr[i+1]; p++ {
						s += float64(val[p]) * float64(b[off[p]+j])
					}
					want[i*n+j] = s
				}
			}
			SparseRows(dst, n, n, NewCSR(rowPtr, off, val), b, init, 0, rows, 64)
			for i, w := range want {
				if math.Abs(float64(dst[i])-w) > 1e-4*(1+math.Abs(w)) {
					t.Fatalf("n=%d init=%v: element %d = %v, want %v", n, init != nil, i, dst[i], w)
				}
			}
		}
	}
}

// TestRowsUnsortedWithoutWindows checks that without offset windows (span
// 0) a row's offsets may come in any order: each element adds its terms
// in order t, so the result equals the Go loop's on the same order.
func TestRowsUnsortedWithoutWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, n = 5, 77
	rowPtr, off, val := randomCSR(rng, rows, 30, 400)
	for i := range rows {
		p, q := rowPtr[i], rowPtr[i+1]
		rng.Shuffle(int(q-p), func(a, b int) {
			off[int(p)+a], off[int(p)+b] = off[int(p)+b], off[int(p)+a]
			val[int(p)+a], val[int(p)+b] = val[int(p)+b], val[int(p)+a]
		})
	}
	b := randomSlice(rng, 400+n)
	init := randomSlice(rng, rows*n)
	var g []float32
	impl.ForEach("kernels", func(name string) {
		d := append([]float32(nil), init...)
		SparseRows(d, n, n, NewCSR(rowPtr, off, val), b, nil, 0, rows, 0)
		if name == impl.Generic {
			g = d
			for i := range rows {
				for j := range n {
					s := init[i*n+j]
					for p := rowPtr[i]; p < rowPtr[i+1]; p++ {
						s = FMA32(val[p], b[off[p]+j], s)
					}
					if math.Float32bits(s) != math.Float32bits(d[i*n+j]) {
						t.Fatalf("row %d column %d: %v, want %v (terms in order)", i, j, d[i*n+j], s)
					}
				}
			}
			return
		}
		if !slices.Equal(g, d) {
			t.Fatalf("%s differs from the Go loop", name)
		}
	})
}

// TestRowsChecksBounds checks that offsets or rows outside the buffers
// panic instead of reading or writing out of bounds.
func TestRowsChecksBounds(t *testing.T) {
	for name, f := range map[string]func(){
		"offset": func() {
			SparseRows(make([]float32, 8), 8, 8, NewCSR([]int32{0, 1}, []int{3}, []float32{1}), make([]float32, 10), nil, 0, 1, 0)
		},
		"negative offset": func() {
			SparseRows(make([]float32, 8), 8, 8, NewCSR([]int32{0, 1}, []int{-1}, []float32{1}), make([]float32, 10), nil, 0, 1, 0)
		},
		"dst": func() {
			SparseRows(make([]float32, 8), 8, 8, NewCSR([]int32{0, 1, 2}, []int{0, 0}, []float32{1, 1}), make([]float32, 10), nil, 0, 2, 0)
		},
		"decreasing offsets with windows": func() {
			SparseRows(make([]float32, 8), 8, 1, NewCSR([]int32{0, 2}, []int{3, 1}, []float32{1, 1}), make([]float32, 10), nil, 0, 1, 4)
		},
		"init": func() {
			SparseRows(make([]float32, 16), 8, 8, NewCSR([]int32{0, 1, 2}, []int{0, 0}, []float32{1, 1}), make([]float32, 10), []float32{1}, 0, 2, 0)
		},
		"row pointers": func() {
			SparseRows(make([]float32, 8), 8, 8, NewCSR([]int32{0, 2}, []int{0}, []float32{1}), make([]float32, 10), nil, 0, 1, 0)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, n, k = 64, 1024, 576
	rowPtr, off, val := randomCSR(rng, rows, k/10, (k-1)*n)
	for i := range off {
		off[i] = off[i] / n * n
	}
	src := randomSlice(rng, k*n)
	dst := make([]float32, rows*n)
	m := NewCSR(rowPtr, off, val)
	b.SetBytes(int64(len(val) * n * 4))
	for b.Loop() {
		SparseRows(dst, n, n, m, src, nil, 0, rows, 128*n)
	}
}

// TestBlockingKeepsResults checks the claim of Rows that offset windows
// and column blocks do not change any bit of the result.
func TestBlockingKeepsResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, n = 6, 700
	rowPtr, off, val := randomCSR(rng, rows, 40, 2000)
	// Row 2 without terms.
	p, q := rowPtr[2], rowPtr[3]
	off = slices.Delete(off, int(p), int(q))
	val = slices.Delete(val, int(p), int(q))
	for i := 3; i <= rows; i++ {
		rowPtr[i] -= q - p
	}
	b := randomSlice(rng, 2000+n)
	// The first result: dst filled with init, then every term added.
	init := randomSlice(rng, rows)
	first := make([]float32, rows*n)
	for i := range rows {
		for j := range n {
			first[i*n+j] = init[i]
		}
	}
	SparseRows(first, n, n, NewCSR(rowPtr, off, val), b, nil, 0, rows, 0)
	for _, span := range []int{0, 1, 13, 256, 5000} {
		for _, withInit := range []bool{false, true} {
			d := make([]float32, rows*n)
			if withInit {
				for i := range d {
					d[i] = float32(math.NaN()) // not read
				}
				SparseRows(d, n, n, NewCSR(rowPtr, off, val), b, init, 0, rows, span)
			} else {
				for i := range d {
					d[i] = init[i/n]
				}
				SparseRows(d, n, n, NewCSR(rowPtr, off, val), b, nil, 0, rows, span)
			}
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(first[i]) {
					t.Fatalf("span %d, init %v: element %d = %v, without windows %v", span, withInit, i, d[i], first[i])
				}
			}
		}
	}
	// Other column blocks (SparseRowsBlock), with one window and with
	// several.
	for _, block := range []int{16, 64, 112, 256} {
		for _, span := range []int{0, 13} {
			d := make([]float32, rows*n)
			SparseRowsBlock(d, n, n, NewCSR(rowPtr, off, val), b, init, 0, rows, span, block)
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(first[i]) {
					t.Fatalf("block %d, span %d: element %d = %v, SparseRows %v", block, span, i, d[i], first[i])
				}
			}
		}
	}
}
