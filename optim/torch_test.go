package optim

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim/internal/opttest"
)

// TestBaselinesMatchPyTorch replays the gradient sequence of
// testdata/torch_baselines.json (written by torch_baselines.py with
// PyTorch 1.13) through the baseline configurations and compares every
// step's parameters with torch.optim's.
func TestBaselinesMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_baselines.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Theta0 []float32              `json:"theta0"`
		Grads  [][]float32            `json:"grads"`
		Cases  map[string][][]float64 `json:"cases"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		cfg    Config
		lr, wd float64
	}{
		"adam":         {AdamConfig(0.9, 0.999, 1e-8), 0.01, 0.05},
		"adamw":        {AdamWConfig(0.8, 0.99, 1e-6), 0.01, 0.3},
		"sgd":          {SGDConfig(0.9, false), 0.1, 1e-2},
		"sgd_nesterov": {SGDConfig(0.9, true), 0.1, 1e-2},
		"adagrad":      {AdaGradConfig(1e-10), 0.1, 0.01},
		"rmsprop":      {RMSpropConfig(0.99, 1e-8), 0.01, 0.01},
	}
	for name, c := range cases {
		traj, ok := fx.Cases[name]
		if !ok {
			t.Fatalf("fixture has no case %q", name)
		}
		p := autograd.FromSlice(append([]float32(nil), fx.Theta0...), len(fx.Theta0))
		o := New([]*Group{{Params: []*autograd.Tensor{p}, LR: c.lr, WeightDecay: c.wd}}, c.cfg)
		for k, g := range fx.Grads {
			p.Grad = append([]float32(nil), g...)
			o.Step()
			for i, want := range traj[k] {
				if !opttest.Near(float64(p.Data[i]), want, 2e-6, 1e-7) {
					t.Fatalf("%s step %d coordinate %d: %.9g, PyTorch %.9g", name, k+1, i, p.Data[i], want)
				}
			}
		}
	}
}
