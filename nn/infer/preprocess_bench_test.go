package infer_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"runtime"
	"testing"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// BenchmarkImagePath measures the three stages of classifying one
// uploaded 1024×768 JPEG (a photo-like smooth image with texture, quality
// 90, 4:2:0) separately, on one thread: decode (jpeg.Decode), preprocess
// (RawImage: colour conversion, resize and crop) and network (Probabilities
// of random-weight ResNet-20, batch 1, on the preprocessed input). Issue
// 25 asks for preprocess ≤ 2× network.
func BenchmarkImagePath(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	src := image.NewNRGBA(image.Rect(0, 0, 1024, 768))
	for y := range 768 {
		for x := range 1024 {
			src.SetNRGBA(x, y, color.NRGBA{uint8(x / 4), uint8(y / 3), uint8((x*y)>>10 + (x^y)&15), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	raw := make([]uint8, cifar10.ImageSize)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("preprocess", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			infer.RawImage(raw, img)
		}
	})
	b.Run("network", func(b *testing.B) {
		m := resnet20(b)
		x := make([]float32, infer.InputSize)
		m.Preprocess(x, img)
		probs := m.Probabilities(nil, x) // warm the pool
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			probs = m.Probabilities(probs, x)
		}
	})
}

// resnet20 returns random-weight full-width ResNet-20 as a Model.
func resnet20(b *testing.B) *infer.Model {
	spec := models.Spec{Model: "resnet20"}
	net, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		b.Fatal(err)
	}
	return m
}
