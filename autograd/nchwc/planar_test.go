package nchwc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
				x, wt, bias, f, in := randSparseConv(rng, tc.cin, tc.cout, tc.h, tc.w, tc.k, tc.s, zeros)
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

// TestSparseConvParts checks SparseFilter.Block and StoreRows on parts of
// an output (bands of rows, runs of channels, both) into every layout,
// with and without residual: together they write the same bits as Rows
// and Store on the whole, padding included, and each part writes nothing
// but its own rows and zeros into the rows either side (a part's writes
// into a buffer of sentinels), and BlockStore the same bits in the same
// places as the two, under every implementation of the kernels.
func TestSparseConvParts(t *testing.T) {
	const sentinel = 0x7fc01234 // a NaN no store produces
	names, _ := impl.List("kernels")
	defer impl.Reset("kernels")
	for _, kernels := range append([]string{impl.Generic}, names...) {
		if !impl.Select("kernels", kernels) {
			continue
		}
		rng := rand.New(rand.NewPCG(9, 10))
		for _, tc := range []struct{ cin, cout, h, w, k, s int }{
			{16, 16, 32, 32, 3, 1}, {16, 32, 32, 32, 3, 2}, {32, 32, 16, 16, 3, 1}, {64, 52, 8, 8, 3, 1}, {6, 5, 12, 10, 1, 1},
		} {
			_, _, bias, f, in := randSparseConv(rng, tc.cin, tc.cout, tc.h, tc.w, tc.k, tc.s, 0.7)
			n, ho, wo := f.OutSize(), f.Ho, f.Wo
			// The residual in each layout with an image plane.
			resOf := map[Layout]*Planar{}
			for _, l := range []Layout{Shifted, Flat} {
				resOf[l] = NewPlanar(tc.cout, ho, wo, l)
				for c := range tc.cout {
					resOf[l].SetImage(c, randSlice(rng, n, 1))
				}
			}
			// Parts as bands of rows [r0, r1) by runs of channels [lo, hi).
			type part struct{ lo, hi, r0, r1 int }
			splits := map[string][]part{
				"rows/2":     {{0, tc.cout, 0, ho / 2 &^ 1}, {0, tc.cout, ho / 2 &^ 1, ho}},
				"rows/3":     {{0, tc.cout, 0, 2}, {0, tc.cout, 2, ho - 2}, {0, tc.cout, ho - 2, ho}},
				"rows/each2": nil,
				"channels/2": {{0, tc.cout / 2, 0, ho}, {tc.cout / 2, tc.cout, 0, ho}},
				"both":       {{0, tc.cout / 2, 0, 4}, {tc.cout / 2, tc.cout, 0, 4}, {0, tc.cout, 4, ho}},
			}
			for r := 0; r < ho; r += 2 {
				splits["rows/each2"] = append(splits["rows/each2"], part{0, tc.cout, r, min(r+2, ho)})
			}
			for _, l := range []Layout{Shifted, Split, Flat} {
				for _, ep := range []struct {
					r    *Planar
					relu bool
				}{{nil, true}, {nil, false}, {resOf[Shifted], true}, {resOf[Flat], true}} {
					r, relu := ep.r, ep.relu
					whole := NewPlanar(tc.cout, ho, wo, l)
					y := make([]float32, tc.cout*n)
					f.Rows(in, bias, y, 0, tc.cout)
					Store(whole, y, r, relu, 0, tc.cout)
					for name, parts := range splits {
						name := fmt.Sprintf("%s/%+v/layout %d/res %v relu %v/%s", kernels, tc, l, r != nil, relu, name)
						// The rows of each value of the layout (−1: none).
						ref := NewPlanar(tc.cout, ho, wo, l)
						rowOf := make([]int, len(ref.Data))
						for i := range rowOf {
							rowOf[i] = -1
						}
						for yy := range ho {
							for i := range ref.Data {
								ref.Data[i] = 0
							}
							one := make([]float32, tc.cout*n)
							for i := range one {
								one[i] = 1
							}
							StoreRows(ref, one, nil, false, 0, tc.cout, yy&^1, min(yy&^1+2, ho))
							for i, v := range ref.Data {
								if v == 1 && (rowOf[i] == -1) {
									rowOf[i] = yy &^ 1 // the pair of rows (Split's rule)
								}
							}
						}
						all := NewPlanar(tc.cout, ho, wo, l) // every part in turn
						for k, p := range parts {
							out := NewPlanar(tc.cout, ho, wo, l)
							for i := range out.Data {
								out.Data[i] = math.Float32frombits(sentinel)
							}
							y := make([]float32, tc.cout*n)
							f.Block(in, bias, y[p.lo*n:], p.lo, p.hi, p.r0*wo, p.r1*wo)
							y2 := slices.Clone(y) // StoreRows may change y
							StoreRows(out, y[p.lo*n:], r, relu, p.lo, p.hi, p.r0, p.r1)
							StoreRows(all, y2[p.lo*n:], r, relu, p.lo, p.hi, p.r0, p.r1)
							// BlockStore: the same bits in the same places.
							fused := NewPlanar(tc.cout, ho, wo, l)
							for i := range fused.Data {
								fused.Data[i] = math.Float32frombits(sentinel)
							}
							f.BlockStore(in, bias, make([]float32, tc.cout*n), fused, r, relu, p.lo, p.hi, p.r0, p.r1)
							for i, v := range out.Data {
								if math.Float32bits(fused.Data[i]) != math.Float32bits(v) {
									t.Fatalf("%s: part %d: BlockStore wrote %v at value %d, Block and StoreRows %v", name, k, fused.Data[i], i, v)
								}
							}
							for i, v := range out.Data {
								if math.Float32bits(v) == sentinel {
									continue
								}
								if inside := rowOf[i] >= p.r0&^1 && rowOf[i] < p.r1; !inside && v != 0 {
									t.Fatalf("%s: part %d (rows [%d, %d)) wrote %v at value %d (rows from %d)", name, k, p.r0, p.r1, v, i, rowOf[i])
								}
							}
						}
						for i, v := range whole.Data {
							if math.Float32bits(all.Data[i]) != math.Float32bits(v) {
								t.Fatalf("%s: value %d is %v after every part, the whole %v", name, i, all.Data[i], v)
							}
						}
					}
				}
			}
		}
	}
}

