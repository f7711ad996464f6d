package benchrun

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
)

// tinyInfer is a configuration that runs a small model quickly.
func tinyInfer(batch int, args ...func(*InferConfig)) InferConfig {
	c := InferConfig{Spec: models.Spec{Model: "resnet20", Width: 0.25}, Batch: batch, Seed: 1, Loop: Loop{Warmup: 1, Steps: 2}}
	for _, f := range args {
		f(&c)
	}
	return c
}

// TestInfer checks the result and the kernel mix: random dense weights
// run dense, 97 % zeros run sparse under a fixed rule (MinZeros; the
// default choice is timed at load, so it is not a test's business), Dense
// forces dense.
func TestInfer(t *testing.T) {
	defer withThreads(1)()
	keys := "impl model threads batch dense img_per_s ms_per_batch ms_per_batch_min cpu_ms_per_batch steps warmup kernel_mix sparse_layers layers min_zeros weights_zero_ratio params gemm_kernel go_version gomaxprocs"
	for _, tc := range []struct {
		name       string
		c          InferConfig
		wantSparse bool
	}{
		{"dense weights", tinyInfer(3), false},
		{"sparse weights", tinyInfer(3, func(c *InferConfig) { c.Zeros, c.MinZeros = 0.97, 0.85 }), true},
		{"forced dense", tinyInfer(3, func(c *InferConfig) { c.Zeros, c.Dense = 0.97, true }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Infer(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(jsonKeys(t, r), " "); got != keys && got != strings.Replace(keys, " cpu_ms_per_batch", "", 1) {
				t.Errorf("JSON keys\n%s\nwant\n%s", got, keys)
			}
			if !(r.ImgPerS > 0) || !(r.MsPerBatch > 0) || r.MsMin > r.MsPerBatch || r.Batch != 3 || r.Steps != 2 || r.Threads != 1 || r.Model != "resnet20" {
				t.Errorf("result %+v", r)
			}
			if len(r.KernelMix) != 20 || r.Layers != 20 || len(r.Sparsity.Layers) != 20 {
				t.Fatalf("kernel_mix = %v, want 20 layers", r.KernelMix)
			}
			want := "dense"
			if tc.wantSparse {
				want = "sparse"
			}
			for name, path := range r.KernelMix {
				if path != want {
					t.Errorf("layer %s ran %v, want %s", name, path, want)
				}
			}
			if z := r.ZeroRatio; z < tc.c.Zeros-0.05 || z > tc.c.Zeros+0.05 {
				t.Errorf("weights_zero_ratio = %v", z)
			}
			if (r.SparseLayers == 20) != tc.wantSparse {
				t.Errorf("sparse_layers = %v", r.SparseLayers)
			}
		})
	}
}

// TestInferWeights loads a compressed model file with sparse weights.
func TestInferWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	zeros, total := 0, 0
	for _, p := range m.Params() {
		if p.T.Rank() < 2 {
			continue
		}
		for i := range p.T.Data {
			if i%16 != 0 {
				p.T.Data[i] = 0
			}
			if p.T.Data[i] == 0 {
				zeros++
			}
			total++
		}
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := checkpoint.SaveCompressedModel(path, m, nil); err != nil {
		t.Fatal(err)
	}
	r, err := Infer(tinyInfer(1, func(c *InferConfig) { c.Weights, c.MinZeros = path, 0.85 }))
	if err != nil {
		t.Fatal(err)
	}
	if z, want := r.ZeroRatio, float64(zeros)/float64(total); z < want-1e-6 || z > want+1e-6 {
		t.Errorf("weights_zero_ratio = %v, want %v", z, want)
	}
	if r.SparseLayers != 20 || r.Weights != path {
		t.Errorf("sparse_layers = %v, weights %q; want 20, %q", r.SparseLayers, r.Weights, path)
	}
	if _, err := Infer(tinyInfer(1, func(c *InferConfig) { c.Weights, c.Spec.Width = path, 1 })); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("full-width model from a width-0.25 file: error %v, want a shape mismatch", err)
	}
}

// TestInferWeightsMetadata checks that a model file's metadata describes
// the network (an option-B ResNet at width 0.25 with 7 classes) where
// Spec leaves a field zero, and that Spec's fields override it.
func TestInferWeightsMetadata(t *testing.T) {
	spec := models.Spec{Model: "resnet8", Width: 0.25, Shortcut: "B", NumClasses: 7}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.safetensors")
	if err := checkpoint.SaveModel(path, net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	fromFile := func(c *InferConfig) { c.Weights, c.Spec = path, models.Spec{} }
	r, err := Infer(tinyInfer(2, fromFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "resnet8 width 0.25 shortcut B, 7 classes"; r.Model != "resnet8" || !strings.HasPrefix(r.Served, want) {
		t.Errorf("model %v served as %q, want resnet8 and %q from the metadata", r.Model, r.Served, want)
	}
	if r.KernelMix["layer2.0.shortcut.0"] == "" {
		t.Errorf("kernel_mix %v lacks the option-B shortcut", r.KernelMix)
	}
	if _, err := Infer(tinyInfer(1, fromFile, func(c *InferConfig) { c.Spec.Shortcut = "A" })); err == nil || !strings.Contains(err.Error(), "unexpected") {
		t.Errorf("shortcut A over an option-B file: error %v, want unexpected keys", err)
	}
	if _, err := Infer(tinyInfer(1, fromFile, func(c *InferConfig) { c.Spec.Model = "resnet20" })); err == nil {
		t.Error("resnet20 over a resnet8 file succeeded")
	}
}

// TestInferCompacted runs a compacted model file (testdata/compact),
// built with the per-layer widths of its metadata.
func TestInferCompacted(t *testing.T) {
	path := filepath.Join("..", "..", "..", "testdata", "compact", "resnet20_A.compact.safetensors")
	if _, err := Infer(tinyInfer(2, func(c *InferConfig) { c.Weights = path })); err != nil {
		t.Fatal(err)
	}
}

func TestInferTable(t *testing.T) {
	r, err := Infer(tinyInfer(1, func(c *InferConfig) { c.Spec, c.Zeros = models.Spec{Model: "vgg16", Width: 0.0625}, 0.7 }))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	checkTable(t, out.String(), "images/s", "ms/batch", "vgg16 width 0.0625", "layers sparse", "features.0")
}

func TestInferBadConfig(t *testing.T) {
	for name, change := range map[string]func(*InferConfig){
		"model":     func(c *InferConfig) { c.Spec.Model = "lstm" },
		"batch":     func(c *InferConfig) { c.Batch = 0 },
		"steps":     func(c *InferConfig) { c.Steps = 0 },
		"min time":  func(c *InferConfig) { c.MinTime = -1 },
		"zeros":     func(c *InferConfig) { c.Zeros = 1.5 },
		"min zeros": func(c *InferConfig) { c.MinZeros = -1 },
		"weights":   func(c *InferConfig) { c.Weights = filepath.Join(t.TempDir(), "missing.safetensors") },
	} {
		if _, err := Infer(tinyInfer(1, change)); err == nil {
			t.Errorf("%s: Infer succeeded, want an error", name)
		}
	}
}
