package infer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
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

// generic hides an image's type, so RawImage converts it through At.
type generic struct{ image.Image }

// TestRawImageMatchesPIL checks RawImage against torchvision's Resize(32)
// and CenterCrop(32) as computed by Pillow (testdata/gen_resize.py):
// shrinking, enlarging, square, thin and already-32 images.
//
// resize_pil_large.bin (testdata/infer/gen_resize_large.py) adds large
// and extreme shapes: 1024×768 and its transpose, 1×5000, 5000×1, 3×2000,
// 33×4000, 1×1, 1×40 and others.
func TestRawImageMatchesPIL(t *testing.T) {
	for _, name := range []string{"resize_pil.bin", "resize_pil_large.bin"} {
		t.Run(name, func(t *testing.T) { matchesPIL(t, name) })
	}
}

func matchesPIL(t *testing.T, name string) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "infer", name))
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

// TestRawImageThinIsCheap runs RawImage on the images of issue 26's F1
// (16,777,216×1 greyscale took 12 GB before: coefficients and buffers were
// sized by the resized width 32·W) and their transposes, and requires each
// to allocate at most 64 KiB.
func TestRawImageThinIsCheap(t *testing.T) {
	dst := make([]uint8, cifar10.ImageSize)
	for _, n := range []int{100000, 300000, 1 << 24} {
		for _, r := range []image.Rectangle{image.Rect(0, 0, n, 1), image.Rect(0, 0, 1, n)} {
			img := image.NewGray(r)
			for i := range img.Pix {
				img.Pix[i] = uint8(i * 7)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			RawImage(dst, img)
			runtime.ReadMemStats(&after)
			if a := after.TotalAlloc - before.TotalAlloc; a > 64<<10 {
				t.Errorf("%v: RawImage allocated %d bytes, want at most 64 KiB", r.Size(), a)
			}
		}
	}
}

// TestRawImageExtremeShapes decodes PNGs of every colour type and bit depth
// in extreme shapes and checks that RawImage agrees with the conversion
// through image.At (the generic path) and allocates little more than the
// source rows and columns it reads.
func TestRawImageExtremeShapes(t *testing.T) {
	shapes := [][2]int{{1, 1}, {1, 5000}, {5000, 1}, {2, 3000}, {3000, 2}, {33, 31}, {32, 5000}, {5000, 32}, {1, 32}, {97, 1}}
	models := []func(r image.Rectangle) image.Image{
		func(r image.Rectangle) image.Image { return image.NewGray(r) },
		func(r image.Rectangle) image.Image { return image.NewGray16(r) },
		func(r image.Rectangle) image.Image { return image.NewNRGBA(r) },
		func(r image.Rectangle) image.Image { return image.NewNRGBA64(r) },
		func(r image.Rectangle) image.Image { return image.NewRGBA(r) },
		func(r image.Rectangle) image.Image { return image.NewRGBA64(r) },
		func(r image.Rectangle) image.Image {
			return image.NewPaletted(r, color.Palette{color.Black, color.White, color.NRGBA{200, 10, 30, 128}})
		},
	}
	got := make([]uint8, cifar10.ImageSize)
	want := make([]uint8, cifar10.ImageSize)
	for _, s := range shapes {
		for mi, mk := range models {
			img := mk(image.Rect(0, 0, s[0], s[1])).(draw.Image)
			for y := range s[1] {
				for x := range s[0] {
					img.Set(x, y, color.NRGBA{pixel(x, y, 0), pixel(x, y, 1), pixel(x, y, 2), uint8(x + y)})
				}
			}
			var buf bytes.Buffer
			if err := png.Encode(&buf, img); err != nil {
				t.Fatal(err)
			}
			dec, err := png.Decode(&buf)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			RawImage(got, dec)
			runtime.ReadMemStats(&after)
			if a, limit := after.TotalAlloc-before.TotalAlloc, uint64(64<<10+3*s[0]+96*s[1]); a > limit {
				t.Errorf("%d×%d model %d: RawImage allocated %d bytes, want at most %d", s[0], s[1], mi, a, limit)
			}
			RawImage(want, generic{dec})
			if !slices.Equal(got, want) {
				t.Errorf("%d×%d %T: differs from the generic conversion", s[0], s[1], dec)
			}
		}
	}
}

func TestCheckSize(t *testing.T) {
	for _, c := range []struct {
		w, h int
		ok   bool
	}{{1, 1, true}, {1 << 24, 1, true}, {1, MaxAspect, true}, {MaxAspect + 1, 1, false}, {2, 2*MaxAspect + 1, false}, {2, 2 * MaxAspect, true}, {0, 5, false}} {
		err := CheckSize(c.w, c.h)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrImageTooLarge)) {
			t.Errorf("CheckSize(%d, %d) = %v, want ok %v", c.w, c.h, err, c.ok)
		}
	}
}

