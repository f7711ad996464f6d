package infer

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/datasets/cifar10"
)

// FuzzPreprocess sends arbitrary bytes through the path of an uploaded
// image: the PNG or JPEG header (image.DecodeConfig), refused above a
// pixel cap or by CheckSize as a server refuses it, then decoding and
// RawImage, which must not panic and must agree with the generic
// conversion through image.At. Run it with
//
//	go test ./nn/infer -run '^$' -fuzz FuzzPreprocess -fuzztime 60s
func FuzzPreprocess(f *testing.F) {
	enc := func(img image.Image, jpg bool) []byte {
		var b bytes.Buffer
		var err error
		if jpg {
			err = jpeg.Encode(&b, img, &jpeg.Options{Quality: 75})
		} else {
			err = png.Encode(&b, img)
		}
		if err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	for _, r := range []image.Rectangle{image.Rect(0, 0, 40, 33), image.Rect(0, 0, 1, 300), image.Rect(0, 0, 500, 2)} {
		gray, gray16 := image.NewGray(r), image.NewGray16(r)
		nrgba, nrgba64 := image.NewNRGBA(r), image.NewNRGBA64(r)
		pal := image.NewPaletted(r, color.Palette{color.Black, color.White, color.NRGBA{200, 10, 30, 128}})
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				c := color.NRGBA{pixel(x, y, 0), pixel(x, y, 1), pixel(x, y, 2), uint8(x * y)}
				for _, m := range []interface{ Set(int, int, color.Color) }{gray, gray16, nrgba, nrgba64, pal} {
					m.Set(x, y, c)
				}
			}
		}
		for _, m := range []image.Image{gray, gray16, nrgba, nrgba64, pal} {
			f.Add(enc(m, false))
		}
		f.Add(enc(nrgba, true))
		f.Add(enc(gray, true))
	}
	const maxPixels = 1 << 20
	got := make([]uint8, cifar10.ImageSize)
	want := make([]uint8, cifar10.ImageSize)
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
			return
		}
		if CheckSize(cfg.Width, cfg.Height) != nil {
			return
		}
		img, _, err := image.Decode(bytes.NewReader(b))
		if err != nil {
			return
		}
		RawImage(got, img)
		RawImage(want, generic{img})
		if !slices.Equal(got, want) {
			t.Fatalf("%T %v: RawImage differs from the generic conversion", img, img.Bounds())
		}
	})
}
