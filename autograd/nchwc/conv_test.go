package nchwc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// refConv is a plain NCHW convolution with float64 sums: k×k, stride s,
// padding (k-1)/2, then bias, residual and ReLU.
func refConv(x []float32, cin, h, w int, wt []float32, cout, k, s int, bias, res []float32, relu bool) []float32 {
	pad := (k - 1) / 2
	ho, wo := (h+2*pad-k)/s+1, (w+2*pad-k)/s+1
	y := make([]float32, cout*ho*wo)
	for co := 0; co < cout; co++ {
		for oy := 0; oy < ho; oy++ {
			for ox := 0; ox < wo; ox++ {
				var sum float64
				for ci := 0; ci < cin; ci++ {
					for ky := 0; ky < k; ky++ {
						for kx := 0; kx < k; kx++ {
							iy, ix := oy*s+ky-pad, ox*s+kx-pad
							if iy < 0 || iy >= h || ix < 0 || ix >= w {
								continue
							}
							sum += float64(x[(ci*h+iy)*w+ix]) * float64(wt[((co*cin+ci)*k+ky)*k+kx])
						}
					}
				}
				i := (co*ho+oy)*wo + ox
				sum += float64(bias[co])
				if res != nil {
					sum += float64(res[i])
				}
				if relu && sum < 0 {
					sum = 0
				}
				y[i] = float32(sum)
			}
		}
	}
	return y
}

func randSlice(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

// A convCase with img runs its input in NewImage's layout (blocks of 4
// channels for at most 4).
type convCase struct {
	cin, cout, h, w, k, s int
	img                   bool
}

var convCases = []convCase{
	{16, 16, 32, 32, 3, 1, false}, {32, 32, 16, 16, 3, 1, false}, {64, 64, 8, 8, 3, 1, false},
	{16, 32, 32, 32, 3, 2, false}, {16, 32, 32, 32, 1, 2, false}, {32, 64, 16, 16, 3, 2, false}, {32, 64, 16, 16, 1, 2, false},
	{16, 16, 5, 37, 3, 1, false}, {48, 16, 7, 9, 3, 2, false}, {32, 32, 3, 29, 1, 1, false}, {16, 48, 4, 1, 3, 1, false},
	// the stem: 4-channel input blocks
	{3, 16, 32, 32, 3, 1, true}, {3, 32, 7, 19, 3, 1, true}, {1, 16, 5, 5, 3, 1, true}, {3, 9, 6, 7, 3, 1, true},
	// channel counts that are not multiples of 16: tail blocks of input
	// and output channels (compacted networks)
	{64, 63, 8, 8, 3, 1, false}, {63, 64, 8, 8, 3, 1, false}, {16, 9, 32, 32, 3, 1, false}, {9, 16, 32, 32, 3, 1, false},
	{27, 30, 16, 16, 3, 1, false}, {22, 27, 16, 16, 3, 1, false}, {16, 22, 32, 32, 3, 2, false}, {16, 27, 32, 32, 1, 2, false},
	{27, 26, 16, 16, 3, 2, false}, {5, 27, 16, 16, 3, 1, false}, {3, 5, 7, 9, 3, 2, false}, {1, 1, 4, 5, 1, 1, false},
	{40, 33, 5, 13, 3, 1, false}, {33, 40, 9, 6, 1, 2, false}, {17, 17, 3, 3, 3, 1, false}, {12, 20, 32, 32, 3, 1, true},
	// last blocks of at most 8 channels (the half kernels), one or two
	// blocks wide, every stride and filter size, the stem
	{16, 7, 8, 8, 3, 1, false}, {9, 1, 5, 6, 3, 2, false}, {20, 20, 8, 8, 3, 1, false}, {17, 24, 6, 7, 1, 1, false},
	{33, 17, 9, 9, 3, 2, false}, {63, 33, 8, 8, 3, 1, false}, {7, 40, 6, 6, 3, 1, false}, {20, 9, 7, 7, 1, 2, false},
	{3, 7, 8, 9, 3, 1, true}, {1, 1, 3, 2, 3, 1, true},
}

// TestConv checks Conv, under every implementation, against refConv and
// the implementations against each other bit for bit; and that the
// output's border stays zero.
func TestConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range convCases {
		x := randSlice(rng, tc.cin*tc.h*tc.w, 1)
		wt := randSlice(rng, tc.cout*tc.cin*tc.k*tc.k, 1/math.Sqrt(float64(tc.cin*tc.k*tc.k)))
		bias := randSlice(rng, tc.cout, 0.5)
		f, in := PackFilter(wt, tc.cout, tc.cin, tc.k), NewAct(tc.cin, tc.h, tc.w)
		if tc.img {
			f, in = PackImageFilter(wt, tc.cout, tc.cin, tc.k), NewImage(tc.cin, tc.h, tc.w)
		}
		in.FromNCHW(x)
		ho, wo := f.OutSize(tc.h, tc.w, tc.s)
		resX := randSlice(rng, tc.cout*ho*wo, 1)
		res := NewAct(tc.cout, ho, wo)
		res.FromNCHW(resX)
		for _, withRes := range []bool{false, true} {
			for _, relu := range []bool{false, true} {
				var r *Act
				var rx []float32
				if withRes {
					r, rx = res, resX
				}
				want := refConv(x, tc.cin, tc.h, tc.w, wt, tc.cout, tc.k, tc.s, bias, rx, relu)
				var first []float32
				impl.ForEach("nchwc", func(name string) {
					t.Run(fmt.Sprintf("%v/res=%v/relu=%v/%s", tc, withRes, relu, name), func(t *testing.T) {
						out := NewAct(tc.cout, ho, wo)
						Conv(in, f, tc.s, bias, r, relu, out)
						got := make([]float32, len(want))
						out.ToNCHW(got)
						for i := range want {
							if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
								t.Fatalf("value %d: got %g, want %g", i, got[i], want[i])
							}
						}
						checkBorder(t, out)
						if first == nil {
							first = out.Data
						} else {
							sameBits(t, "under generic", out.Data, first)
						}
					})
				})
			}
		}
	}
}

