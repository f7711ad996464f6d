package infer

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/proxgen/proxgen/internal/cifarinfo"
)

// Side is the height and width of the network input in pixels.
const Side = cifarinfo.Height

// RawImage writes img as a raw 32×32 image in the layout of a CIFAR-10
// record without its label byte into dst (cifarinfo.ImageSize bytes: the R,
// G and B planes, rows top to bottom), as torchvision's
//
//	Compose([Resize(32), CenterCrop(32)])
//
// computes it on a PIL RGB image, bit for bit:
//
//  1. Colour: every pixel becomes 8-bit R, G, B. Alpha is dropped without
//     compositing (as PIL's convert("RGB")), grey is replicated, and JPEG's
//     Y'CbCr is converted with Go's image/color (which can differ from
//     libjpeg's conversion by one level).
//  2. Resize (only if neither side is already 32): the shorter side
//     becomes 32 and the longer side int(32·long/short) (truncated), with
//     PIL's BILINEAR resampling: a separable triangle filter whose support
//     is widened by the scale factor when shrinking (so it averages over
//     the whole source footprint and does not alias), weights normalised
//     to sum 1 and rounded to 22-bit fixed point, horizontal pass first,
//     every pass rounded and clamped to 0..255.
//  3. Crop: the centred 32×32 window, its top-left corner at
//     round((h−32)/2), round((w−32)/2) with ties to even (Python's round).
//
// Only the pixels the crop keeps are computed: the resampling weights of
// its 32 output columns and 32 output rows, and, of the source, only the
// rows and columns those weights read, converted to RGB one row at a time.
// Memory is O(w + 96·h) bytes at most (a thin image of any length costs
// kilobytes) and time proportional to the source pixels read.
//
// Each source row becomes three int32 planes, and each of the 32 output
// columns a dot product of one padded length with them (the weights of
// its window, then zeros); the vertical pass sums whole output rows. On
// amd64 with AVX2 the Y'CbCr conversion of rows with one chroma sample per
// pixel or per two (4:4:4, 4:4:0, 4:2:2, 4:2:0; the other ratios take the
// Go loop) and both passes run as assembly kernels (preprocess_amd64.s)
// that do the Go loops' integer arithmetic, so the result is the same bit
// for bit on every platform.
//
// A 32×32 image passes through unchanged. RawImage panics if dst does not
// have cifarinfo.ImageSize bytes or img is empty, and with an error wrapping
// ErrImageTooLarge for an image CheckSize refuses (callers decoding
// untrusted images check the size from the header first).
func RawImage(dst []uint8, img image.Image) {
	if len(dst) != cifarinfo.ImageSize {
		panic(fmt.Sprintf("infer.RawImage: dst has %d bytes, want %d", len(dst), cifarinfo.ImageSize))
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		panic(fmt.Sprintf("infer.RawImage: empty image %v", b))
	}
	if err := CheckSize(w, h); err != nil {
		panic("infer.RawImage: " + err.Error())
	}
	nw, nh := resizedSize(w, h)
	top := int(math.RoundToEven(float64(nh-Side) / 2))
	left := int(math.RoundToEven(float64(nw-Side) / 2))
	// The source columns [x0, x1) and rows [y0, y1) that the crop reads.
	colFirst, colK := window(w, nw, left)
	rowFirst, rowK := window(h, nh, top)
	x0, x1 := span(colFirst, colK)
	y0, y1 := span(rowFirst, rowK)
	// Horizontal pass: every source row in [y0, y1) becomes the 32 cropped
	// columns of the resized row, as three planes of 32 bytes (R, G, B).
	const rowBytes = 3 * Side
	n := x1 - x0
	var f hfilter
	m := n
	if colK != nil {
		f = flatten(colFirst, colK, x0)
		m = max(n, f.end) // the windows read up to f.end, past n times zero weights
	}
	planes := make([]int32, 3*m)
	pr, pg, pb := planes[:m], planes[m:2*m], planes[2*m:]
	ycc, _ := img.(*image.YCbCr)
	var rgb []uint8
	if ycc == nil {
		rgb = make([]uint8, 3*n)
	}
	mid := make([]uint8, rowBytes*(y1-y0))
	for y := y0; y < y1; y++ {
		out := mid[rowBytes*(y-y0) : rowBytes*(y-y0+1)]
		if ycc != nil {
			yccPlanes(pr[:n], pg[:n], pb[:n], ycc, b.Min.X+x0, b.Min.Y+y)
		} else {
			rgbRow(rgb, img, b.Min.X+x0, b.Min.Y+y)
			for i := range n {
				pr[i], pg[i], pb[i] = int32(rgb[3*i]), int32(rgb[3*i+1]), int32(rgb[3*i+2])
			}
		}
		if colK == nil {
			for x := range Side {
				p := colFirst[x] - x0
				out[x], out[Side+x], out[2*Side+x] = uint8(pr[p]), uint8(pg[p]), uint8(pb[p])
			}
			continue
		}
		hdot(out, pr, pg, pb, &f)
	}
	// Vertical pass straight into the planes of dst.
	const plane = Side * Side
	for y := range Side {
		r := rowFirst[y] - y0
		if rowK == nil {
			for c := range 3 {
				copy(dst[c*plane+y*Side:][:Side], mid[rowBytes*r+c*Side:][:Side])
			}
			continue
		}
		vdot(dst[y*Side:], mid[rowBytes*r:], rowK[y])
	}
}

