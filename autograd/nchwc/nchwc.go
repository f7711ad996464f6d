package nchwc

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
)

// Act is an activation of C channels and H×W pixels in the layout
// [⌈C/CB⌉][H+2][W+2][CB] with a zero border of one pixel: CB = 16 (NewAct),
// or 4 for the images of at most 4 channels that enter the stem
// (NewImage). The channels past C of the last block (its tail) are zero
// when made; the convolutions never read them and write zeros there (for
// finite inputs).
type Act struct {
	C, H, W, CB int
	Data        []float32
}

// NewAct returns a zero activation of c ≥ 1 channels in blocks of 16 whose
// data start on a 64-byte line.
func NewAct(c, h, w int) *Act { return newAct(c, h, w, 16) }

// NewImage returns a zero activation for an image that enters a stem
// filter (PackImageFilter): in blocks of 4 channels when c ≤ 4, else as
// NewAct.
func NewImage(c, h, w int) *Act { return newAct(c, h, w, blockOf(c)) }

func newAct(c, h, w, cb int) *Act {
	if c <= 0 || h <= 0 || w <= 0 {
		panic(fmt.Sprintf("nchwc.NewAct: %d channels, %d×%d pixels", c, h, w))
	}
	n := (c + cb - 1) / cb * cb * (h + 2) * (w + 2)
	buf := make([]float32, n+16)
	skip := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 4)
	return &Act{C: c, H: h, W: w, CB: cb, Data: buf[skip : skip+n : skip+n]}
}

