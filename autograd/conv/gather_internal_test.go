package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
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

// TestCol2imStride2 checks col2im's stride-2 path against its row loop,
// bit for bit, with and without the kernels' assembly, on geometries with
// and without padding and dilation, odd and even sizes, onto input
// gradients that already hold values.
func TestCol2imStride2(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ c, h, w, k, pad, dil int }{
		{3, 32, 32, 3, 1, 1}, {2, 16, 16, 1, 0, 1}, {2, 15, 17, 3, 1, 1}, {1, 9, 40, 3, 0, 1},
		{2, 12, 13, 5, 2, 1}, {1, 20, 21, 3, 2, 2}, {2, 7, 7, 4, 1, 1},
	} {
		g, err := NewGeom(c.c, c.h, c.w, c.k, c.k, Config{Stride: [2]int{2, 2}, Padding: [2]int{c.pad, c.pad}, Dilation: [2]int{c.dil, c.dil}})
		if err != nil {
			t.Fatal(err)
		}
		col := make([]float32, g.rows*g.cols)
		for i := range col {
			col[i] = float32(rng.NormFloat64())
		}
		dx := make([]float32, c.c*c.h*c.w)
		for i := range dx {
			dx[i] = float32(rng.NormFloat64())
		}
		want := slices.Clone(dx)
		col2imRows(g, col, want)
		impl.ForEach("kernels", func(name string) {
			got := slices.Clone(dx)
			col2im(g, col, got)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: dx[%d] = %v, row loop %v", name, c, i, got[i], want[i])
				}
			}
		})
	}
}

// BenchmarkCol2im times col2im for the stride-2 3×3 layers of ResNet-20
// (inputs of 16 channels at 32×32 and 32 at 16×16) over a batch of 128
// images, by its stride-2 path (stride2) and by its row loop (rows),
// alternating.
func BenchmarkCol2im(b *testing.B) {
	const n = 128
	for _, l := range []struct{ c, hw int }{{16, 32}, {32, 16}} {
		g, err := NewGeom(l.c, l.hw, l.hw, 3, 3, Config{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}})
		if err != nil {
			b.Fatal(err)
		}
		col := make([]float32, g.rows*g.cols)
		for i := range col {
			col[i] = float32(i%13) - 6
		}
		size := l.c * l.hw * l.hw
		dx := make([]float32, n*size)
		for _, path := range []string{"stride2", "rows"} {
			f := col2im
			if path == "rows" {
				f = col2imRows
			}
			b.Run(fmt.Sprintf("%dch_%dpx/%s", l.c, l.hw, path), func(b *testing.B) {
				for b.Loop() {
					for i := 0; i < n; i++ {
						f(g, col, dx[i*size:(i+1)*size])
					}
				}
			})
		}
	}
}
