package nchwc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/impl"
)

// winoCases are the shapes of TestWinograd: ResNet-20's three stride-1
// layers, then channels from 16 to 64 (tail blocks included) on sizes from
// 4 to 32, odd ones among them, and some below.
var winoCases = []struct{ cin, cout, h, w int }{
	{16, 16, 32, 32}, {32, 32, 16, 16}, {64, 64, 8, 8},
	{16, 32, 9, 7}, {48, 16, 5, 31}, {64, 63, 8, 8}, {63, 64, 7, 8}, {17, 40, 11, 13},
	{33, 47, 4, 4}, {20, 64, 32, 5}, {64, 16, 13, 32}, {16, 48, 1, 6}, {5, 9, 3, 1}, {1, 1, 1, 1},
}

// TestWinograd checks Winograd, under every implementation, against Conv
// on the same filters (a tolerance for float32 rounding) and against the
// float64 reference; the implementations against each other bit for bit;
// WinogradRows in bands against the whole, bit for bit; and that the
// output's border and tail channels stay zero.
func TestWinograd(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range winoCases {
		x := randSlice(rng, tc.cin*tc.h*tc.w, 1)
		wt := randSlice(rng, tc.cout*tc.cin*9, 1/math.Sqrt(float64(tc.cin*9)))
		bias := randSlice(rng, tc.cout, 0.5)
		f, wf, in := PackFilter(wt, tc.cout, tc.cin, 3), PackWinograd(wt, tc.cout, tc.cin), NewAct(tc.cin, tc.h, tc.w)
		in.FromNCHW(x)
		resX := randSlice(rng, tc.cout*tc.h*tc.w, 1)
		res := NewAct(tc.cout, tc.h, tc.w)
		res.FromNCHW(resX)
		for _, withRes := range []bool{false, true} {
			for _, relu := range []bool{false, true} {
				var r *Act
				var rx []float32
				if withRes {
					r, rx = res, resX
				}
				ref := refConv(x, tc.cin, tc.h, tc.w, wt, tc.cout, 3, 1, bias, rx, relu)
				var first []float32
				impl.ForEach("nchwc", func(name string) {
					t.Run(fmt.Sprintf("%v/res=%v/relu=%v/%s", tc, withRes, relu, name), func(t *testing.T) {
						direct, out := NewAct(tc.cout, tc.h, tc.w), NewAct(tc.cout, tc.h, tc.w)
						Conv(in, f, 1, bias, r, relu, direct)
						Winograd(in, wf, bias, r, relu, out)
						got, want := make([]float32, len(ref)), make([]float32, len(ref))
						out.ToNCHW(got)
						direct.ToNCHW(want)
						for i := range want {
							if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
								t.Fatalf("value %d: got %g, Conv %g", i, got[i], want[i])
							}
							if d := math.Abs(float64(got[i] - ref[i])); d > 1e-4*(1+math.Abs(float64(ref[i]))) {
								t.Fatalf("value %d: got %g, float64 reference %g", i, got[i], ref[i])
							}
						}
						checkBorder(t, out)
						// Bands of 2, 4 and 6 rows: the same bits.
						for _, band := range []int{2, 4, 6} {
							parts := NewAct(tc.cout, tc.h, tc.w)
							for y := 0; y < tc.h; y += band {
								WinogradRows(in, wf, bias, r, relu, parts, y, min(y+band, tc.h))
							}
							WinogradRows(in, wf, bias, r, relu, parts, tc.h, tc.h) // empty, as nn/infer's last bands may be
							sameBits(t, fmt.Sprintf("in bands of %d rows", band), out.Data, parts.Data)
						}
						if first == nil {
							first = out.Data
							return
						}
						sameBits(t, "under generic", out.Data, first)
					})
				})
			}
		}
	}
}

