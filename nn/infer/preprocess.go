package infer

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/proxgen/proxgen/datasets/cifar10"
)

// Side is the height and width of the network input in pixels.
const Side = cifar10.Height

// RawImage writes img as a raw 32×32 image in the layout of a CIFAR-10
// record without its label byte into dst (cifar10.ImageSize bytes: the R,
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
// A 32×32 image passes through unchanged. RawImage panics if dst does not
// have cifar10.ImageSize bytes or img is empty.
func RawImage(dst []uint8, img image.Image) {
	if len(dst) != cifar10.ImageSize {
		panic(fmt.Sprintf("infer.RawImage: dst has %d bytes, want %d", len(dst), cifar10.ImageSize))
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		panic(fmt.Sprintf("infer.RawImage: empty image %v", b))
	}
	pix := rgb(img)
	nw, nh := resizedSize(w, h)
	if nw != w {
		pix = resampleRows(pix, w, h, nw)
		w = nw
	}
	if nh != h {
		pix = resampleColumns(pix, w, h, nh)
		h = nh
	}
	top := int(math.RoundToEven(float64(h-Side) / 2))
	left := int(math.RoundToEven(float64(w-Side) / 2))
	const plane = Side * Side
	for y := range Side {
		row := pix[((top+y)*w+left)*3:]
		for x := range Side {
			for c := range 3 {
				dst[c*plane+y*Side+x] = row[3*x+c]
			}
		}
	}
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

// rgb returns the pixels of img as interleaved 8-bit R, G, B, row by row.
func rgb(img image.Image) []uint8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]uint8, 0, 3*w*h)
	switch m := img.(type) {
	case *image.YCbCr:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				out = append(out, r, g, bl)
			}
		}
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				out = append(out, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.RGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				p := row[4*x : 4*x+4]
				if p[3] == 255 {
					out = append(out, p[0], p[1], p[2])
					continue
				}
				c := color.NRGBAModel.Convert(color.RGBA{p[0], p[1], p[2], p[3]}).(color.NRGBA)
				out = append(out, c.R, c.G, c.B)
			}
		}
	case *image.Paletted:
		pal := make([][3]uint8, len(m.Palette))
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [3]uint8{n.R, n.G, n.B}
		}
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				c := pal[row[x]]
				out = append(out, c[0], c[1], c[2])
			}
		}
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				out = append(out, row[x], row[x], row[x])
			}
		}
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				out = append(out, c.R, c.G, c.B)
			}
		}
	}
	return out
}

// precision is PIL's fixed-point precision of resampling weights.
const precision = 32 - 8 - 2

// coefficients returns PIL's bilinear resampling weights for resizing n
// source pixels to m: output i is the sum over j < len(k[i]) of
// k[i][j]·src[first[i]+j], weights in precision-bit fixed point.
func coefficients(n, m int) (first []int, k [][]int32) {
	scale := float64(n) / float64(m)
	filterscale := max(scale, 1)
	support := filterscale // the triangle filter's support is 1
	first = make([]int, m)
	k = make([][]int32, m)
	w := make([]float64, 0, int(math.Ceil(support))*2+1)
	for i := range m {
		center := (float64(i) + 0.5) * scale
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

// clip8 rounds a fixed-point sum (which includes the rounding half) to a
// byte, clamping to 0..255.
func clip8(s int32) uint8 {
	return uint8(min(max(s>>precision, 0), 255))
}

// resampleRows resizes every row of the w×h RGB image pix to nw pixels.
func resampleRows(pix []uint8, w, h, nw int) []uint8 {
	first, k := coefficients(w, nw)
	out := make([]uint8, 3*nw*h)
	for y := range h {
		src := pix[3*w*y : 3*w*(y+1)]
		dst := out[3*nw*y : 3*nw*(y+1)]
		for x := range nw {
			var s [3]int32
			s[0], s[1], s[2] = 1<<(precision-1), 1<<(precision-1), 1<<(precision-1)
			for j, kj := range k[x] {
				p := src[3*(first[x]+j):]
				s[0] += int32(p[0]) * kj
				s[1] += int32(p[1]) * kj
				s[2] += int32(p[2]) * kj
			}
			dst[3*x], dst[3*x+1], dst[3*x+2] = clip8(s[0]), clip8(s[1]), clip8(s[2])
		}
	}
	return out
}

// resampleColumns resizes every column of the w×h RGB image pix to nh
// pixels.
func resampleColumns(pix []uint8, w, h, nh int) []uint8 {
	first, k := coefficients(h, nh)
	out := make([]uint8, 3*w*nh)
	for y := range nh {
		dst := out[3*w*y : 3*w*(y+1)]
		for x := range 3 * w {
			s := int32(1 << (precision - 1))
			for j, kj := range k[y] {
				s += int32(pix[3*w*(first[y]+j)+x]) * kj
			}
			dst[x] = clip8(s)
		}
	}
	return out
}
