package main

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
)

func runInferForTest(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runInfer(append([]string{"-warmup", "1", "-steps", "2", "-threads", "1"}, args...), &out, &errOut)
	return out.String(), err
}

// TestInferJSON checks the JSON keys and the kernel mix: random dense
// weights run dense, 97 % zeros run sparse under a fixed rule (-min-zeros;
// the default choice is timed at load, so it is not a test's business),
// -dense forces dense.
func TestInferJSON(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantSparse bool
		zeros      float64
	}{
		{"dense weights", nil, false, 0},
		{"sparse weights", []string{"-zeros", "0.97", "-min-zeros", "0.85"}, true, 0.97},
		{"forced dense", []string{"-zeros", "0.97", "-dense"}, false, 0.97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runInferForTest(t, append([]string{"-model", "resnet20", "-width", "0.25", "-batch", "3", "-json"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			m := lastJSON(t, out)
			if r := num(t, m, "img_per_s"); !(r > 0) {
				t.Errorf("img_per_s = %v", r)
			}
			if ms := num(t, m, "ms_per_batch"); !(ms > 0) {
				t.Errorf("ms_per_batch = %v", ms)
			}
			if b := num(t, m, "batch"); b != 3 {
				t.Errorf("batch = %v", b)
			}
			z := num(t, m, "weights_zero_ratio")
			mix, ok := m["kernel_mix"].(map[string]any)
			if !ok || len(mix) != 20 {
				t.Fatalf("kernel_mix = %v, want 20 layers", m["kernel_mix"])
			}
			for name, path := range mix {
				want := "dense"
				if tc.wantSparse {
					want = "sparse"
				}
				if path != want {
					t.Errorf("layer %s ran %v, want %s", name, path, want)
				}
			}
			if z < tc.zeros-0.05 || z > tc.zeros+0.05 {
				t.Errorf("weights_zero_ratio = %v", z)
			}
			if n := num(t, m, "sparse_layers"); (n == 20) != tc.wantSparse {
				t.Errorf("sparse_layers = %v", n)
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
	out, err := runInferForTest(t, "-model", "resnet20", "-width", "0.25", "-batch", "1", "-weights", path, "-min-zeros", "0.85", "-json")
	if err != nil {
		t.Fatal(err)
	}
	r := lastJSON(t, out)
	if z, want := num(t, r, "weights_zero_ratio"), float64(zeros)/float64(total); z < want-1e-6 || z > want+1e-6 {
		t.Errorf("weights_zero_ratio = %v, want %v", z, want)
	}
	if n := num(t, r, "sparse_layers"); n != 20 {
		t.Errorf("sparse_layers = %v, want 20", n)
	}
	if _, err := runInferForTest(t, "-model", "resnet20", "-weights", path); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("full-width model from a width-0.25 file: error %v, want a shape mismatch", err)
	}
}

// TestInferWeightsMetadata checks that -weights builds the network the
// file's metadata describes (an option-B ResNet at width 0.25 with 7
// classes) without -model or -width, and that explicit flags override it.
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
	out, err := runInferForTest(t, "-weights", path, "-batch", "2", "-json")
	if err != nil {
		t.Fatal(err)
	}
	r := lastJSON(t, out)
	if r["model"] != "resnet8" {
		t.Errorf("model = %v, want resnet8 from the metadata", r["model"])
	}
	if mix := r["kernel_mix"].(map[string]any); mix["layer2.0.shortcut.0"] == nil {
		t.Errorf("kernel_mix %v lacks the option-B shortcut", mix)
	}
	if _, err := runInferForTest(t, "-weights", path, "-shortcut", "A"); err == nil || !strings.Contains(err.Error(), "unexpected") {
		t.Errorf("-shortcut A over an option-B file: error %v, want unexpected keys", err)
	}
	if _, err := runInferForTest(t, "-weights", path, "-model", "resnet20"); err == nil {
		t.Error("-model resnet20 over a resnet8 file succeeded")
	}
}

// TestInferCompacted runs a compacted model file (testdata/compact),
// built with the per-layer widths of its metadata.
func TestInferCompacted(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "compact", "resnet20_A.compact.safetensors")
	if _, err := runInferForTest(t, "-model", "resnet20", "-width", "0.25", "-batch", "2", "-weights", path, "-json"); err != nil {
		t.Fatal(err)
	}
}

func TestInferTableAndBadFlags(t *testing.T) {
	out, err := runInferForTest(t, "-model", "vgg16", "-width", "0.0625", "-batch", "1", "-zeros", "0.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"images/s", "ms/batch", "layers sparse", "features.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{
		{"-model", "lstm"}, {"-batch", "0"}, {"-steps", "0"}, {"-threads", "-1"}, {"-width", "0"},
		{"-zeros", "1.5"}, {"-min-zeros", "-1"}, {"-weights", filepath.Join(t.TempDir(), "missing.safetensors")},
		{"-nosuchflag"}, {"extra"},
	} {
		if _, err := runInferForTest(t, args...); err == nil {
			t.Errorf("runInfer(%q) succeeded, want an error", args)
		}
	}
}