// TestWinoTransforms checks the assembly transforms against the Go loops
// on values with NaNs, infinities and negative zeros among them: the same
// bits.
func TestWinoTransforms(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}
	fill := func(v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if rng.IntN(20) == 0 {
				v[i] = special[rng.IntN(len(special))]
			}
		}
	}
	const n, rs, xs = 5, 400, 100
	src := make([]float32, 3*rs+n*32+64)
	m, bias, res := make([]float32, 16*xs), make([]float32, 16), make([]float32, rs+n*32+32)
	fill(src)
	fill(m)
	fill(bias)
	fill(res)
	for _, relu := range []bool{false, true} {
		for _, withRes := range []bool{false, true} {
			var first [2][]float32
			impl.ForEach("nchwc", func(name string) {
				v := make([]float32, 16*xs)
				winoIn(src, 0, rs, n, v, 4, xs)
				out := make([]float32, len(res))
				var r []float32
				if withRes {
					r = res
				}
				winoOut(m, 0, xs, n, bias, r, out, 0, rs, relu)
				if first[0] == nil {
					first = [2][]float32{v, out}
					return
				}
				sameBits(t, name+": input transform, under generic", v, first[0])
				sameBits(t, name+": output transform, under generic", out, first[1])
			})
		}
	}
}

// BenchmarkWinogradParts times the three steps of Winograd (input
// transform, the 16 products, output transform with bias and ReLU) on
// ResNet-20's stride-1 layers, one thread, the whole image as bands.
func BenchmarkWinogradParts(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, l := range winoCases[:3] {
		wt := randSlice(rng, l.cout*l.cin*9, 1/math.Sqrt(float64(l.cin*9)))
		wf, in, out := PackWinograd(wt, l.cout, l.cin), NewAct(l.cin, l.h, l.w), NewAct(l.cout, l.h, l.w)
		in.FromNCHW(randSlice(rng, l.cin*l.h*l.w, 1))
		th, tw := (l.h+1)/2, (l.w+1)/2
		rows := max(1, (winoTarget+tw-1)/tw)
		n := rows * tw
		ncib, ncob := (l.cin+15)/16, (l.cout+15)/16
		v, m := make([]float32, 16*winoStride(ncib, n)), make([]float32, 16*winoStride(ncob, n))
		pb := wf.PaddedCout()
		bias := make([]float32, pb)
		name := fmt.Sprintf("%dch_%dpx", l.cin, l.h)
		b.Run(name+"/input", func(b *testing.B) {
			for range b.N {
				for t0 := 0; t0 < th; t0 += rows {
					winoInput(in, v, t0, min(t0+rows, th))
				}
			}
		})
		b.Run(name+"/products", func(b *testing.B) {
			for range b.N {
				for t0 := 0; t0 < th; t0 += rows {
					winoProducts(wf, v, m, (min(t0+rows, th)-t0)*tw)
				}
			}
		})
		b.Run(name+"/output", func(b *testing.B) {
			for range b.N {
				for t0 := 0; t0 < th; t0 += rows {
					winoOutput(m, nil, (min(t0+rows, th)-t0)*tw, bias, nil, true, out, t0, min(t0+rows, th))
				}
			}
		})
	}
}

