package infer_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// TestPlanarMatchesEval checks the ResNets compiled with every
// convolution sparse on planar activations against the training graph's
// evaluation-mode outputs (float32 rounding), at batch 5 and 1, bit for
// bit the same with 1 and 2 workers, under every implementation of the
// sparse row kernels: ResNet-20, -56 and -18, both shortcut kinds (option
// A's selections named "select"), stride-1 and stride-2 layers, channel
// counts of 4, 8 and 16 per stage and odd ones (the compacted files), any
// zero fraction; a single image the same whether it is split over the
// workers in bands of rows (2 or 3, also inside calls of the pool; its
// single convolutions split by channels or on band 0 alone) or it stays
// on one (planarPlan.whole).
func TestPlanarMatchesEval(t *testing.T) {
	type netCase struct {
		name string
		net  func() (nn.Module, models.Spec)
	}
	var cases []netCase
	for _, tc := range []struct {
		spec  models.Spec
		zeros float64
	}{
		{models.Spec{Model: "resnet20", Width: 1, Shortcut: "A"}, 0.5},
		{models.Spec{Model: "resnet20", Width: 1, Shortcut: "B"}, 0.9},
		{models.Spec{Model: "resnet20", Width: 0.5, Shortcut: "B"}, 0},
		{models.Spec{Model: "resnet56", Width: 0.25, Shortcut: "A"}, 0.97},
		{models.Spec{Model: "resnet18", Width: 0.125}, 0.9},
	} {
		cases = append(cases, netCase{fmt.Sprintf("%s_w%g_%s_z%g", tc.spec.Model, tc.spec.Width, tc.spec.Shortcut, tc.zeros), func() (nn.Module, models.Spec) {
			net, err := tc.spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := newRng(41)
			randomize(net, rng)
			nntest.ZeroWeights(net, rng, tc.zeros)
			return net, tc.spec
		}})
	}
	for _, path := range []string{
		filepath.Join("..", "..", "testdata", "compact", "resnet20_A.compact.safetensors"),
		filepath.Join("..", "pretrained", "models", "resnet20-compact.safetensors"),
		filepath.Join("..", "pretrained", "models", "resnet20-sparse.safetensors"),
	} {
		cases = append(cases, netCase{filepath.Base(path), func() (nn.Module, models.Spec) {
			f, err := safetensors.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			net, spec, err := infer.Network(f, models.Spec{})
			if err != nil {
				t.Fatal(err)
			}
			return net, spec
		}})
	}
	names, _ := impl.List("kernels")
	for _, tc := range cases {
		for _, kernels := range append([]string{impl.Generic}, names...) {
			t.Run(tc.name+"/"+kernels, func(t *testing.T) {
				if !impl.Select("kernels", kernels) {
					t.Skipf("this CPU has no %s", kernels)
				}
				defer impl.Reset("kernels")
				net, spec := tc.net()
				const n = 5
				x := randomInputs(newRng(42), n)
				want := evalLogitsSoftmax(net, x, n)
				m, ok := infer.NewPlanar(net, spec, false)
				if !ok {
					t.Fatal("the network does not compile on planar activations")
				}
				for _, a := range m.Algorithms(1) {
					if a != "sparse" && a != "select" {
						t.Fatalf("algorithms %v, want every convolution sparse", m.Algorithms(1))
					}
				}
				got := m.Probabilities(nil, x)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
						t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], want[i])
					}
				}
				one := checkWorkers(t, m, x, got)
				for i, v := range one {
					if math.Float32bits(v) != math.Float32bits(got[i]) {
						t.Fatalf("batch 1: probability %d: %v, in a batch of %d: %v", i, v, n, got[i])
					}
				}
				// Each image kept on one worker: the same bits.
				whole, _ := infer.NewPlanar(net, spec, true)
				for i, v := range whole.Probabilities(nil, x[:infer.InputSize]) {
					if math.Float32bits(v) != math.Float32bits(got[i]) {
						t.Fatalf("batch 1 on one worker: probability %d: %v, split over the workers: %v", i, v, got[i])
					}
				}
				// A single image in 2 and 3 bands, on that many workers and
				// inside calls of the pool (no idle worker: the bands one
				// after another, or some on a worker freed early): the same
				// bits.
				// Also with the single convolutions on band 0 alone instead
				// of split by channels.
				bandOnly, _ := infer.NewPlanar(net, spec, false)
				infer.SetBandOnly(bandOnly)
				for _, w := range []int{2, 3} {
					prev := parallel.SetWorkers(w)
					split := m.Probabilities(nil, x[:infer.InputSize])
					nested := make([][]float32, w)
					parallel.For(w, 1, func(lo, _ int) { nested[lo] = m.Probabilities(nil, x[:infer.InputSize]) })
					band := bandOnly.Probabilities(nil, x[:infer.InputSize])
					parallel.SetWorkers(prev)
					for _, p := range append(nested, split, band) {
						for i, v := range p {
							if math.Float32bits(v) != math.Float32bits(got[i]) {
								t.Fatalf("batch 1 in %d bands: probability %d: %v, in a batch: %v", w, i, v, got[i])
							}
						}
					}
				}
			})
		}
	}
}
