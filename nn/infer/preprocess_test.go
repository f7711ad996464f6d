package infer

import (
	"encoding/binary"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/datasets/cifar10"
)

// pixel is the synthetic test image of testdata/gen_resize.py.
func pixel(x, y, c int) uint8 {
	return uint8((x*7 + y*13 + c*31 + (x*y)%17*5 + (x^y)*3) % 256)
}

func synthetic(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{pixel(x, y, 0), pixel(x, y, 1), pixel(x, y, 2), 255})
		}
	}
	return img
}

// TestRawImageMatchesPIL checks RawImage against torchvision's Resize(32)
// and CenterCrop(32) as computed by Pillow (testdata/gen_resize.py):
// shrinking, enlarging, square, thin and already-32 images.
func TestRawImageMatchesPIL(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "infer", "resize_pil.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint8, cifar10.ImageSize)
	cases := 0
	for len(b) > 0 {
		if len(b) < 8+cifar10.ImageSize {
			t.Fatalf("fixture has %d trailing bytes", len(b))
		}
		w, h := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
		want := b[8 : 8+cifar10.ImageSize]
		b = b[8+cifar10.ImageSize:]
		RawImage(got, synthetic(w, h))
		if !slices.Equal(got, want) {
			diff := 0
			for i := range got {
				if got[i] != want[i] {
					diff++
				}
			}
			t.Errorf("%d×%d: %d of %d bytes differ from PIL", w, h, diff, len(got))
		}
		cases++
	}
	if cases < 5 {
		t.Fatalf("fixture has only %d cases", cases)
	}
}

// TestRawImageColourModels checks that the fast paths for the image types
// the decoders return agree with the generic conversion, and that a 32×32
// image passes through unchanged.
func TestRawImageColourModels(t *testing.T) {
	src := synthetic(32, 32)
	got := make([]uint8, cifar10.ImageSize)
	RawImage(got, src)
	for c := range 3 {
		for y := range 32 {
			for x := range 32 {
				if got[c*1024+y*32+x] != pixel(x, y, c) {
					t.Fatalf("32×32 image changed at channel %d (%d, %d)", c, x, y)
				}
			}
		}
	}

	// generic hides the concrete type, forcing the generic path.
	type generic struct{ image.Image }
	want := make([]uint8, cifar10.ImageSize)
	sub := synthetic(60, 45).SubImage(image.Rect(5, 3, 55, 43)) // non-zero origin
	gray := image.NewGray(image.Rect(2, 1, 50, 41))
	ycc := image.NewYCbCr(image.Rect(0, 0, 40, 36), image.YCbCrSubsampleRatio420)
	for i := range ycc.Y {
		ycc.Y[i] = uint8(i * 7)
	}
	for i := range ycc.Cb {
		ycc.Cb[i], ycc.Cr[i] = uint8(i*3), uint8(255-i*5)
	}
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i * 13)
	}
	rgba := image.NewRGBA(image.Rect(0, 0, 33, 48))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 11)
		if i%4 == 3 {
			rgba.Pix[i] = 255
		}
	}
	rgba.Pix[3], rgba.Pix[7] = 128, 0 // translucent and transparent pixels
	pal := image.NewPaletted(image.Rect(0, 0, 50, 20), color.Palette{color.Black, color.RGBA{200, 10, 30, 255}, color.NRGBA{10, 200, 30, 100}})
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i % 3)
	}
	for _, img := range []image.Image{sub, gray, ycc, rgba, pal} {
		RawImage(got, img)
		RawImage(want, generic{img})
		if !slices.Equal(got, want) {
			t.Errorf("%T: fast path differs from the generic conversion", img)
		}
	}
}

func TestCoefficientsSumToOne(t *testing.T) {
	for _, c := range [][2]int{{100, 32}, {23, 32}, {1000, 32}, {32, 32}, {5, 32}} {
		first, k := coefficients(c[0], c[1], 0, c[1])
		for i := range k {
			var s int32
			for _, v := range k[i] {
				s += v
			}
			if d := s - 1<<precision; d < -int32(len(k[i])) || d > int32(len(k[i])) {
				t.Fatalf("%d→%d: weights of output %d sum to %d, want about %d", c[0], c[1], i, s, 1<<precision)
			}
			if first[i] < 0 || first[i]+len(k[i]) > c[0] {
				t.Fatalf("%d→%d: output %d reads [%d, %d)", c[0], c[1], i, first[i], first[i]+len(k[i]))
			}
		}
	}
}
