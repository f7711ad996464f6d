package nchwc

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
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

type convCase struct{ cin, cout, h, w, k, s int }

var convCases = []convCase{
	{16, 16, 32, 32, 3, 1}, {32, 32, 16, 16, 3, 1}, {64, 64, 8, 8, 3, 1},
	{16, 32, 32, 32, 3, 2}, {16, 32, 32, 32, 1, 2}, {32, 64, 16, 16, 3, 2}, {32, 64, 16, 16, 1, 2},
	{16, 16, 5, 37, 3, 1}, {48, 16, 7, 9, 3, 2}, {32, 32, 3, 29, 1, 1}, {16, 48, 4, 1, 3, 1},
	{3, 16, 32, 32, 3, 1}, {3, 32, 7, 19, 3, 1}, {1, 16, 5, 5, 3, 1}, // the stem: 4-channel input blocks
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
		f := PackFilter(wt, tc.cout, tc.cin, tc.k)
		in := NewAct(tc.cin, tc.h, tc.w)
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
						for i, v := range out.Data {
							c, rem := i%16, i/16
							xx, yy := rem%(wo+2), rem/(wo+2)%(ho+2)
							if (xx == 0 || yy == 0 || xx == wo+1 || yy == ho+1) && v != 0 {
								t.Fatalf("border pixel (%d, %d) channel %d is %g", yy, xx, c, v)
							}
						}
						if first == nil {
							first = out.Data
						} else {
							for i := range first {
								if math.Float32bits(first[i]) != math.Float32bits(out.Data[i]) {
									t.Fatalf("value %d: %g (%x) here, %g (%x) under generic", i,
										out.Data[i], math.Float32bits(out.Data[i]), first[i], math.Float32bits(first[i]))
								}
							}
						}
					})
				})
			}
		}
	}
}

// TestFMA32 checks fma32 against an exactly rounded a·b+c, on random
// values and on sums built to fall on float32 halfway points.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	for i := 0; i < 200000; i++ {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		var c float32
		switch i % 3 {
		case 0:
			c = float32(rng.NormFloat64())
		case 1:
			// c cancels a·b's leading bits: its rounding bits matter.
			c = -float32(float64(a) * float64(b))
			c = math.Float32frombits(math.Float32bits(c) + uint32(rng.IntN(5)) - 2)
		case 2:
			// a·b + c near a float32 halfway point with tiny excess.
			c = float32(rng.NormFloat64()) * 1e4
		}
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}

// TestShortcutA checks ShortcutA against the definition.
func TestShortcutA(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct{ cin, cout, hw int }{{16, 32, 32}, {32, 64, 16}, {16, 16, 7}} {
		x := randSlice(rng, tc.cin*tc.hw*tc.hw, 1)
		src := NewAct(tc.cin, tc.hw, tc.hw)
		src.FromNCHW(x)
		h := (tc.hw + 1) / 2
		dst := NewAct(tc.cout, h, h)
		for i := range dst.Data {
			dst.Data[i] = 7 // ShortcutA must overwrite the interior
		}
		for b := 0; b < tc.cout/16; b++ { // and the border stays as it was: zero it
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