// checkBorder fails t unless out's border pixels and the tail channels of
// its last block are zero.
func checkBorder(t *testing.T, out *Act) {
	t.Helper()
	ho, wo := out.H, out.W
	for i, v := range out.Data {
		c, rem := i%16, i/16
		xx, yy := rem%(wo+2), rem/(wo+2)%(ho+2)
		if (xx == 0 || yy == 0 || xx == wo+1 || yy == ho+1) && v != 0 {
			t.Fatalf("border pixel (%d, %d) channel %d is %g", yy, xx, c, v)
		}
		if b := rem / ((wo + 2) * (ho + 2)); 16*b+c >= out.C && math.Float32bits(v) != 0 {
			t.Fatalf("tail channel %d of pixel (%d, %d) is %g", 16*b+c, yy, xx, v)
		}
	}
}

// sameBits fails t unless got and want hold the same bits; what names
// want.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("value %d: %g (%x) here, %g (%x) %s", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]), what)
		}
	}
}

// TestConvSkip checks Conv with PackFilterSkip's filters, whose kernels
// skip the all-zero filter vectors, against Conv with PackFilter's on
// weights with zero vectors (whole 16- or 32-channel groups of an input
// channel at a tap: PackFilterSkip packs one block of 16 output channels
// at a time for the first where PackFilter packs two, and two for the
// second) and scattered zeros: the same values (==), bit for bit the
// same under every implementation; and ZeroVectors' count.
func TestConvSkip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range convCases {
		if tc.img {
			continue
		}
		for _, z := range []struct {
			frac float64
			cw   int
		}{{0, 16}, {0.6, 16}, {0.6, 32}, {1, 16}} {
			frac, cw := z.frac, z.cw
			wt := randSlice(rng, tc.cout*tc.cin*tc.k*tc.k, 1/math.Sqrt(float64(tc.cin*tc.k*tc.k)))
			for co0 := 0; co0 < tc.cout; co0 += cw {
				for ci := 0; ci < tc.cin; ci++ {
					for tap := 0; tap < tc.k*tc.k; tap++ {
						if rng.Float64() >= frac {
							continue
						}
						for co := co0; co < min(co0+cw, tc.cout); co++ {
							wt[(co*tc.cin+ci)*tc.k*tc.k+tap] = 0
						}
					}
				}
			}
			for i := range wt {
				if rng.Float64() < 0.3 {
					wt[i] = 0
				}
			}
			dense := PackFilter(wt, tc.cout, tc.cin, tc.k)
			f := PackFilterSkip(wt, tc.cout, tc.cin, tc.k, tc.h, tc.w)
			if wantFB := dense.FB; frac > 0 && frac < 1 && cw == 16 && wantFB == 2 {
				if f.FB != 1 {
					t.Fatalf("%v: 16-channel zero vectors packed %d blocks wide, want 1", tc, f.FB)
				}
			} else if tc.cout%32 == 0 && f.FB != wantFB { // (a padded block's zeros may favour one block)
				t.Fatalf("%v zeros %g of %d channels: packed %d blocks wide, PackFilter %d", tc, frac, cw, f.FB, wantFB)
			}
			// The zero vectors of f's width, counted on the weights.
			zw, nw := 0, 0
			fw := 16 * f.FB
			for co0 := 0; co0 < f.PaddedCout(); co0 += fw {
				for ci := 0; ci < (tc.cin+15)/16*16; ci++ {
					for tap := 0; tap < tc.k*tc.k; tap++ {
						nw++
						zero := true
						for co := co0; co < min(co0+fw, tc.cout); co++ {
							if ci < tc.cin && wt[(co*tc.cin+ci)*tc.k*tc.k+tap] != 0 {
								zero = false
							}
						}
						if zero {
							zw++
						}
					}
				}
			}
			z, n := f.ZeroVectors()
			if z != zw || n != nw {
				t.Fatalf("%v: ZeroVectors %d of %d, counted %d of %d", tc, z, n, zw, nw)
			}
			if frac == 1 && z != n {
				t.Fatalf("%v: %d of %d vectors zero, want all", tc, z, n)
			}
			x := randSlice(rng, tc.cin*tc.h*tc.w, 1)
			bias := randSlice(rng, tc.cout, 0.5)
			in := NewAct(tc.cin, tc.h, tc.w)
			in.FromNCHW(x)
			ho, wo := f.OutSize(tc.h, tc.w, tc.s)
			res := NewAct(tc.cout, ho, wo)
			res.FromNCHW(randSlice(rng, tc.cout*ho*wo, 1))
			want := NewAct(tc.cout, ho, wo)
			Conv(in, dense, tc.s, bias, res, true, want)
			var first []float32
			impl.ForEach("nchwc", func(name string) {
				out := NewAct(tc.cout, ho, wo)
				Conv(in, f, tc.s, bias, res, true, out)
				for i := range want.Data {
					if out.Data[i] != want.Data[i] {
						t.Fatalf("%v zeros %g %s: value %d: %g skipping, %g dense", tc, frac, name, i, out.Data[i], want.Data[i])
					}
				}
				if first == nil {
					first = out.Data
					return
				}
				for i := range first {
					if math.Float32bits(first[i]) != math.Float32bits(out.Data[i]) {
						t.Fatalf("%v zeros %g: value %d: %s %g, generic %g", tc, frac, i, name, out.Data[i], first[i])
					}
				}
			})
		}
	}
}