// TestYCbCrConversion checks the inlined Y'CbCr conversion against
// color.YCbCrToRGB for every (Y', Cb, Cr), and RawImage on every
// subsampling ratio, at odd origins, against the generic conversion.
func TestYCbCrConversion(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 256, 256), image.YCbCrSubsampleRatio444)
	for i := range m.Y {
		m.Y[i], m.Cb[i] = uint8(i), uint8(i>>8)
	}
	row := make([]uint8, 3*256)
	planes := make([]int32, 3*256)
	for cr := range 256 {
		for i := range m.Cr {
			m.Cr[i] = uint8(cr)
		}
		for y := range 256 {
			yccPlanes(planes[:256], planes[256:512], planes[512:], m, 0, y)
			for x := range 256 {
				row[3*x], row[3*x+1], row[3*x+2] = uint8(planes[x]), uint8(planes[256+x]), uint8(planes[512+x])
			}
			for x := range 256 {
				r, g, b := color.YCbCrToRGB(uint8(x), uint8(y), uint8(cr))
				if row[3*x] != r || row[3*x+1] != g || row[3*x+2] != b {
					t.Fatalf("Y'CbCr %d %d %d: got %v, want %d %d %d", x, y, cr, row[3*x:3*x+3], r, g, b)
				}
			}
		}
	}
	got := make([]uint8, cifar10.ImageSize)
	want := make([]uint8, cifar10.ImageSize)
	for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422,
		image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410} {
		full := image.NewYCbCr(image.Rect(0, 0, 131, 77), ratio)
		for i := range full.Y {
			full.Y[i] = uint8(i * 7)
		}
		for i := range full.Cb {
			full.Cb[i], full.Cr[i] = uint8(i*13), uint8(i*29+5)
		}
		for _, img := range []image.Image{full, full.SubImage(image.Rect(3, 5, 120, 70)), full.SubImage(image.Rect(1, 1, 40, 50))} {
			RawImage(got, img)
			RawImage(want, generic{img})
			if !slices.Equal(got, want) {
				t.Errorf("%v %v: differs from the generic conversion", ratio, img.Bounds())
			}
		}
	}
}

// TestRawImageJPEGKinds preprocesses the JPEG variants that
// testdata/infer/gen_jpeg_kinds.py writes with Pillow (progressive JPEGs of
// extreme shapes and every chroma subsampling, CMYK JPEGs) and compares
// each with the generic conversion, within the same allocation bound as
// the PNG shapes.
func TestRawImageJPEGKinds(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "infer", "jpeg_kinds")
	names, err := filepath.Glob(filepath.Join(dir, "*.jpg"))
	if err != nil || len(names) < 8 {
		t.Fatalf("fixtures in %s: %v, %v", dir, names, err)
	}
	got := make([]uint8, cifar10.ImageSize)
	want := make([]uint8, cifar10.ImageSize)
	kinds := map[string]bool{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil || format != "jpeg" {
			t.Fatalf("%s: %v (%s)", name, err, format)
		}
		if err := CheckSize(cfg.Width, cfg.Height); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dec, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		kinds[fmt.Sprintf("%T", dec)] = true
		w, h := dec.Bounds().Dx(), dec.Bounds().Dy()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		RawImage(got, dec)
		runtime.ReadMemStats(&after)
		if a, limit := after.TotalAlloc-before.TotalAlloc, uint64(64<<10+3*w+96*h); a > limit {
			t.Errorf("%s: RawImage allocated %d bytes, want at most %d", filepath.Base(name), a, limit)
		}
		RawImage(want, generic{dec})
		if !slices.Equal(got, want) {
			t.Errorf("%s (%T): differs from the generic conversion", filepath.Base(name), dec)
		}
	}
	if !kinds["*image.YCbCr"] || !kinds["*image.CMYK"] {
		t.Errorf("decoded kinds %v, want *image.YCbCr and *image.CMYK", kinds)
	}
}