// MaxAspect is the largest ratio of an image's longer side to its shorter
// side that RawImage accepts: the resized longer side, 32·MaxAspect, then
// fits in an int32 on every platform. The work memory of RawImage is
// bounded by its source's sides (see RawImage), so the aspect ratio is the
// only limit it adds to what decoding the image took.
const MaxAspect = 1 << 26

// ErrImageTooLarge is the error (tested with errors.Is) of an image whose
// size RawImage cannot resize within its limits.
var ErrImageTooLarge = errors.New("image too large to preprocess")

// CheckSize returns an error wrapping ErrImageTooLarge if RawImage would
// refuse a w×h image: one whose longer side is more than MaxAspect times
// its shorter side. It allocates nothing, so a server can call it with the
// size from an image's header before decoding. Sides must be positive.
func CheckSize(w, h int) error {
	long, short := max(w, h), min(w, h)
	if short <= 0 {
		return fmt.Errorf("infer: a %d×%d image: %w", w, h, ErrImageTooLarge)
	}
	if long/short > MaxAspect || (long/short == MaxAspect && long%short != 0) {
		return fmt.Errorf("infer: a %d×%d image has an aspect ratio over %d:1: %w", w, h, MaxAspect, ErrImageTooLarge)
	}
	return nil
}

// resizedSize returns the size torchvision's Resize(32) gives a w×h image.
func resizedSize(w, h int) (int, int) {
	if (w <= h && w == Side) || (h <= w && h == Side) {
		return w, h
	}
	if w <= h {
		return Side, int(float64(Side) * float64(h) / float64(w))
	}
	return int(float64(Side) * float64(w) / float64(h)), Side
}

// window returns the resampling weights (see coefficients) of the Side
// outputs from off of resizing n source pixels to m, or, when m == n, the
// identity: first[i] = off+i and k nil.
func window(n, m, off int) (first []int, k [][]int32) {
	if m != n {
		return coefficients(n, m, off, Side)
	}
	first = make([]int, Side)
	for i := range first {
		first[i] = off + i
	}
	return first, nil
}