// TestConvHalf checks the kernels that compute a last block of at most 8
// output channels 8 wide (Filter.half) against the full kernels: the same
// filters and bias with zero channels appended up to a whole block give
// the same values bit for bit in the channels they share, under every
// implementation, for dense and skipping filters, and the tail's lanes
// are +0; such filters are packed one block wide (groupWidth).
func TestConvHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	n := 0
	for _, tc := range convCases {
		coutP := (tc.cout + 15) / 16 * 16
		if tc.cout%16 == 0 || tc.cout%16 > 8 {
			continue
		}
		n++
		wt := randSlice(rng, tc.cout*tc.cin*tc.k*tc.k, 1/math.Sqrt(float64(tc.cin*tc.k*tc.k)))
		for i := range wt {
			if rng.Float64() < 0.3 {
				wt[i] = 0
			}
		}
		wp := make([]float32, coutP*tc.cin*tc.k*tc.k) // zero filters appended
		copy(wp, wt)
		bias := randSlice(rng, tc.cout, 0.5)
		x := randSlice(rng, tc.cin*tc.h*tc.w, 1)
		newIn := NewAct
		pack, packP := PackFilter(wt, tc.cout, tc.cin, tc.k), PackFilter(wp, coutP, tc.cin, tc.k)
		if tc.img {
			newIn = NewImage
			pack, packP = PackImageFilter(wt, tc.cout, tc.cin, tc.k), PackImageFilter(wp, coutP, tc.cin, tc.k)
		}
		in := newIn(tc.cin, tc.h, tc.w)
		in.FromNCHW(x)
		ho, wo := pack.OutSize(tc.h, tc.w, tc.s)
		if !pack.half((tc.cout+16*pack.FB-1)/(16*pack.FB) - 1) {
			t.Fatalf("%v: the last group is not computed 8 wide", tc)
		}
		if pack.FB != 1 {
			t.Fatalf("%v: a last block of %d channels packed %d blocks wide, want 1", tc, tc.cout%16, pack.FB)
		}
		resX := randSlice(rng, tc.cout*ho*wo, 1)
		res, resP := NewAct(tc.cout, ho, wo), NewAct(coutP, ho, wo)
		res.FromNCHW(resX)
		resP.FromNCHW(append(slices.Clone(resX), make([]float32, (coutP-tc.cout)*ho*wo)...))
		type variant struct {
			name    string
			f, full *Filter
		}
		vs := []variant{{"dense", pack, packP}}
		if !tc.img {
			vs = append(vs, variant{"skip", PackFilterSkip(wt, tc.cout, tc.cin, tc.k, tc.h, tc.w), PackFilterSkip(wp, coutP, tc.cin, tc.k, tc.h, tc.w)})
		}
		for _, v := range vs {
			for _, relu := range []bool{false, true} {
				impl.ForEach("nchwc", func(name string) {
					out, full := NewAct(tc.cout, ho, wo), NewAct(coutP, ho, wo)
					Conv(in, v.f, tc.s, bias, res, relu, out)
					Conv(in, v.full, tc.s, append(slices.Clone(bias), make([]float32, coutP-tc.cout)...), resP, relu, full)
					for i := range out.Data {
						c := i % 16
						if ch := i / out.BlockStride() * 16; ch+c >= tc.cout {
							if math.Float32bits(out.Data[i]) != 0 {
								t.Fatalf("%v %s relu %v %s: tail value %d is %g", tc, v.name, relu, name, i, out.Data[i])
							}
							continue
						}
						if math.Float32bits(out.Data[i]) != math.Float32bits(full.Data[i]) {
							t.Fatalf("%v %s relu %v %s: value %d: %g 8 wide, %g in a full block", tc, v.name, relu, name, i, out.Data[i], full.Data[i])
						}
					}
				})
			}
		}
	}
	if n < 10 {
		t.Fatalf("%d cases with a last block of at most 8 channels", n)
	}
}

