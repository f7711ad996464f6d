package conv

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// TestDenseWeightGrad checks the dense weight gradient of 2×2 images
// against a float64 weight gradient and against im2col's (at most twice
// its error), with the input gradient beside it as Backward computes both,
// and bit for bit across 1 and 3 workers.
func TestDenseWeightGrad(t *testing.T) {
	const n, c, m = 32, 64, 80
	rng := rand.New(rand.NewPCG(5, 9))
	x := make([]float32, n*c*4)
	gy := make([]float32, n*m*4)
	w := make([]float32, m*c*9)
	for _, s := range [][]float32{x, gy, w} {
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
	}
	gw0 := make([]float32, len(w))
	for i := range gw0 {
		gw0[i] = float32(rng.NormFloat64())
	}
	// float64 reference: gw[o][c][ki][kj] += Σ_n Σ_q gy[n][o][q]·x[n][c][q + k − 1].
	want := make([]float64, len(w))
	for i, v := range gw0 {
		want[i] = float64(v)
	}
	for im := range n {
		for o := range m {
			for ci := range c {
				for ki := range 3 {
					for kj := range 3 {
						var s float64
						for qi := range 2 {
							for qj := range 2 {
								pi, pj := qi+ki-1, qj+kj-1
								if pi < 0 || pi > 1 || pj < 0 || pj > 1 {
									continue
								}
								s += float64(gy[((im*m+o)*2+qi)*2+qj]) * float64(x[((im*c+ci)*2+pi)*2+pj])
							}
						}
						want[(o*c+ci)*9+ki*3+kj] += s
					}
				}
			}
		}
	}
	maxErr := func(gw []float32) float64 {
		var e float64
		for i, v := range gw {
			e = max(e, math.Abs(float64(v)-want[i]))
		}
		return e
	}
	run := func(algo Algo, workers int) []float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		g, err := NewGeom(c, 2, 2, 3, 3, Config{Padding: [2]int{1, 1}})
		if err != nil {
			t.Fatal(err)
		}
		g.algo = algo
		if got := denseWeightOK(g, n, m); got != (algo == AlgoAuto) {
			t.Fatalf("denseWeightOK under %v = %v", algo, got)
		}
		gw := slices.Clone(gw0)
		gx := make([]float32, len(x))
		Backward(g, n, m, x, w, gy, gx, gw, true)
		return gw
	}
	ref := run(AlgoIm2col, 1)
	got := run(AlgoAuto, 1)
	if e, e0 := maxErr(got), maxErr(ref); e > 2*e0+1e-6 {
		t.Errorf("dense weight gradient: error %g against float64, im2col's %g", e, e0)
	} else {
		t.Logf("error against float64: dense %g, im2col %g", e, e0)
	}
	got3 := run(AlgoAuto, 3)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(got3[i]) {
			t.Fatalf("gw[%d] = %v with 3 workers, %v with 1", i, got3[i], got[i])
		}
	}
}

// BenchmarkDenseWeightGrad times the weight gradient of VGG-16's 512 ×
// 512-channel layers at 2×2, batch 128: the dense product (the rules'
// choice) against im2col's, which the rules chose before.
func BenchmarkDenseWeightGrad(b *testing.B) {
	const n, c = 128, 512
	rng := rand.New(rand.NewPCG(1, 3))
	x := make([]float32, n*c*4)
	gy := make([]float32, len(x))
	w := make([]float32, c*c*9)
	for _, s := range [][]float32{x, gy, w} {
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
	}
	gw := make([]float32, len(w))
	for _, algo := range []Algo{AlgoAuto, AlgoIm2col} {
		b.Run(algo.String(), func(b *testing.B) {
			defer parallel.SetWorkers(parallel.SetWorkers(0))
			g, err := NewGeom(c, 2, 2, 3, 3, Config{Padding: [2]int{1, 1}})
			if err != nil {
				b.Fatal(err)
			}
			g.algo = algo
			step := func() { Backward(g, n, c, x, w, gy, nil, gw, true) }
			step() // grow the scratch buffers
			b.ResetTimer()
			if ms, ok := procstat.CPUPerOp(b.N, step); ok {
				b.ReportMetric(ms, "cpu-ms/op")
			}
		})
	}
}
