package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// inputGrad64 returns gx0 plus the input gradient of a convolution of
// geometry g with the cout filters w for the n output gradients gy, in
// float64.
func inputGrad64(g *Geom, n, cout int, w, gy, gx0 []float32) []float64 {
	out := make([]float64, len(gx0))
	for i, v := range gx0 {
		out[i] = float64(v)
	}
	xSize, ySize := g.c*g.h*g.w, cout*g.ho*g.wo
	for i := 0; i < n; i++ {
		for co := 0; co < cout; co++ {
			for ci := 0; ci < g.c; ci++ {
				for ki := 0; ki < g.kh; ki++ {
					for kj := 0; kj < g.kw; kj++ {
						f := float64(w[((co*g.c+ci)*g.kh+ki)*g.kw+kj])
						for oh := 0; oh < g.ho; oh++ {
							ih := oh*g.sh - g.ph + ki*g.dh
							if ih < 0 || ih >= g.h {
								continue
							}
							for ow := 0; ow < g.wo; ow++ {
								iw := ow*g.sw - g.pw + kj*g.dw
								if iw < 0 || iw >= g.w {
									continue
								}
								out[i*xSize+(ci*g.h+ih)*g.w+iw] += f * float64(gy[i*ySize+(co*g.ho+oh)*g.wo+ow])
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestPhaseGrad checks the input gradient by phases against a float64
// one, added onto gradients that already hold values: within twice the
// largest error of the column matrix and col2im (its sums are grouped
// otherwise: over (co, taps) in one product instead of over co per tap,
// then over taps), on geometries with kernels of 1 to 5, padding, inputs
// whose output rows are not whole runs; with every GEMM engine and
// kernel implementation, and bit-identical for 1 and 3 workers.
func TestPhaseGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ n, cin, cout, hw, k, pad int }{
		{3, 16, 32, 32, 3, 1}, {2, 32, 64, 16, 3, 1}, {2, 3, 5, 10, 3, 1}, {2, 4, 3, 8, 4, 1},
		{1, 2, 3, 12, 5, 2}, {2, 5, 4, 8, 1, 0}, {1, 3, 2, 6, 2, 0},
	} {
		g, err := NewGeom(c.cin, c.hw, c.hw, c.k, c.k, Config{Stride: [2]int{2, 2}, Padding: [2]int{c.pad, c.pad}})
		if err != nil {
			t.Fatal(err)
		}
		if !phaseGradOK(g, c.cout) {
			t.Fatalf("%+v: not computed by phases", c)
		}
		w := make([]float32, c.cout*g.rows)
		for i := range w {
			w[i] = float32(rng.NormFloat64() / math.Sqrt(float64(g.rows)))
		}
		gy := make([]float32, c.n*c.cout*g.cols)
		for i := range gy {
			gy[i] = float32(rng.NormFloat64())
		}
		gx0 := make([]float32, c.n*c.cin*c.hw*c.hw)
		for i := range gx0 {
			gx0[i] = float32(rng.NormFloat64())
		}
		ref := inputGrad64(g, c.n, c.cout, w, gy, gx0)
		maxErr := func(got []float32) float64 {
			e := 0.0
			for i, v := range got {
				e = max(e, math.Abs(float64(v)-ref[i]))
			}
			return e
		}
		run := func(workers int) []float32 {
			defer parallel.SetWorkers(parallel.SetWorkers(workers))
			gx := slices.Clone(gx0)
			buf := make([]float32, phaseGradPackedSize(g, c.cout))
			newPhaseGrad(g, c.cout, w, buf).run(c.n, gy, gx)
			return gx
		}
		for _, name := range blas.Kernels() {
			e, err := blas.NewEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer blas.SetDefault(blas.SetDefault(e))
				colGX := slices.Clone(gx0)
				col2imGrad(g, c.n, c.cout, w, gy, colGX)
				bound := 2*maxErr(colGX) + 1e-6
				impl.ForEach("kernels", func(kern string) {
					got := run(1)
					if e := maxErr(got); e > bound || e == 0 {
						t.Errorf("%s/%s %+v: error %.3g, column matrix and col2im %.3g", name, kern, c, e, maxErr(colGX))
					}
					if !slices.Equal(run(3), got) {
						t.Errorf("%s/%s %+v: 3 workers differ from 1", name, kern, c)
					}
				})
			}()
		}
	}
}

// BenchmarkStride2InputGrad times the input gradient of ResNet-20's
// stride-2 3×3 layers (16→32 channels at 32×32, 32→64 at 16×16) and
// ResNet-34's (64→128 at 32×32, 128→256 at 16×16, 256→512 at 8×8) for a
// batch of 128 images, by the column
// matrix and col2im (col2im) and by phases (phases), alternating;
// cpu-ms/op is the process's CPU time per pass.
func BenchmarkStride2InputGrad(b *testing.B) {
	const n = 128
	defer parallel.SetWorkers(parallel.SetWorkers(0))
	for _, l := range []struct{ cin, cout, hw int }{{16, 32, 32}, {32, 64, 16}, {64, 128, 32}, {128, 256, 16}, {256, 512, 8}} {
		g, err := NewGeom(l.cin, l.hw, l.hw, 3, 3, Config{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}})
		if err != nil {
			b.Fatal(err)
		}
		w := make([]float32, l.cout*g.rows)
		for i := range w {
			w[i] = float32(i%7-3) / 16
		}
		gy := make([]float32, n*l.cout*g.cols)
		for i := range gy {
			gy[i] = float32(i%13 - 6)
		}
		gx := make([]float32, n*l.cin*l.hw*l.hw)
		buf := make([]float32, phaseGradPackedSize(g, l.cout))
		for _, path := range []string{"col2im", "phases"} {
			b.Run(fmt.Sprintf("%d-%dch_%dpx/%s", l.cin, l.cout, l.hw, path), func(b *testing.B) {
				step := func() {
					if path == "col2im" {
						col2imGrad(g, n, l.cout, w, gy, gx)
						return
					}
					newPhaseGrad(g, l.cout, w, buf).run(n, gy, gx)
				}
				step() // grow the scratch buffers
				b.ResetTimer()
				if ms, ok := procstat.CPUPerOp(b.N, step); ok {
					b.ReportMetric(ms, "cpu-ms/op")
				}
			})
		}
	}
}