// TestShortcutA checks ShortcutA against the definition.
func TestShortcutA(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct{ cin, cout, hw int }{{16, 32, 32}, {32, 64, 16}, {16, 16, 7}, {9, 27, 9}, {27, 30, 16}} {
		x := randSlice(rng, tc.cin*tc.hw*tc.hw, 1)
		src := NewAct(tc.cin, tc.hw, tc.hw)
		src.FromNCHW(x)
		for i := range src.Data { // ShortcutA must not copy src's tail channels
			if 16*(i/src.BlockStride())+i%16 >= tc.cin {
				src.Data[i] = 7
			}
		}
		h := (tc.hw + 1) / 2
		dst := NewAct(tc.cout, h, h)
		for i := range dst.Data {
			dst.Data[i] = 7 // ShortcutA must overwrite the interior
		}
		for b := 0; b < (tc.cout+15)/16; b++ { // and the border stays as it was: zero it
			for y := 0; y < h+2; y++ {
				for xx := 0; xx < h+2; xx++ {
					if y == 0 || xx == 0 || y == h+1 || xx == h+1 {
						clear(dst.Data[dst.off(b, y, xx) : dst.off(b, y, xx)+16])
					}
				}
			}
		}
		ShortcutA(dst, src)
		got := make([]float32, tc.cout*h*h)
		dst.ToNCHW(got)
		for c := 0; c < tc.cout; c++ {
			for y := 0; y < h; y++ {
				for xx := 0; xx < h; xx++ {
					var want float32
					if c < tc.cin {
						want = x[(c*tc.hw+2*y)*tc.hw+2*xx]
					}
					if g := got[(c*h+y)*h+xx]; g != want {
						t.Fatalf("%v: channel %d (%d, %d): got %g, want %g", tc, c, y, xx, g, want)
					}
				}
			}
		}
	}
}

// TestConvSkipOtherSize checks that Conv refuses an input of another size
// than the one PackFilterSkip packed the entries' offsets for.
func TestConvSkipOtherSize(t *testing.T) {
	w := make([]float32, 16*16*9)
	w[0] = 1
	f := PackFilterSkip(w, 16, 16, 3, 8, 8)
	in, out := NewAct(16, 8, 9), NewAct(16, 8, 9)
	defer func() {
		if recover() == nil {
			t.Fatal("Conv ran a filter packed for 8×8 pixels on 8×9")
		}
	}()
	Conv(in, f, 1, nil, nil, false, out)
}

// TestStripMax checks that every implementation runs strips as wide as
// its kernels allow: 16 and 12 pixels for one and two blocks (AVX-512 and
// the Go loop), 6 (AVX2).
func TestStripMax(t *testing.T) {
	impl.ForEach("nchwc", func(name string) {
		want := [2]int{16, 12}
		if name == "avx2" {
			want = [2]int{6, 6}
		}
		for fb := 1; fb <= 2; fb++ {
			if got := stripMax(fb); got != want[fb-1] {
				t.Errorf("%s: stripMax(%d) = %d, want %d", name, fb, got, want[fb-1])
			}
		}
	})
}
