package nchwc

import (
	"fmt"
	"math"
	"unsafe"
)

// Act is an activation of C channels and H×W pixels in the layout
// [C/CB][H+2][W+2][CB] with a zero border of one pixel: CB = 16 for C a
// multiple of 16, CB = 4 for the images of at most 4 channels that enter
// the stem (channels past C zero).
type Act struct {
	C, H, W, CB int
	Data        []float32
}

// NewAct returns a zero activation whose data start on a 64-byte line.
func NewAct(c, h, w int) *Act {
	cb := blockOf(c)
	if cb == 0 || h <= 0 || w <= 0 {
		panic(fmt.Sprintf("nchwc.NewAct: %d channels (1 to 4 or a positive multiple of 16 needed), %d×%d pixels", c, h, w))
	}
	n := (c + cb - 1) / cb * cb * (h + 2) * (w + 2)
	buf := make([]float32, n+16)
	skip := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 4)
	return &Act{C: c, H: h, W: w, CB: cb, Data: buf[skip : skip+n : skip+n]}
}

// blockOf returns the channel block of c channels: 16, 4, or 0 if none
// fits.
func blockOf(c int) int {
	switch {
	case c > 0 && c%16 == 0:
		return 16
	case c > 0 && c <= 4:
		return 4
	}
	return 0
}

// RowStride returns the distance, in values, between consecutive rows.
func (a *Act) RowStride() int { return (a.W + 2) * a.CB }

// BlockStride returns the distance, in values, between consecutive blocks
// of channels.
func (a *Act) BlockStride() int { return (a.H + 2) * (a.W + 2) * a.CB }

// off is the offset of channel block cb's padded pixel (y, x); (1, 1) is
// the first pixel of the image.
func (a *Act) off(cb, y, x int) int { return cb*a.BlockStride() + y*a.RowStride() + x*a.CB }

// At returns the value of channel c at pixel (y, x) of the image (0-based,
// the border not counted).
func (a *Act) At(c, y, x int) float32 { return a.Data[a.off(c/a.CB, y+1, x+1)+c%a.CB] }

// Set sets the value of channel c at pixel (y, x) of the image to v.
func (a *Act) Set(c, y, x int, v float32) { a.Data[a.off(c/a.CB, y+1, x+1)+c%a.CB] = v }

// FromNCHW copies the image x (C×H×W values, channel-major) into a,
// leaving the border zero.
func (a *Act) FromNCHW(x []float32) {
	if len(x) != a.C*a.H*a.W {
		panic(fmt.Sprintf("nchwc.Act.FromNCHW: %d values for %d×%d×%d", len(x), a.C, a.H, a.W))
	}
	for c := 0; c < a.C; c++ {
		for y := 0; y < a.H; y++ {
			o := a.off(c/a.CB, y+1, 1) + c%a.CB
			for xx, v := range x[(c*a.H+y)*a.W : (c*a.H+y+1)*a.W] {
				a.Data[o+xx*a.CB] = v
			}
		}
	}
}

// ToNCHW copies a into x (C×H×W values, channel-major).
func (a *Act) ToNCHW(x []float32) {
	if len(x) != a.C*a.H*a.W {
		panic(fmt.Sprintf("nchwc.Act.ToNCHW: %d values for %d×%d×%d", len(x), a.C, a.H, a.W))
	}
	for c := 0; c < a.C; c++ {
		for y := 0; y < a.H; y++ {
			o := a.off(c/a.CB, y+1, 1) + c%a.CB
			row := x[(c*a.H+y)*a.W : (c*a.H+y+1)*a.W]
			for xx := range row {
				row[xx] = a.Data[o+xx*a.CB]
			}
		}
	}
}

// Filter is a k×k filter bank packed as [Cout/(16·FB)][⌈Cin/CB⌉][K][K][CB
// ci][16·FB co], CB the channel block of its input (Act.CB; the input
// channels past Cin zero).
type Filter struct {
	Cout, Cin, K, FB, CB int
	Data                 []float32
}

