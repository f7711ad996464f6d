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
	// columns of the resized row, 3 bytes each.
	const rowBytes = 3 * Side
	n := x1 - x0
	src := make([]uint8, 6*n) // the row interleaved, then as three planes
	planes := src[3*n:]
	pr, pg, pb := planes[:n], planes[n:2*n], planes[2*n:]
	mid := make([]uint8, rowBytes*(y1-y0))
	for y := y0; y < y1; y++ {
		out := mid[rowBytes*(y-y0) : rowBytes*(y-y0+1)]
		if m, ok := img.(*image.YCbCr); ok && colK != nil {
			yccPlanes(pr, pg, pb, m, b.Min.X+x0, b.Min.Y+y)
		} else {
			rgb := src[:3*n]
			rgbRow(rgb, img, b.Min.X+x0, b.Min.Y+y)
			if colK == nil {
				for x := range Side {
					p := 3 * (colFirst[x] - x0)
					copy(out[3*x:3*x+3], rgb[p:p+3])
				}
				continue
			}
			for i := range n {
				pr[i], pg[i], pb[i] = rgb[3*i], rgb[3*i+1], rgb[3*i+2]
			}
		}
		for x := range Side {
			p, k := colFirst[x]-x0, colK[x]
			out[3*x] = clip8(dot(pr[p:], k))
			out[3*x+1] = clip8(dot(pg[p:], k))
			out[3*x+2] = clip8(dot(pb[p:], k))
		}
	}
	// Vertical pass straight into the planes of dst.
	const plane = Side * Side
	for y := range Side {
		r := rowFirst[y] - y0
		for i := range rowBytes {
			var v uint8
			if rowK == nil {
				v = mid[rowBytes*r+i]
			} else {
				s := int32(1 << (precision - 1))
				for j, kj := range rowK[y] {
					s += int32(mid[rowBytes*(r+j)+i]) * kj
				}
				v = clip8(s)
			}
			dst[(i%3)*plane+y*Side+i/3] = v
		}
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

// yccRow is rgbRow for a Y'CbCr image.
func yccRow(dst []uint8, m *image.YCbCr, x0, y int) {
	n := len(dst) / 3
	planes := make([]uint8, 3*n)
	yccPlanes(planes[:n], planes[n:2*n], planes[2*n:], m, x0, y)
	for x := range n {
		dst[3*x], dst[3*x+1], dst[3*x+2] = planes[x], planes[n+x], planes[2*n+x]
	}
}

// yccPlanes writes the pixels x0, x0+1, ... of row y of m, as many as r
// holds, into r, g and b: color.YCbCrToRGB's arithmetic, inlined, with the
// chroma samples found by the subsampling ratio's shift.
func yccPlanes(r, g, b []uint8, m *image.YCbCr, x0, y int) {
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
			r[x], g[x], b[x] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
		}
		return
	}
	yrow := m.Y[m.YOffset(x0, y):][:n]
	// COffset(x, y) is cbase + x>>shift for x ≥ 0.
	cbase := m.COffset(m.Rect.Min.X, y) - m.Rect.Min.X>>shift
	x := 0
	if shift == 1 && x0&1 == 0 {
		// Two pixels per chroma sample: its terms computed once.
		cb, cr := m.Cb[cbase+x0>>1:], m.Cr[cbase+x0>>1:]
		for ; x+2 <= n; x += 2 {
			cb1 := int32(cb[x>>1]) - 128
			cr1 := int32(cr[x>>1]) - 128
			dr, dg, db := 91881*cr1, -22554*cb1-46802*cr1, 116130*cb1
			y0, y1 := int32(yrow[x])*0x10101, int32(yrow[x+1])*0x10101
			r[x], g[x], b[x] = clampYCC(y0+dr), clampYCC(y0+dg), clampYCC(y0+db)
			r[x+1], g[x+1], b[x+1] = clampYCC(y1+dr), clampYCC(y1+dg), clampYCC(y1+db)
		}
	}
	for ; x < n; x++ {
		yv := yrow[x]
		ci := cbase + (x0+x)>>shift
		yy1 := int32(yv) * 0x10101
		cb1 := int32(m.Cb[ci]) - 128
		cr1 := int32(m.Cr[ci]) - 128
		r[x] = clampYCC(yy1 + 91881*cr1)
		g[x] = clampYCC(yy1 - 22554*cb1 - 46802*cr1)
		b[x] = clampYCC(yy1 + 116130*cb1)
	}
}

// clampYCC is the rounding of color.YCbCrToRGB: a 16.16 fixed-point value
// to a byte, clamped to 0..255.
func clampYCC(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}

// span returns the source range [lo, hi) that the weights of window read.
func span(first []int, k [][]int32) (lo, hi int) {
	hi = first[Side-1] + 1
	if k != nil {
		hi = first[Side-1] + len(k[Side-1])
	}
	return first[0], hi
}

// rgbRow writes the pixels x0, x0+1, ... of row y of img, as many as dst
// holds, into dst as interleaved 8-bit R, G, B.
func rgbRow(dst []uint8, img image.Image, x0, y int) {
	n := len(dst) / 3
	switch m := img.(type) {
	case *image.YCbCr:
		yccRow(dst, m, x0, y)
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

// dot returns the rounding half plus the sum of k[j]·p[j] over k.
func dot(p []uint8, k []int32) int32 {
	p = p[:len(k)]
	// Four running sums: integer addition is associative, so the order
	// does not change the result.
	var s0, s1, s2, s3 int32
	j := 0
	for ; j+4 <= len(k); j += 4 {
		q, c := p[j:j+4:j+4], k[j:j+4:j+4]
		s0 += int32(q[0]) * c[0]
		s1 += int32(q[1]) * c[1]
		s2 += int32(q[2]) * c[2]
		s3 += int32(q[3]) * c[3]
	}
	for ; j < len(k); j++ {
		s0 += int32(p[j]) * k[j]
	}
	return 1<<(precision-1) + s0 + s1 + s2 + s3
}

// clip8 rounds a fixed-point sum (which includes the rounding half) to a
// byte, clamping to 0..255.
func clip8(s int32) uint8 {
	return uint8(min(max(s>>precision, 0), 255))
}