// TestCopyRows checks Planar.CopyRows in every layout and for every run
// of rows: the destination holds, in every plane, the image made of the
// source's rows in the run and its own elsewhere (as SetImage writes it).
func TestCopyRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, l := range []Layout{Flat, Shifted, Split} {
		for _, sz := range [][2]int{{8, 8}, {7, 5}, {16, 16}, {1, 3}} {
			h, w := sz[0], sz[1]
			src, dst := NewPlanar(3, h, w, l), NewPlanar(3, h, w, l)
			imgs := [2][]float32{randSlice(rng, 3*h*w, 1), randSlice(rng, 3*h*w, 1)}
			for c := range 3 {
				src.SetImage(c, imgs[0][c*h*w:(c+1)*h*w])
				dst.SetImage(c, imgs[1][c*h*w:(c+1)*h*w])
			}
			for r0 := range h {
				for r1 := r0; r1 <= h; r1++ {
					got := NewPlanar(3, h, w, l)
					copy(got.Data, dst.Data)
					got.CopyRows(src, r0, r1)
					want := NewPlanar(3, h, w, l)
					for c := range 3 {
						mixed := slices.Clone(imgs[1][c*h*w : (c+1)*h*w])
						copy(mixed[r0*w:r1*w], imgs[0][c*h*w+r0*w:c*h*w+r1*w])
						want.SetImage(c, mixed)
					}
					for i := range got.Data {
						if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
							t.Fatalf("layout %d %d×%d rows [%d, %d): value %d is %v, want %v", l, h, w, r0, r1, i, got.Data[i], want.Data[i])
						}
					}
				}
			}
		}
	}
}

// randSparseConv returns a random input image x, filters wt with about
// the fraction zeros of exact zeros and a bias, the sparse filter and
// its planar input.
func randSparseConv(rng *rand.Rand, cin, cout, h, w, k, s int, zeros float64) (x, wt, bias []float32, f *SparseFilter, in *Planar) {
	x = randSlice(rng, cin*h*w, 1)
	wt = randSlice(rng, cout*cin*k*k, 0.3)
	for i := range wt {
		if rng.Float64() < zeros {
			wt[i] = 0
		}
	}
	bias = randSlice(rng, cout, 0.5)
	f = PackSparse(wt, cout, cin, k, s, h, w)
	in = NewPlanar(cin, h, w, f.InLayout())
	for c := range cin {
		in.SetImage(c, x[c*h*w:(c+1)*h*w])
	}
	return x, wt, bias, f, in
}