// yccPlanes writes the pixels x0, x0+1, ... of row y of m, as many as r
// holds, into r, g and b (0..255 each): color.YCbCrToRGB's arithmetic,
// inlined, with the chroma samples found by the subsampling ratio's shift.
// Rows with one chroma sample per pixel (4:4:4, 4:4:0) or per two pixels
// (4:2:2, 4:2:0) go through ycc1 and ycc2, which have assembly kernels.
func yccPlanes(r, g, b []int32, m *image.YCbCr, x0, y int) {
	n := len(r)
	g, b = g[:n], b[:n]
	var shift uint
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420:
		shift = 1
	case image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410:
		shift = 2
	}
	if m.Rect.Min.X < 0 || m.Rect.Min.Y < 0 {
		for x := range n {
			yi, ci := m.YOffset(x0+x, y), m.COffset(x0+x, y)
			rr, gg, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			r[x], g[x], b[x] = int32(rr), int32(gg), int32(bb)
		}
		return
	}
	yrow := m.Y[m.YOffset(x0, y):][:n]
	// COffset(x, y) is cbase + x>>shift for x ≥ 0.
	cbase := m.COffset(m.Rect.Min.X, y) - m.Rect.Min.X>>shift
	switch shift {
	case 0:
		c := cbase + x0
		ycc1(r, g, b, yrow, m.Cb[c:c+n], m.Cr[c:c+n])
		return
	case 1:
		x := 0
		if x0&1 != 0 && n > 0 {
			// The second pixel of its chroma sample: the pairs start after it.
			c := cbase + x0>>1
			r[0], g[0], b[0] = yccPixel(yrow[0], m.Cb[c], m.Cr[c])
			x = 1
		}
		c, nc := cbase+(x0+x)>>1, (n-x+1)>>1
		ycc2(r[x:], g[x:], b[x:], yrow[x:], m.Cb[c:c+nc], m.Cr[c:c+nc])
		return
	}
	for x := range n {
		ci := cbase + (x0+x)>>shift
		r[x], g[x], b[x] = yccPixel(yrow[x], m.Cb[ci], m.Cr[ci])
	}
}

// yccPixel is color.YCbCrToRGB with int32 results.
func yccPixel(y, cb, cr uint8) (r, g, b int32) {
	yy := int32(y) * 0x10101
	cb1, cr1 := int32(cb)-128, int32(cr)-128
	return clampYCC(yy + 91881*cr1), clampYCC(yy - 22554*cb1 - 46802*cr1), clampYCC(yy + 116130*cb1)
}

// clampYCC is the rounding of color.YCbCrToRGB: a 16.16 fixed-point value
// to a byte, clamped to 0..255.
func clampYCC(v int32) int32 {
	if uint32(v)&0xff000000 == 0 {
		return v >> 16
	}
	return int32(uint8(^(v >> 31)))
}

// ycc1 converts the pixels of a Y'CbCr row with a chroma sample per pixel:
// pixel x of r, g and b from yrow[x], cb[x] and cr[x], len(r) of them.
func ycc1(r, g, b []int32, yrow, cb, cr []uint8) {
	n := len(r)
	if haveAVX2 && n >= 8 {
		k := n &^ 7
		_, _, _, _, _ = g[k-1], b[k-1], yrow[k-1], cb[k-1], cr[k-1]
		ycc1AVX2(&r[0], &g[0], &b[0], &yrow[0], &cb[0], &cr[0], k)
		r, g, b, yrow, cb, cr = r[k:], g[k:], b[k:], yrow[k:], cb[k:], cr[k:]
	}
	ycc1Go(r, g, b, yrow, cb, cr)
}

func ycc1Go(r, g, b []int32, yrow, cb, cr []uint8) {
	n := len(r)
	g, b, yrow, cb, cr = g[:n], b[:n], yrow[:n], cb[:n], cr[:n]
	for x := range n {
		r[x], g[x], b[x] = yccPixel(yrow[x], cb[x], cr[x])
	}
}

// ycc2 converts the pixels of a Y'CbCr row with a chroma sample per two
// pixels: pixel x of r, g and b from yrow[x], cb[x/2] and cr[x/2], len(r)
// of them.
func ycc2(r, g, b []int32, yrow, cb, cr []uint8) {
	n := len(r)
	if haveAVX2 && n >= 16 {
		k := n &^ 15
		_, _, _, _, _ = g[k-1], b[k-1], yrow[k-1], cb[k/2-1], cr[k/2-1]
		ycc2AVX2(&r[0], &g[0], &b[0], &yrow[0], &cb[0], &cr[0], k)
		r, g, b, yrow, cb, cr = r[k:], g[k:], b[k:], yrow[k:], cb[k/2:], cr[k/2:]
	}
	ycc2Go(r, g, b, yrow, cb, cr)
}

