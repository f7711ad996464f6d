package optim

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/proxgen/proxgen/autograd"
)

func TestClipGradNorm(t *testing.T) {
	a := autograd.FromSlice([]float32{3, 0}, 2)
	b := autograd.FromSlice([]float32{0, 0, 4}, 3)
	noGrad := autograd.New(4) // nil gradient: counts as zero
	a.Grad = []float32{3, 0}
	b.Grad = []float32{0, 0, 4}
	if n := ClipGradNorm([]*autograd.Tensor{a, b, noGrad}, 10); n != 5 || a.Grad[0] != 3 || b.Grad[2] != 4 {
		t.Errorf("below the bound: norm %v, grads %v %v", n, a.Grad, b.Grad)
	}
	if n := ClipGradNorm([]*autograd.Tensor{a, b, noGrad}, 0); n != 5 || a.Grad[0] != 3 {
		t.Errorf("no clipping: norm %v, grads %v", n, a.Grad)
	}
	if n := ClipGradNorm([]*autograd.Tensor{a, b, noGrad}, 0.25); n != 5 {
		t.Errorf("norm %v, want 5", n)
	}
	k := 0.25 / (5 + 1e-6)
	if math.Abs(float64(a.Grad[0])-3*k) > 1e-7 || math.Abs(float64(b.Grad[2])-4*k) > 1e-7 || a.Grad[1] != 0 {
		t.Errorf("clipped grads %v %v, want 3k and 4k with k = %v", a.Grad, b.Grad, k)
	}
	if n := ClipGradNorm([]*autograd.Tensor{a, b}, 0); math.Abs(n-0.25) > 1e-6 {
		t.Errorf("norm after clipping %v, want 0.25", n)
	}
	// Large tensors split into several chunks.
	big := autograd.New(3*clipGrain + 5)
	big.Grad = make([]float32, big.Numel())
	for i := range big.Grad {
		big.Grad[i] = 1
	}
	if n := ClipGradNorm([]*autograd.Tensor{big}, 0); n != math.Sqrt(float64(big.Numel())) {
		t.Errorf("norm of ones: %v, want sqrt(%d)", n, big.Numel())
	}
}

// TestClipGradNormMatchesPyTorch compares ClipGradNorm with
// torch.nn.utils.clip_grad_norm_ on the cases of
// testdata/torch_clip.json (written by torch_clip.py with PyTorch 1.13):
// gradients below, at and above the bound, several tensors, one without a
// gradient.
func TestClipGradNormMatchesPyTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/torch_clip.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string      `json:"name"`
		MaxNorm float64     `json:"max_norm"`
		Shapes  [][]int     `json:"shapes"`
		Grads   [][]float32 `json:"grads"` // nil: no gradient
		Norm    float64     `json:"norm"`
		Clipped [][]float32 `json:"clipped"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases {
		var params []*autograd.Tensor
		for i, s := range c.Shapes {
			p := autograd.New(s...)
			if c.Grads[i] != nil {
				p.Grad = append([]float32(nil), c.Grads[i]...)
			}
			params = append(params, p)
		}
		norm := ClipGradNorm(params, c.MaxNorm)
		if math.Abs(norm-c.Norm) > 1e-5*c.Norm {
			t.Errorf("%s: norm %v, PyTorch %v", c.Name, norm, c.Norm)
		}
		for i, p := range params {
			for j, v := range c.Clipped[i] {
				if d := math.Abs(float64(p.Grad[j] - v)); d > 1e-6*(1+math.Abs(float64(v))) {
					t.Errorf("%s: tensor %d grad[%d] = %v, PyTorch %v", c.Name, i, j, p.Grad[j], v)
					break
				}
			}
		}
	}
}
