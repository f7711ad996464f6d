package conv

import (
	"fmt"
	"testing"
)

// BenchmarkPhaseImage times the phase layout of the stride-2 layers of
// ResNet-20 that take it (3×3 with padding 1 and 1×1, 16 channels at
// 32×32; the next stage's 8-pixel outputs take another) for a batch of
// 128 images, as gatherConv writes it image by image.
func BenchmarkPhaseImage(b *testing.B) {
	const n = 128
	for _, l := range []struct{ c, hw, k, pad int }{{16, 32, 3, 1}, {16, 32, 1, 0}} {
		g, err := NewGeom(l.c, l.hw, l.hw, l.k, l.k, Config{Stride: [2]int{2, 2}, Padding: [2]int{l.pad, l.pad}})
		if err != nil {
			b.Fatal(err)
		}
		if !g.gatherPhase() {
			b.Fatalf("%+v: not the phase layout", l)
		}
		size := l.c * l.hw * l.hw
		x := make([]float32, n*size)
		for i := range x {
			x[i] = float32(i % 77)
		}
		buf := make([]float32, g.gatherSize())
		b.Run(fmt.Sprintf("%dch_%dpx_%dx%d", l.c, l.hw, l.k, l.k), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				for i := 0; i < n; i++ {
					phaseImage(g, x[i*size:(i+1)*size], buf, 0, g.c)
				}
			}
		})
	}
}