func ycc2Go(r, g, b []int32, yrow, cb, cr []uint8) {
	n := len(r)
	g, b, yrow, cb, cr = g[:n], b[:n], yrow[:n], cb[:(n+1)/2], cr[:(n+1)/2]
	x := 0
	for ; x+2 <= n; x += 2 {
		// Two pixels per chroma sample: its terms computed once.
		cb1 := int32(cb[x>>1]) - 128
		cr1 := int32(cr[x>>1]) - 128
		dr, dg, db := 91881*cr1, -22554*cb1-46802*cr1, 116130*cb1
		y0, y1 := int32(yrow[x])*0x10101, int32(yrow[x+1])*0x10101
		r[x], g[x], b[x] = clampYCC(y0+dr), clampYCC(y0+dg), clampYCC(y0+db)
		r[x+1], g[x+1], b[x+1] = clampYCC(y1+dr), clampYCC(y1+dg), clampYCC(y1+db)
	}
	if x < n {
		r[x], g[x], b[x] = yccPixel(yrow[x], cb[x>>1], cr[x>>1])
	}
}

// span returns the source range [lo, hi) that the weights of window read.
func span(first []int, k [][]int32) (lo, hi int) {
	hi = first[Side-1] + 1
	if k != nil {
		hi = first[Side-1] + len(k[Side-1])
	}
	return first[0], hi
}