// blockOf returns the channel block of an image of c channels: 4 when
// c ≤ 4, else 16.
func blockOf(c int) int {
	if c <= 4 {
		return 4
	}
	return 16
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
// leaving the border zero: for each block of channels and row, a
// transpose of the channels' rows (kernels.TransposeStrided, eight by
// eight).
func (a *Act) FromNCHW(x []float32) {
	if len(x) != a.C*a.H*a.W {
		panic(fmt.Sprintf("nchwc.Act.FromNCHW: %d values for %d×%d×%d", len(x), a.C, a.H, a.W))
	}
	hw := a.H * a.W
	for c0 := 0; c0 < a.C; c0 += a.CB {
		ct := min(a.CB, a.C-c0)
		for y := 0; y < a.H; y++ {
			kernels.TransposeStrided(a.W, 0, ct, x[c0*hw+y*a.W:], hw, a.Data[a.off(c0/a.CB, y+1, 1):], a.CB)
		}
	}
}

// ToNCHW copies a into x (C×H×W values, channel-major), by the transposes
// of FromNCHW.
func (a *Act) ToNCHW(x []float32) {
	if len(x) != a.C*a.H*a.W {
		panic(fmt.Sprintf("nchwc.Act.ToNCHW: %d values for %d×%d×%d", len(x), a.C, a.H, a.W))
	}
	hw := a.H * a.W
	for c0 := 0; c0 < a.C; c0 += a.CB {
		ct := min(a.CB, a.C-c0)
		for y := 0; y < a.H; y++ {
			kernels.TransposeStrided(ct, 0, a.W, a.Data[a.off(c0/a.CB, y+1, 1):], a.CB, x[c0*hw+y*a.W:], hw)
		}
	}
}

// Filter is a k×k filter bank packed as [⌈Cout/(16·FB)⌉][⌈Cin/CB⌉][K][K]
// [CB ci][16·FB co], CB the channel block of its input (Act.CB); the
// input channels past Cin and the output channels past Cout (the tails of
// the last blocks) are zero.
type Filter struct {
	Cout, Cin, K, FB, CB int
	Data                 []float32
	skip                 *skipped // PackFilterSkip's: the nonzero vectors
}

// skipped lists, per group of 16·FB output channels, the filter vectors
// (the 16·FB weights of one input channel at one tap) that are not all
// zero, in the kernels' order of terms.
type skipped struct {
	ent         [][]int32   // per vector: the byte offset of its input tap and channel from the first tap
	w           [][]float32 // the vectors, 16·FB values each
	zero, total int
	h, wd       int // the input's pixels, whose layout the offsets are for
	last        int // the largest offset in values
}

// PackFilterSkip packs w as PackFilter does, for kernels that skip the
// filter vectors — the 16·FB weights of one input channel at one tap
// that the kernels load as one — which are all zero (SIMD-block
// sparsity): each output value is computed by the same fused multiply-adds
// in the same order as with PackFilter's filter less those with a zero
// weight vector, which add exact zeros, so the results equal Conv's with
// PackFilter (for finite inputs; a zero's sign may differ). Where
// PackFilter would pack two blocks of output channels together (FB 2)
// but fewer 16-channel vectors than twice its nonzero 32-channel ones are
// nonzero (one half of a vector zero, the other not), it packs one block
// at a time (FB 1), so that each zero 16-channel vector is skipped: the
// kernels' cost follows the nonzero 16-channel vectors (on the shipped
// resnet20-block, 21.2 rather than 24.3 million multiply-adds). The
// filter is for inputs of h×wd pixels (NewAct(cin, h, wd)) alone: it
// lists each nonzero vector by the byte offset of its input tap in that
// layout, which the kernels add to the strip's first tap, so Conv panics
// on inputs of other sizes.
func PackFilterSkip(w []float32, cout, cin, k, h, wd int) *Filter {
	f := PackFilter(w, cout, cin, k)
	if f.FB == 2 {
		if one := packFilter(w, cout, cin, k, 16, 1); nonzeroVectors(one) < 2*nonzeroVectors(f) {
			f = one
		}
	}
	if h < 1 || wd < 1 {
		panic(fmt.Sprintf("nchwc.PackFilterSkip: inputs of %d×%d pixels", h, wd))
	}
	cw, ncib := 16*f.FB, (cin+15)/16
	groups := (cout + cw - 1) / cw
	sk := &skipped{ent: make([][]int32, groups), w: make([][]float32, groups), h: h, wd: wd}
	in := Act{C: cin, H: h, W: wd, CB: 16}
	if ncib*in.BlockStride()*4 > math.MaxInt32 {
		panic(fmt.Sprintf("nchwc.PackFilterSkip: inputs of %d×%d×%d are too large for 32-bit offsets", cin, h, wd))
	}
	for g := range groups {
		v := f.Data[g*ncib*k*k*16*cw:]
		for b := range ncib {
			for ky := range k {
				for kx := range k {
					for c := range 16 {
						vec := v[:cw]
						v = v[cw:]
						sk.total++
						if !slices.ContainsFunc(vec, func(x float32) bool { return x != 0 }) {
							sk.zero++
							continue
						}
						o := in.off(b, ky, kx) + c
						sk.last = max(sk.last, o)
						sk.ent[g] = append(sk.ent[g], int32(o*4))
						sk.w[g] = append(sk.w[g], vec...)
					}
				}
			}
		}
	}
	f.skip = sk
	return f
}

// nonzeroVectors returns how many of f's filter vectors are not all zero.
func nonzeroVectors(f *Filter) int {
	z, n := f.ZeroVectors()
	return n - z
}

// ZeroVectors returns how many of f's filter vectors (16·FB weights of
// one input channel at one tap) are all zero, and how many there are; for
// a filter of PackFilterSkip, the kernels skip the zero ones.
func (f *Filter) ZeroVectors() (zero, total int) {
	if f.skip != nil {
		return f.skip.zero, f.skip.total
	}
	cw := 16 * f.FB
	for i := 0; i < len(f.Data); i += cw {
		total++
		if !slices.ContainsFunc(f.Data[i:i+cw], func(x float32) bool { return x != 0 }) {
			zero++
		}
	}
	return zero, total
}

// PackFilter packs w (cout × cin × k × k values, the layout of
// autograd's Conv2d weights, any cout, cin ≥ 1) for inputs in blocks of
// 16 channels (NewAct); k is 1 or 3.
func PackFilter(w []float32, cout, cin, k int) *Filter { return packFilter(w, cout, cin, k, 16, 2) }

// PackImageFilter packs w as PackFilter does for the stem's input,
// NewImage's layout: in blocks of 4 channels when cin ≤ 4 (then k = 3
// and stride 1 only), else as PackFilter.
func PackImageFilter(w []float32, cout, cin, k int) *Filter {
	return packFilter(w, cout, cin, k, blockOf(cin), 2)
}

// packFilter packs w for input blocks of cbk channels, two blocks of
// output channels together (FB 2) where maxFB is 2, cbk is 16 and
// groupWidth allows, else one.
func packFilter(w []float32, cout, cin, k, cbk, maxFB int) *Filter {
	if cout <= 0 || cin <= 0 || (k != 1 && k != 3) || len(w) != cout*cin*k*k {
		panic(fmt.Sprintf("nchwc.PackFilter: %d values for %d×%d×%d×%d (k 1 or 3)", len(w), cout, cin, k, k))
	}
	coutP := (cout + 15) / 16 * 16 // PaddedCout
	fb := 1
	if cbk == 16 && maxFB == 2 {
		fb = groupWidth(cout)
	}
	ncib, cw := (cin+cbk-1)/cbk, 16*fb
	f := &Filter{Cout: cout, Cin: cin, K: k, FB: fb, CB: cbk, Data: make([]float32, coutP*ncib*cbk*k*k)}
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

// groupWidth returns the blocks of 16 output channels that the kernels
// compute together (FB) for cout output channels: 2 where cout rounded up
// to 16 is a multiple of 32 and its last block holds more than 8
// channels, else 1. A last block of at most 8 channels (the half kernels)
// runs one block at a time: on the 2-core AMD EPYC Zen 4 (one thread,
// batch 1, least of 500 calls) resnet20-compact's 16→22-channel stride-2
// layer took 16.4 µs with FB 1 against 17.7 with FB 2, its Winograd
// 30→21 layer 4.30 against 4.48.
func groupWidth(cout int) int {
	if coutP := (cout + 15) / 16 * 16; coutP%32 == 0 && cout-(coutP-16) > 8 {
		return 2
	}
	return 1
}

// OutSize returns the output size of a convolution of f at stride s on
// h×w pixels.
func (f *Filter) OutSize(h, w, s int) (ho, wo int) {
	pad := (f.K - 1) / 2
	return (h+2*pad-f.K)/s + 1, (w+2*pad-f.K)/s + 1
}

// zeroBias is the bias of a convolution without one (read only).
var zeroBias [32]float32

// PaddedCout returns the output channels of f's blocks: Cout rounded up
// to a multiple of 16.
func (f *Filter) PaddedCout() int { return (f.Cout + 15) / 16 * 16 }

// PadBias returns bias (Cout values) with zeros appended up to
// PaddedCout values: a bias that Conv uses without allocating.
func (f *Filter) PadBias(bias []float32) []float32 {
	p := make([]float32, f.PaddedCout())
	copy(p, bias)
	return p
}

// Conv computes out = relu?(conv(in, f, stride s, padding (k-1)/2) + bias
// + res) into out's interior; bias (Cout values, or PaddedCout with zeros
// past Cout: then no call allocates) may be nil, res (nil or of out's
// shape) and relu are optional.
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
	if in.C != f.Cin || in.CB != f.CB || out.C != f.Cout || out.CB != 16 || out.H != ho || out.W != wo || (s != 1 && s != 2) || (f.CB == 4 && (s != 1 || f.K != 3)) ||
		(bias != nil && len(bias) != f.Cout && len(bias) != f.PaddedCout()) || (res != nil && (res.C != out.C || res.CB != 16 || res.H != ho || res.W != wo)) {
		panic(fmt.Sprintf("nchwc.Conv: input %d×%d×%d, filters %d×%d×%d×%d, stride %d, output %d×%d×%d: shapes do not fit",
			in.C, in.H, in.W, f.Cout, f.Cin, f.K, f.K, s, out.C, out.H, out.W))
	}
	if f.skip != nil && (in.H != f.skip.h || in.W != f.skip.wd) {
		panic(fmt.Sprintf("nchwc.Conv: input %d×%d×%d, filters skipping zero vectors packed for %d×%d pixels", in.C, in.H, in.W, f.skip.h, f.skip.wd))
	}
	if y0 < 0 || y1 > ho || y0 > y1 {
		panic(fmt.Sprintf("nchwc.ConvRows: rows [%d, %d) of %d", y0, y1, ho))
	}
	var rd []float32
	if res != nil {
		rd = res.Data
	}
	fb, k, cbk := f.FB, f.K, f.CB
	ncib := (f.Cin + cbk - 1) / cbk
	// Full input blocks and the channels of the tail block (the stem's
	// image of 3 channels in a block of 4: its 3).
	full, ct := f.Cin/cbk, f.Cin%cbk
	pm := stripMax(fb)
	n := (wo + pm - 1) / pm // strips per row, as even as possible
	sh := 1 - (k-1)/2       // padded input coordinate of the first tap
	gsize := ncib * k * k * cbk * 16 * fb
	cw := 16 * fb
	for g := 0; g < (f.Cout+cw-1)/cw; g++ {
		var b []float32
		switch {
		case bias == nil:
			b = zeroBias[:cw]
		case len(bias) >= (g+1)*cw:
			b = bias[g*cw : (g+1)*cw]
		default: // a group past the end of an unpadded bias
			b = make([]float32, cw)
			copy(b, bias[g*cw:])
		}
		half := f.half(g)
		for y := y0; y < y1; y++ {
			x0 := 0
			for i := 0; i < n; i++ {
				p := wo / n
				if i < wo%n {
					p++
				}
				if f.skip != nil {
					kernelSkip(fb, p, s, half, in.Data, in.off(0, y*s+sh, x0*s+sh), f.skip.last,
						f.skip.ent[g], f.skip.w[g], b, rd, out.Data, out.off(g*fb, y+1, x0+1), out.BlockStride(), relu)
				} else {
					kernel(cbk, fb, p, s, half, in.Data, in.off(0, y*s+sh, x0*s+sh), in.BlockStride(), in.RowStride(), full, ct, k, k,
						f.Data, g*gsize, b, rd, out.Data, out.off(g*fb, y+1, x0+1), out.BlockStride(), relu)
				}
				x0 += p
			}
		}
	}
}

// half reports whether the last block of output channels of group g
// (16·FB channels) holds at most 8 of f's channels: the kernels then
// compute its channels 0-7 alone (8 lanes) and store zeros in the others.
func (f *Filter) half(g int) bool { return f.Cout-16*((g+1)*f.FB-1) <= 8 }

// MACs returns the multiply-adds the kernels execute for one output of
// ho×wo pixels: per output pixel, every filter vector they load (the
// nonzero ones for PackFilterSkip's filters) times its lanes, 16 per block
// of output channels but 8 for a last block of at most 8 channels (the
// half kernels; on AVX-512 with AVX512VL, AVX2 and the Go loop). It counts
// the lanes of the padding channels, which cout·cin·k·k·ho·wo does not.
func (f *Filter) MACs(ho, wo int) int {
	cw := 16 * f.FB
	groups := (f.Cout + cw - 1) / cw
	perVec := func(g int) int {
		if f.half(g) {
			return cw - 8
		}
		return cw
	}
	n := 0
	for g := range groups {
		vecs := 0
		if f.skip != nil {
			vecs = len(f.skip.ent[g])
		} else {
			vecs = f.Cin * f.K * f.K // an input's tail channels are skipped
		}
		n += vecs * perVec(g)
	}
	return n * ho * wo
}

// pmaxGo[fb-1] is the widest strip of kernelGo for fb blocks.
var pmaxGo = [2]int{16, 12}

// kernelGo computes what the assembly kernel of input blocks of cb
// channels, fb output blocks, stride s and p pixels computes (see
// gen_kernels.go), with offsets and strides in values: the taps of pixel
// q start at in[inOff+q·s·cb], the filters of the group at w[wOff],
// output (and residual) block j of pixel q at out[outOff+j·outBS+q·16];
// ncib full input blocks, then the first ct channels of one more; where
// half, the last block's channels 0-7 alone, zeros stored in the others.
func kernelGo(cb, fb, p, s int, half bool, in []float32, inOff, inBS, inRS, ncib, ct, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	var acc [2][16][16]float32
	lanes := lanesOf(fb, half)
	accumulateGo(&acc, cb, fb, p, s, lanes, in, inOff, inBS, inRS, ncib, ct, kh, kw, w, wOff)
	epilogueGo(&acc, fb, p, lanes, bias, res, out, outOff, outBS, relu)
}

// accumulateGo adds kernelGo's terms (its arguments, the lanes of each
// block lanes[j]) to acc, in kernelGo's order.
func accumulateGo(acc *[2][16][16]float32, cb, fb, p, s int, lanes [2]int, in []float32, inOff, inBS, inRS, ncib, ct, kh, kw int, w []float32, wOff int) {
	wi := wOff
	nb := ncib
	if ct > 0 {
		nb++
	}
	for b := 0; b < nb; b++ {
		nc := cb
		if b == ncib {
			nc = ct
		}
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				base := inOff + b*inBS + ky*inRS + kx*cb
				for c := 0; c < nc; c++ {
					for q := 0; q < p; q++ {
						x := in[base+q*s*cb+c]
						for j := 0; j < fb; j++ {
							wv := w[wi+(c*fb+j)*16 : wi+(c*fb+j)*16+lanes[j]]
							a := &acc[j][q]
							for l, v := range wv {
								a[l] = kernels.FMA32(x, v, a[l])
							}
						}
					}
				}
				wi += cb * 16 * fb
			}
		}
	}
}