// TestProducts checks the product kernels of Winograd (products: several
// 1×1 products per call, the sums stored as they are) under every
// implementation against Conv's kernel (kernel, zero bias) called once per
// product, bit for bit: one and two blocks, full and 8-wide last blocks,
// every strip width, full input blocks and tails, and lanes 8-15 of a half
// block zero. Inputs and filters have no zeros, so no sum is -0, which
// adding the zero bias would turn into +0.
func TestProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	type shape struct{ ncib, ct, nxi int }
	shapes := []shape{{1, 0, 1}, {0, 9, 3}, {2, 5, 2}, {1, 15, 4}, {3, 0, 2}}
	impl.ForEach("nchwc", func(name string) {
		for fb := 1; fb <= 2; fb++ {
			for _, half := range []bool{false, true} {
				for p := 1; p <= stripMax(fb); p++ {
					for _, sh := range shapes {
						nb := sh.ncib
						if sh.ct > 0 {
							nb++
						}
						inBS, outBS := p*16+16, p*16+32 // gaps between blocks, to catch a wrong stride
						inXS, wXS, outXS := nb*inBS+48, nb*16*16*fb+32, fb*outBS+16
						in := randSlice(rng, 8+sh.nxi*inXS, 1)
						w := randSlice(rng, 16+sh.nxi*wXS, 1)
						for _, s := range [][]float32{in, w} {
							for i, v := range s {
								if v == 0 {
									s[i] = 0.5
								}
							}
						}
						got, want := make([]float32, 4+sh.nxi*outXS), make([]float32, 4+sh.nxi*outXS)
						for i := range got {
							got[i], want[i] = -7, -7 // values not written stay
						}
						products(fb, p, half, in, 8, inBS, inXS, sh.ncib, sh.ct, w, 16, wXS, got, 4, outBS, outXS, sh.nxi)
						for x := range sh.nxi {
							kernel(16, fb, p, 1, half, in, 8+x*inXS, inBS, 0, sh.ncib, sh.ct, 1, 1, w, 16+x*wXS, zeroBias[:16*fb], nil, want, 4+x*outXS, outBS, false)
						}
						what := fmt.Sprintf("%s: fb %d half %v p %d %+v", name, fb, half, p, sh)
						sameBits(t, what, got, want)
						if half {
							for x := range sh.nxi {
								for q := range p {
									o := 4 + x*outXS + (fb-1)*outBS + q*16
									for l := 8; l < 16; l++ {
										if math.Float32bits(got[o+l]) != 0 {
											t.Fatalf("%s: product %d pixel %d lane %d is %g, not zero", what, x, q, l, got[o+l])
										}
									}
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestPackWinogradInto checks that the transformed filters are packed as
// PackFilter packs each matrix U_ξ as a 1×1 filter (kernels.WinogradFilter
// per filter), whatever buf held before, and that PackWinograd packs the
// same.
func TestPackWinogradInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []struct{ cout, cin int }{{16, 16}, {32, 16}, {5, 3}, {40, 24}, {64, 64}, {17, 33}} {
		w := make([]float32, s.cout*s.cin*9)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		buf := make([]float32, WinogradSize(s.cout, s.cin)+5)
		for i := range buf {
			buf[i] = float32(i) // stale values
		}
		f := PackWinogradInto(w, s.cout, s.cin, buf)
		g := PackWinograd(w, s.cout, s.cin)
		u := make([]float32, s.cout*s.cin)
		var tr [16]float32
		for xi := range 16 {
			for i := range u {
				kernels.WinogradFilter(tr[:], 1, w[i*9:i*9+9], false)
				u[i] = tr[xi]
			}
			want := PackFilter(u, s.cout, s.cin, 1)
			if f.FB != want.FB || f.size != len(want.Data) {
				t.Fatalf("%d×%d: FB %d, %d values per matrix, want %d, %d", s.cout, s.cin, f.FB, f.size, want.FB, len(want.Data))
			}
			for i, v := range want.Data {
				if f.u[xi*f.size+i] != v || g.u[xi*g.size+i] != v {
					t.Fatalf("%d×%d: U_%d value %d = %g (PackWinograd %g), want %g", s.cout, s.cin, xi, i, f.u[xi*f.size+i], g.u[xi*g.size+i], v)
				}
			}
		}
	}
}

// TestWinogradZeroBlocks checks the filters of PackWinograd whose blocks
// of 16 output channels have zero filters alone (the skipped products) or
// zero filters in channels 8-15 (computed 8 wide) against
// PackWinogradInto's, which computes them: the same values bit for bit,
// under every implementation, with and without residual and ReLU, whole
// and in bands of rows; that the skipped blocks and lanes are counted
// (ZeroBlocks, MACs); and that a filter with none of them packs as
// PackWinogradInto does.
func TestWinogradZeroBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		cin, cout, h, w int
		zero, upper     []int // blocks of zero filters, of zero filters in channels 8-15
	}{
		{12, 27, 16, 16, []int{1}, nil}, {27, 30, 8, 8, []int{0}, []int{1}}, {16, 40, 9, 7, []int{0, 2}, nil}, {5, 21, 6, 6, []int{1}, nil},
		{20, 16, 4, 5, []int{0}, nil}, {16, 32, 8, 8, nil, nil}, {5, 27, 16, 16, nil, []int{1}}, {10, 48, 5, 8, nil, []int{0, 2}}, {9, 21, 4, 4, nil, nil},
	} {
		wt := randSlice(rng, tc.cout*tc.cin*9, 1/math.Sqrt(float64(tc.cin*9)))
		for i := range wt {
			if rng.Float64() < 0.2 {
				wt[i] = 0 // scattered zeros too
			}
		}
		for _, b := range tc.zero {
			clear(wt[16*b*tc.cin*9 : min(16*(b+1), tc.cout)*tc.cin*9])
		}
		for _, b := range tc.upper {
			clear(wt[(16*b+8)*tc.cin*9 : min(16*(b+1), tc.cout)*tc.cin*9])
		}
		wf := PackWinograd(wt, tc.cout, tc.cin)
		all := PackWinogradInto(wt, tc.cout, tc.cin, make([]float32, WinogradSize(tc.cout, tc.cin)))
		if wf.ZeroBlocks() != len(tc.zero) || all.ZeroBlocks() != 0 {
			t.Fatalf("%v: %d and %d zero blocks", tc, wf.ZeroBlocks(), all.ZeroBlocks())
		}
		if special := len(tc.zero) + len(tc.upper); special == 0 && wf.FB != all.FB || special > 0 && wf.FB != 1 {
			t.Fatalf("%v: packed %d blocks wide (PackWinogradInto %d)", tc, wf.FB, all.FB)
		}
		tiles := (tc.h + 1) / 2 * ((tc.w + 1) / 2)
		lanes := 0
		for b := range (tc.cout + 15) / 16 {
			switch {
			case slices.Contains(tc.zero, b):
			case slices.Contains(tc.upper, b) || tc.cout-16*b <= 8:
				lanes += 8
			default:
				lanes += 16
			}
		}
		if got, want := wf.MACs(tc.h, tc.w), 16*tc.cin*tiles*lanes; got != want {
			t.Fatalf("%v: MACs %d, want %d", tc, got, want)
		}
		in := NewAct(tc.cin, tc.h, tc.w)
		in.FromNCHW(randSlice(rng, tc.cin*tc.h*tc.w, 1))
		res := NewAct(tc.cout, tc.h, tc.w)
		res.FromNCHW(randSlice(rng, tc.cout*tc.h*tc.w, 1))
		bias := randSlice(rng, tc.cout, 0.5)
		for _, r := range []*Act{nil, res} {
			for _, relu := range []bool{false, true} {
				impl.ForEach("nchwc", func(name string) {
					want, got := NewAct(tc.cout, tc.h, tc.w), NewAct(tc.cout, tc.h, tc.w)
					Winograd(in, all, bias, r, relu, want)
					Winograd(in, wf, bias, r, relu, got)
					sameBits(t, fmt.Sprintf("%v res %v relu %v %s", tc, r != nil, relu, name), got.Data, want.Data)
					parts := NewAct(tc.cout, tc.h, tc.w)
					for y := 0; y < tc.h; y += 4 {
						WinogradRows(in, wf, bias, r, relu, parts, y, min(y+4, tc.h))
					}
					sameBits(t, fmt.Sprintf("%v res %v relu %v %s in bands", tc, r != nil, relu, name), parts.Data, want.Data)
					checkBorder(t, got)
				})
			}
		}
	}
}