// rgbRow writes the pixels x0, x0+1, ... of row y of img (any image but
// *image.YCbCr, which RawImage converts with yccPlanes), as many as dst
// holds, into dst as interleaved 8-bit R, G, B.
func rgbRow(dst []uint8, img image.Image, x0, y int) {
	n := len(dst) / 3
	switch m := img.(type) {
	case *image.NRGBA:
		row := m.Pix[m.PixOffset(x0, y):]
		for x := range n {
			dst[3*x], dst[3*x+1], dst[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	case *image.RGBA:
		row := m.Pix[m.PixOffset(x0, y):]
		for x := range n {
			p := row[4*x : 4*x+4]
			if p[3] == 255 {
				dst[3*x], dst[3*x+1], dst[3*x+2] = p[0], p[1], p[2]
				continue
			}
			c := color.NRGBAModel.Convert(color.RGBA{p[0], p[1], p[2], p[3]}).(color.NRGBA)
			dst[3*x], dst[3*x+1], dst[3*x+2] = c.R, c.G, c.B
		}
	case *image.Paletted:
		row := m.Pix[m.PixOffset(x0, y):]
		for x := range n {
			var c color.NRGBA // an index past the palette is black
			if i := int(row[x]); i < len(m.Palette) {
				c = color.NRGBAModel.Convert(m.Palette[i]).(color.NRGBA)
			}
			dst[3*x], dst[3*x+1], dst[3*x+2] = c.R, c.G, c.B
		}
	case *image.Gray:
		row := m.Pix[m.PixOffset(x0, y):]
		for x := range n {
			dst[3*x], dst[3*x+1], dst[3*x+2] = row[x], row[x], row[x]
		}
	default:
		for x := range n {
			c := color.NRGBAModel.Convert(img.At(x0+x, y)).(color.NRGBA)
			dst[3*x], dst[3*x+1], dst[3*x+2] = c.R, c.G, c.B
		}
	}
}

// precision is PIL's fixed-point precision of resampling weights.
const precision = 32 - 8 - 2

// coefficients returns PIL's bilinear resampling weights of the count
// outputs from off of resizing n source pixels to m: output off+i is the
// sum over j < len(k[i]) of k[i][j]·src[first[i]+j], weights in
// precision-bit fixed point.
func coefficients(n, m, off, count int) (first []int, k [][]int32) {
	scale := float64(n) / float64(m)
	filterscale := max(scale, 1)
	support := filterscale // the triangle filter's support is 1
	first = make([]int, count)
	k = make([][]int32, count)
	w := make([]float64, 0, int(math.Ceil(support))*2+1)
	for i := range count {
		center := (float64(off+i) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), n)
		w = w[:0]
		sum := 0.0
		for j := lo; j < hi; j++ {
			x := math.Abs((float64(j) - center + 0.5) / filterscale)
			v := 0.0
			if x < 1 {
				v = 1 - x
			}
			w = append(w, v)
			sum += v
		}
		ki := make([]int32, len(w))
		for j, v := range w {
			if sum != 0 {
				v /= sum
			}
			if v < 0 {
				ki[j] = int32(-0.5 + v*(1<<precision))
			} else {
				ki[j] = int32(0.5 + v*(1<<precision))
			}
		}
		first[i], k[i] = lo, ki
	}
	return first, k
}

// hfilter is the horizontal pass's weights laid out for its kernels:
// output x (of Side) reads taps elements of each plane from first[x], with
// the weights k[x·taps : (x+1)·taps], its window's weights padded with
// zeros. taps is a positive multiple of 8, and no window reads at or past
// end.
type hfilter struct {
	first []int
	k     []int32
	taps  int
	end   int
}

// flatten returns the hfilter of the Side windows first, k (coefficients)
// of the source read from x0 ≤ first[0].
func flatten(first []int, k [][]int32, x0 int) hfilter {
	taps := 8
	for _, ki := range k[:Side] {
		taps = max(taps, (len(ki)+7)&^7)
	}
	f := hfilter{first: make([]int, Side), k: make([]int32, Side*taps), taps: taps}
	for x := range Side {
		p := first[x] - x0
		if p < 0 {
			panic("infer: a window starts before the source row")
		}
		f.first[x] = p
		copy(f.k[x*taps:(x+1)*taps], k[x])
		f.end = max(f.end, p+taps)
	}
	return f
}

// hdot computes the horizontal pass of one source row, its pixels in the
// planes r, g and b (of at least f.end elements): out[c·Side + x] is
// output x of plane c, the clip8 of the rounding half plus the sum of the
// weights of window x times the pixels it reads.
func hdot(out []uint8, r, g, b []int32, f *hfilter) {
	out, r, g, b = out[:3*Side], r[:f.end], g[:f.end], b[:f.end]
	if len(f.first) != Side || f.taps <= 0 || f.taps%8 != 0 || len(f.k) != Side*f.taps {
		panic("infer: malformed hfilter")
	}
	if haveAVX2 {
		hdotAVX2(&out[0], &r[0], &g[0], &b[0], &f.first[0], &f.k[0], f.taps)
		return
	}
	hdotGo(out, r, g, b, f)
}

func hdotGo(out []uint8, r, g, b []int32, f *hfilter) {
	for x := range Side {
		p, k := f.first[x], f.k[x*f.taps:][:f.taps]
		sr, sg, sb := dot3(r[p:], g[p:], b[p:], k)
		out[x], out[Side+x], out[2*Side+x] = clip8(sr), clip8(sg), clip8(sb)
	}
}

// dot3 returns the rounding half plus the sums of k[j] times r[j], g[j]
// and b[j] over k. (A function of its own: inlined into hdotGo's loop, its
// sums would live on the stack.)
//
//go:noinline
func dot3(r, g, b, k []int32) (sr, sg, sb int32) {
	r, g, b = r[:len(k)], g[:len(k)], b[:len(k)]
	// Integer addition is associative, so the order of the sums does not
	// change the result.
	sr, sg, sb = 1<<(precision-1), 1<<(precision-1), 1<<(precision-1)
	for j, kj := range k {
		sr += r[j] * kj
		sg += g[j] * kj
		sb += b[j] * kj
	}
	return sr, sg, sb
}

// vdot computes the vertical pass of one output row from the horizontal
// pass's rows mid (3·Side bytes each, the R, G and B planes' outputs):
// dst[c·Side·Side + x] is the clip8 of the rounding half plus the sum over
// j of k[j]·mid[j·3·Side + c·Side + x], for the planes c and columns x.
func vdot(dst, mid []uint8, k []int32) {
	const plane = Side * Side
	dst, mid = dst[:2*plane+Side], mid[:3*Side*len(k)]
	if haveAVX2 && len(k) > 0 {
		vdotAVX2(&dst[0], &mid[0], &k[0], len(k))
		return
	}
	vdotGo(dst, mid, k)
}

func vdotGo(dst, mid []uint8, k []int32) {
	const plane = Side * Side
	var s [3 * Side]int32
	for i := range s {
		s[i] = 1 << (precision - 1)
	}
	for j, kj := range k {
		row := mid[3*Side*j:][:3*Side]
		for i, v := range row {
			s[i] += int32(v) * kj
		}
	}
	for c := range 3 {
		out := dst[c*plane:][:Side]
		for x := range out {
			out[x] = clip8(s[c*Side+x])
		}
	}
}

// clip8 rounds a fixed-point sum (which includes the rounding half) to a
// byte, clamping to 0..255.
func clip8(s int32) uint8 {
	return uint8(min(max(s>>precision, 0), 255))
}