// PackFilter packs w (cout × cin × k × k values, the layout of
// autograd's Conv2d weights). cout must be a multiple of 16, cin a
// multiple of 16 or at most 4 (the stem, k = 3 and stride 1 only), and k
// 1 or 3.
func PackFilter(w []float32, cout, cin, k int) *Filter {
	cbk := blockOf(cin)
	if cout%16 != 0 || cbk == 0 || cout <= 0 || (k != 1 && k != 3) || len(w) != cout*cin*k*k {
		panic(fmt.Sprintf("nchwc.PackFilter: %d values for %d×%d×%d×%d (channels multiples of 16, k 1 or 3)", len(w), cout, cin, k, k))
	}
	fb := 1
	if cout%32 == 0 && cbk == 16 {
		fb = 2
	}
	ncib, cw := (cin+cbk-1)/cbk, 16*fb
	f := &Filter{Cout: cout, Cin: cin, K: k, FB: fb, CB: cbk, Data: make([]float32, cout*ncib*cbk*k*k)}
	for co := 0; co < cout; co++ {
		g, jj := co/cw, co%cw
		for ci := 0; ci < cin; ci++ {
			cb, c := ci/cbk, ci%cbk
			for ky := 0; ky < k; ky++ {
				for kx := 0; kx < k; kx++ {
					f.Data[((((g*ncib+cb)*k+ky)*k+kx)*cbk+c)*cw+jj] = w[((co*cin+ci)*k+ky)*k+kx]
				}
			}
		}
	}
	return f
}

// OutSize returns the output size of a convolution of f at stride s on
// h×w pixels.
func (f *Filter) OutSize(h, w, s int) (ho, wo int) {
	pad := (f.K - 1) / 2
	return (h+2*pad-f.K)/s + 1, (w+2*pad-f.K)/s + 1
}

// Conv computes out = relu?(conv(in, f, stride s, padding (k-1)/2) + bias
// + res) into out's interior; bias (Cout values) may be nil, res (nil or
// of out's shape) and relu are optional.
func Conv(in *Act, f *Filter, s int, bias []float32, res *Act, relu bool, out *Act) {
	ho, _ := f.OutSize(in.H, in.W, s)
	ConvRows(in, f, s, bias, res, relu, out, 0, ho)
}

// ConvRows is Conv for the output rows [y0, y1) alone. Every output value
// is computed by the same kernel call, in the same order, whatever the
// rows asked for, so that rows split among goroutines give Conv's result
// bit for bit.
func ConvRows(in *Act, f *Filter, s int, bias []float32, res *Act, relu bool, out *Act, y0, y1 int) {
	ho, wo := f.OutSize(in.H, in.W, s)
	if in.C != f.Cin || out.C != f.Cout || out.H != ho || out.W != wo || (s != 1 && s != 2) || (f.CB == 4 && (s != 1 || f.K != 3)) ||
		(bias != nil && len(bias) != f.Cout) || (res != nil && (res.C != out.C || res.H != ho || res.W != wo)) {
		panic(fmt.Sprintf("nchwc.Conv: input %d×%d×%d, filters %d×%d×%d×%d, stride %d, output %d×%d×%d: shapes do not fit",
			in.C, in.H, in.W, f.Cout, f.Cin, f.K, f.K, s, out.C, out.H, out.W))
	}
	if y0 < 0 || y1 > ho || y0 > y1 {
		panic(fmt.Sprintf("nchwc.ConvRows: rows [%d, %d) of %d", y0, y1, ho))
	}
	if bias == nil {
		bias = make([]float32, f.Cout)
	}
	var rd []float32
	if res != nil {
		rd = res.Data
	}
	fb, k, cbk := f.FB, f.K, f.CB
	ncib := (f.Cin + cbk - 1) / cbk
	pm := pmax[fb-1]
	n := (wo + pm - 1) / pm // strips per row, as even as possible
	sh := 1 - (k-1)/2       // padded input coordinate of the first tap
	gsize := ncib * k * k * cbk * 16 * fb
	for g := 0; g < f.Cout/(16*fb); g++ {
		b := bias[g*16*fb : (g+1)*16*fb]
		for y := y0; y < y1; y++ {
			x0 := 0
			for i := 0; i < n; i++ {
				p := wo / n
				if i < wo%n {
					p++
				}
				kernel(cbk, fb, p, s, in.Data, in.off(0, y*s+sh, x0*s+sh), in.BlockStride(), in.RowStride(), ncib, k, k,
					f.Data, g*gsize, b, rd, out.Data, out.off(g*fb, y+1, x0+1), out.BlockStride(), relu)
				x0 += p
			}
		}
	}
}