// lanesOf returns the lanes the kernels compute of each of fb blocks: 16,
// the last one's 8 where half.
func lanesOf(fb int, half bool) [2]int {
	l := [2]int{16, 16}
	if half {
		l[fb-1] = 8
	}
	return l
}

// kernelSkipGo computes what the assembly kernels of a PackFilterSkip
// filter compute: kernelGo's terms for the filter vectors listed in ent
// (one value each: the byte offset of its input tap and channel from
// in[inOff]; the vectors in w, 16·fb values each), in their order.
func kernelSkipGo(fb, p, s int, half bool, in []float32, inOff int, ent []int32, w []float32,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	var acc [2][16][16]float32
	lanes := lanesOf(fb, half)
	for e, o := range ent {
		base := inOff + int(o)/4
		wv := w[e*16*fb:]
		for q := 0; q < p; q++ {
			x := in[base+q*s*16]
			for j := 0; j < fb; j++ {
				a := &acc[j][q]
				for l, v := range wv[j*16 : j*16+lanes[j]] {
					a[l] = kernels.FMA32(x, v, a[l])
				}
			}
		}
	}
	epilogueGo(&acc, fb, p, lanes, bias, res, out, outOff, outBS, relu)
}

// epilogueGo adds the bias and the residual (if res is not nil) to the
// accumulators of fb blocks and p pixels, applies the ReLU if relu, and
// stores them, as the kernels' epilogue does: block j's first lanes[j]
// lanes, zeros in the others.
func epilogueGo(acc *[2][16][16]float32, fb, p int, lanes [2]int, bias, res, out []float32, outOff, outBS int, relu bool) {
	for j := 0; j < fb; j++ {
		for q := 0; q < p; q++ {
			o := outOff + j*outBS + q*16
			clear(out[o+lanes[j] : o+16])
			for l := 0; l < lanes[j]; l++ {
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

// ShortcutA writes into dst the option-A shortcut of a ResNet's
// downsampling block: src's pixels at even coordinates, its channels in
// dst's first channels and dst's other channels zero. dst has src's
// channels or more and ⌈src.H/2⌉×⌈src.W/2⌉ pixels; both have blocks of 16
// channels.
func ShortcutA(dst, src *Act) {
	if dst.CB != 16 || src.CB != 16 || dst.C < src.C || dst.H != (src.H+1)/2 || dst.W != (src.W+1)/2 {
		panic(fmt.Sprintf("nchwc.ShortcutA: %d×%d×%d from %d×%d×%d", dst.C, dst.H, dst.W, src.C, src.H, src.W))
	}
	for b := 0; b < (dst.C+15)/16; b++ {
		for y := 0; y < dst.H; y++ {
			d := dst.Data[dst.off(b, y+1, 1):dst.off(b, y+1, 1+dst.W)]
			clear(d)
			nc := min(src.C-16*b, 16) // src's channels in this block
			if nc <= 0 {
				continue
			}
			o := src.off(b, 2*y+1, 1)
			for x := 0; x < dst.W; x++ {
				copy(d[x*16:x*16+nc], src.Data[o+2*x*16:o+2*x*16+nc])
			}
		}
	}
}