// kernelGo computes what the assembly kernel of input blocks of cb
// channels, fb output blocks, stride s and p pixels computes (see
// gen_kernels.go), with offsets and strides in values: the taps of pixel
// q start at in[inOff+q·s·cb], the filters of
// the group at w[wOff], output (and residual) block j of pixel q at
// out[outOff+j·outBS+q·16].
func kernelGo(cb, fb, p, s int, in []float32, inOff, inBS, inRS, ncib, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	var acc [2][16][16]float32
	wi := wOff
	for b := 0; b < ncib; b++ {
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				base := inOff + b*inBS + ky*inRS + kx*cb
				for c := 0; c < cb; c++ {
					for q := 0; q < p; q++ {
						x := in[base+q*s*cb+c]
						for j := 0; j < fb; j++ {
							wv := w[wi+(c*fb+j)*16 : wi+(c*fb+j)*16+16]
							a := &acc[j][q]
							for l, v := range wv {
								a[l] = fma32(x, v, a[l])
							}
						}
					}
				}
				wi += cb * 16 * fb
			}
		}
	}
	for j := 0; j < fb; j++ {
		for q := 0; q < p; q++ {
			o := outOff + j*outBS + q*16
			for l := 0; l < 16; l++ {
				v := acc[j][q][l] + bias[j*16+l]
				if res != nil {
					v += res[o+l]
				}
				if relu && !(v > 0) {
					v = 0
				}
				out[o+l] = v
			}
		}
	}
}

// fma32 returns a·b+c rounded once to float32, as VFMADD231PS does, for
// results in float32's normal range: a·b is exact in float64, and the
// float64 sum is nudged off a float32 halfway point by its rounding error
// so that the second rounding goes the way the exact sum would.
func fma32(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	bb := s - p
	e := (p - (s - bb)) + (cc - bb) // s + e = p + cc exactly
	if e != 0 {
		if bits := math.Float64bits(s); bits&(1<<29-1) == 1<<28 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// ShortcutA writes into dst the option-A shortcut of a ResNet's
// downsampling block: src's pixels at even coordinates, its channels in
// dst's first channels and dst's other channels zero. dst has src's
// channels or more and ⌈src.H/2⌉×⌈src.W/2⌉ pixels; both have blocks of 16
// channels.
func ShortcutA(dst, src *Act) {
	if dst.CB != 16 || src.CB != 16 || dst.C < src.C || dst.H != (src.H+1)/2 || dst.W != (src.W+1)/2 {
		panic(fmt.Sprintf("nchwc.ShortcutA: %d×%d×%d from %d×%d×%d", dst.C, dst.H, dst.W, src.C, src.H, src.W))
	}
	for b := 0; b < dst.C/16; b++ {
		for y := 0; y < dst.H; y++ {
			d := dst.Data[dst.off(b, y+1, 1):dst.off(b, y+1, 1+dst.W)]
			if b >= src.C/16 {
				clear(d)
				continue
			}
			o := src.off(b, 2*y+1, 1)
			for x := 0; x < dst.W; x++ {
				copy(d[x*16:x*16+16], src.Data[o+2*x*16:o+2*x*16+16])
			}
		}
	}
}
