package models_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

// fixtureDir holds the output of testdata/gen_models.py.
var fixtureDir = filepath.Join("..", "..", "testdata", "models")

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xc1fa)) }

// build returns the model that testdata/gen_models.py describes as name.
func build(t *testing.T, name string, rng *rand.Rand) nn.Module {
	t.Helper()
	switch name {
	case "lm_ptb":
		return models.NewLanguageModel(10000, 300, 300, 1, 0.5, rng)
	case "lm_2layer":
		return models.NewLanguageModel(40, 12, 10, 2, 0.3, rng)
	}
	var opts []models.Option
	base, rest, _ := strings.Cut(name, "_")
	for _, o := range strings.Split(rest, "_") {
		switch {
		case o == "":
		case o == "B":
			opts = append(opts, models.WithShortcut(models.ShortcutB))
		case strings.HasPrefix(o, "w"):
			var w float64
			if _, err := fmt.Sscan(o[1:], &w); err != nil {
				t.Fatalf("bad width in fixture name %q", name)
			}
			opts = append(opts, models.WithWidth(w))
		default:
			t.Fatalf("unknown option %q in fixture name %q", o, name)
		}
	}
	m, err := models.New(base, 10, rng, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type description struct {
	NumParams int               `json:"num_params"`
	StateDict []json.RawMessage `json:"state_dict"`
}

// TestStateDictsMatchPyTorch compares names, order, shapes and dtypes of
// every model's state dict, and its parameter count, with PyTorch's.
func TestStateDictsMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtureDir, "state_dicts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]description
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vgg16", "resnet18", "resnet34", "resnet20", "resnet32", "resnet44", "resnet56",
		"resnet20_B", "resnet56_B", "vgg16_w0.03125", "resnet34_w0.03125", "resnet20_B_w0.25", "lm_ptb", "lm_2layer"} {
		t.Run(name, func(t *testing.T) {
			want, ok := all[name]
			if !ok {
				t.Fatalf("fixture has no model %q", name)
			}
			m := build(t, name, newRng(1))
			if got := nn.NumParams(m); got != want.NumParams {
				t.Errorf("NumParams = %d, PyTorch has %d", got, want.NumParams)
			}
			sd := nn.StateDict(m)
			if len(sd) != len(want.StateDict) {
				t.Errorf("state dict has %d entries, PyTorch has %d", len(sd), len(want.StateDict))
			}
			for i := range min(len(sd), len(want.StateDict)) {
				var key, dtype string
				var shape []int
				if err := json.Unmarshal(want.StateDict[i], &[]any{&key, &shape, &dtype}); err != nil {
					t.Fatal(err)
				}
				p := sd[i]
				gotDtype := "float32"
				if p.Int64 {
					gotDtype = "int64"
				}
				if p.Name != key || !slices.Equal(p.T.Shape(), shape) || gotDtype != dtype {
					t.Fatalf("entry %d is %s %v %s, PyTorch has %s %v %s", i, p.Name, p.T.Shape(), gotDtype, key, shape, dtype)
				}
			}
		})
	}
}

func readFixture(t *testing.T, name string) *safetensors.File {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(fixtureDir, name+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tensor(t *testing.T, f *safetensors.File, name string) *autograd.Tensor {
	t.Helper()
	data, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return autograd.FromSlice(data, shape...)
}

func ints(t *testing.T, f *safetensors.File, name string) []int {
	t.Helper()
	st, ok := f.Tensors[name]
	if !ok {
		t.Fatalf("fixture has no tensor %q", name)
	}
	v, err := st.Int64()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// loadState copies the fixture's "sd." tensors into m's state dict,
// requiring the same set of names and shapes.
func loadState(t *testing.T, m nn.Module, f *safetensors.File) {
	t.Helper()
	seen := 0
	for _, p := range nn.StateDict(m) {
		src := tensor(t, f, "sd."+p.Name)
		if !slices.Equal(src.Shape(), p.T.Shape()) {
			t.Fatalf("%s: fixture shape %v, model shape %v", p.Name, src.Shape(), p.T.Shape())
		}
		copy(p.T.Data, src.Data)
		seen++
	}
	total := 0
	for _, name := range f.Names() {
		if strings.HasPrefix(name, "sd.") {
			total++
		}
	}
	if seen != total {
		t.Fatalf("model has %d state entries, fixture %d", seen, total)
	}
}

// compare fails unless got and want have the same shape and
// max|got−want| <= rtol·max|want| + atol.
func compare(t *testing.T, what string, got, want *autograd.Tensor, rtol, atol float64) {
	t.Helper()
	if !slices.Equal(got.Shape(), want.Shape()) {
		t.Errorf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
		return
	}
	scale, worst, at := 0.0, 0.0, 0
	for i := range want.Data {
		scale = math.Max(scale, math.Abs(float64(want.Data[i])))
		if d := math.Abs(float64(got.Data[i] - want.Data[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if testing.Verbose() {
		t.Logf("%s: max error %.2g of max %.2g", what, worst, scale)
	}
	if allowed := rtol*scale + atol; !(worst <= allowed) {
		t.Errorf("%s: max error %.3g at element %d (got %g, want %g), allowed %.3g",
			what, worst, at, got.Data[at], want.Data[at], allowed)
	}
}

// TestForwardMatchesPyTorch loads random weights and batch-norm statistics
// into small CIFAR models and compares the eval-mode output, the
// train-mode output, the updated buffers and the gradients of the
// cross-entropy with PyTorch.
//
// The full-width ResNet-20 has about 600,000 ReLU inputs in its first
// stage, a few of them within 1e-6 of zero, where float32 rounding can
// flip the ReLU (a flip changes the gradient of every tensor before it
// by up to about 1e-3); its gradients are checked to 1e-2 of their
// largest element, the narrow models' to 1e-3. Conv biases before batch
// norm have a zero gradient, which float32 only reaches to about 1e-6,
// hence the absolute 1e-5.
func TestForwardMatchesPyTorch(t *testing.T) {
	for _, c := range []struct {
		name    string
		gradTol float64
	}{{"resnet20", 1e-2}, {"resnet20_B_w0.25", 1e-3}, {"vgg16_w0.03125", 1e-3}, {"resnet34_w0.03125", 1e-3}} {
		name := c.name
		t.Run(name, func(t *testing.T) {
			f := readFixture(t, name)
			m := build(t, name, newRng(2))
			loadState(t, m, f)
			x := tensor(t, f, "x")

			m.SetTraining(false)
			out := m.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(&autograd.Context{NoGrad: true}))
			compare(t, "eval output", out, tensor(t, f, "out_eval"), 3e-5, 1e-6)

			m.SetTraining(true)
			out = m.Forward(x)
			compare(t, "train output", out, tensor(t, f, "out_train"), 3e-5, 1e-6)
			autograd.CrossEntropy(out, ints(t, f, "labels")).Backward()
			grads := 0
			for _, p := range nn.StateDict(m) {
				if _, ok := f.Tensors["buf."+p.Name]; ok {
					compare(t, "buffer "+p.Name, p.T, tensor(t, f, "buf."+p.Name), 1e-5, 1e-6)
				}
				if _, ok := f.Tensors["grad."+p.Name]; ok {
					g := autograd.FromSlice(p.T.Grad, p.T.Shape()...)
					compare(t, "gradient of "+p.Name, g, tensor(t, f, "grad."+p.Name), c.gradTol, 1e-5)
					grads++
				}
			}
			if grads == 0 {
				t.Error("fixture has no gradients")
			}
		})
	}
}

// TestLanguageModelMatchesPyTorch runs a two-layer LSTM language model from
// a random initial state in evaluation mode and compares logits, final
// state and gradients with PyTorch.
func TestLanguageModelMatchesPyTorch(t *testing.T) {
	f := readFixture(t, "lm_2layer")
	m := build(t, "lm_2layer", newRng(3)).(*models.LanguageModel)
	loadState(t, m, f)
	m.SetTraining(false)
	ids := ints(t, f, "ids")
	h0, c0 := tensor(t, f, "h0"), tensor(t, f, "c0")
	layers, batch, hid := h0.Dim(0), h0.Dim(1), h0.Dim(2)
	steps := len(ids) / batch
	split := func(s *autograd.Tensor) []*autograd.Tensor {
		var out []*autograd.Tensor
		for l := range layers {
			out = append(out, autograd.FromSlice(s.Data[l*batch*hid:(l+1)*batch*hid], batch, hid))
		}
		return out
	}
	logits, final := m.Run(nil, ids, steps, batch, nn.LSTMState{H: split(h0), C: split(c0)})
	compare(t, "logits", logits, tensor(t, f, "out"), 1e-5, 1e-6)
	h := autograd.Concat(0, final.H...)
	c := autograd.Concat(0, final.C...)
	compare(t, "final h", autograd.Reshape(h, layers, batch, hid), tensor(t, f, "h"), 1e-5, 1e-6)
	compare(t, "final c", autograd.Reshape(c, layers, batch, hid), tensor(t, f, "c"), 1e-5, 1e-6)
	autograd.CrossEntropy(logits, ints(t, f, "targets")).Backward()
	for _, p := range m.Params() {
		compare(t, "gradient of "+p.Name, autograd.FromSlice(p.T.Grad, p.T.Shape()...), tensor(t, f, "grad."+p.Name), 1e-5, 1e-6)
	}

	// Forward on a (steps, batch) tensor of ids from zero states gives the
	// same logits as Run from zero states.
	x := autograd.New(steps, batch)
	for i, id := range ids {
		x.Data[i] = float32(id)
	}
	noGrad := &autograd.Context{NoGrad: true}
	a := m.Forward(x.In(noGrad))
	b, _ := m.Run(noGrad, ids, steps, batch, nn.LSTMState{})
	if a.RequiresGrad() || b.RequiresGrad() {
		t.Error("the language model in a NoGrad context recorded the graph")
	}
	if !slices.Equal(a.Data, b.Data) {
		t.Error("Forward and Run from zero states disagree")
	}
}

func TestPadShortcut(t *testing.T) {
	p := models.NewPadShortcut(2, 4)
	rng := newRng(4)
	x := autograd.RandN(rng, 2, 2, 5, 4)
	out := p.Forward(x)
	if want := []int{2, 4, 3, 2}; !slices.Equal(out.Shape(), want) {
		t.Fatalf("shape %v, want %v", out.Shape(), want)
	}
	// out[n, c, i, j] = x[n, c-1, 2i, 2j] for c in {1, 2}, else 0.
	for n := range 2 {
		for c := range 4 {
			for i := range 3 {
				for j := range 2 {
					want := float32(0)
					if c >= 1 && c <= 2 {
						want = x.Data[((n*2+c-1)*5+2*i)*4+2*j]
					}
					if got := out.Data[((n*4+c)*3+i)*2+j]; got != want {
						t.Fatalf("out[%d,%d,%d,%d] = %g, want %g", n, c, i, j, got, want)
					}
				}
			}
		}
	}
	if err := gradcheck.Check(func() *autograd.Tensor { return p.Forward(x) }, []*autograd.Tensor{x.RequireGrad()}, gradcheck.Options{}); err != nil {
		t.Error(err)
	}
}

// TestBlockGrad gradient-checks a downsampling residual block with each
// shortcut kind in training mode.
func TestBlockGrad(t *testing.T) {
	for _, kind := range []models.ShortcutKind{models.ShortcutA, models.ShortcutB} {
		t.Run(kind.String(), func(t *testing.T) {
			rng := newRng(5)
			m, err := models.New("resnet8", 3, rng, models.WithShortcut(kind), models.WithWidth(0.125))
			if err != nil {
				t.Fatal(err)
			}
			block := m.(*models.ResNet).Stages[1].Layers[0].(*models.BasicBlock)
			x := autograd.RandN(rng, 3, 2, 4, 4).RequireGrad()
			inputs := []*autograd.Tensor{x}
			for _, p := range block.Params() {
				inputs = append(inputs, p.T)
			}
			f := func() *autograd.Tensor { return block.Forward(x) }
			if err := gradcheck.Check(f, inputs, gradcheck.Options{Step: 1e-3, RTol: 5e-2, ATol: 5e-3}); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []struct {
		name    string
		classes int
		opts    []models.Option
	}{
		{"resnet21", 10, nil},
		{"resnet", 10, nil},
		{"alexnet", 10, nil},
		{"resnet20", 0, nil},
		{"vgg16", 10, []models.Option{models.WithWidth(0)}},
		{"resnet20", 10, []models.Option{models.WithShortcut(7)}},
	} {
		if _, err := models.New(bad.name, bad.classes, newRng(1), bad.opts...); err == nil {
			t.Errorf("New(%q, %d) succeeded, want an error", bad.name, bad.classes)
		}
	}
	m, err := models.New("resnet110", 100, newRng(1))
	if err != nil {
		t.Fatal(err)
	}
	r := m.(*models.ResNet)
	if len(r.Stages) != 3 || len(r.Stages[2].Layers) != 18 || r.Linear.Weight.Dim(0) != 100 {
		t.Errorf("resnet110: %d stages, %d blocks in the last, %d classes", len(r.Stages), len(r.Stages[2].Layers), r.Linear.Weight.Dim(0))
	}

	// Same seed, same weights; akamaster weights are kaiming_normal_.
	a, _ := models.New("resnet20", 10, newRng(7))
	b, _ := models.New("resnet20", 10, newRng(7))
	for i, p := range a.Params() {
		if !slices.Equal(p.T.Data, b.Params()[i].T.Data) {
			t.Fatalf("%s differs between two builds with the same seed", p.Name)
		}
	}
	w := a.(*models.ResNet).Stages[2].Layers[1].(*models.BasicBlock).Conv2.Weight
	var ss float64
	for _, v := range w.Data {
		ss += float64(v) * float64(v)
	}
	if std, want := math.Sqrt(ss/float64(w.Numel())), math.Sqrt(2.0/(64*9)); math.Abs(std/want-1) > 0.02 {
		t.Errorf("layer3.1.conv2.weight std %g, want kaiming_normal_ %g", std, want)
	}
}

// TestModelsOutputShape runs every named model on a small batch.
func TestModelsOutputShape(t *testing.T) {
	x := autograd.RandN(newRng(8), 2, 3, 32, 32)
	for _, name := range models.Names() {
		m, err := models.New(name, 7, newRng(9), models.WithWidth(0.0625))
		if err != nil {
			t.Fatal(err)
		}
		m.SetTraining(false)
		out := m.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(&autograd.Context{NoGrad: true}))
		if !slices.Equal(out.Shape(), []int{2, 7}) {
			t.Errorf("%s: output shape %v, want [2 7]", name, out.Shape())
		}
	}
}

// TestConvNorms checks that nn.ConvNorms pairs every convolution of the
// CIFAR models with the batch norm that follows it.
func TestConvNorms(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []models.Option
		pairs int
	}{
		{"vgg16", nil, 13},
		{"resnet20", nil, 19},
		{"resnet20", []models.Option{models.WithShortcut(models.ShortcutB)}, 21},
		{"resnet18", nil, 20},
	} {
		m, err := models.New(c.name, 10, newRng(1), append(c.opts, models.WithWidth(0.125))...)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*autograd.Tensor{}
		convs := 0
		for _, p := range m.Params() {
			byName[p.Name] = p.T
			if p.T.Rank() == 4 {
				convs++
			}
		}
		cn := nn.ConvNorms(m)
		seen := map[*autograd.Tensor]bool{}
		for _, p := range cn {
			w := p.Weight.T
			if seen[w] || w.Rank() != 4 || byName[p.Weight.Name] != w || byName[p.Gamma.Name] != p.Gamma.T || byName[p.Beta.Name] != p.Beta.T {
				t.Fatalf("%s: pair %s, %s, %s does not name the model's tensors", c.name, p.Weight.Name, p.Gamma.Name, p.Beta.Name)
			}
			seen[w] = true
			stem := strings.TrimSuffix(p.Gamma.Name, ".weight")
			if p.Beta.Name != stem+".bias" || p.Gamma.T.Numel() != w.Dim(0) {
				t.Fatalf("%s: %s is not the batch norm of %s", c.name, stem, p.Weight.Name)
			}
		}
		if len(cn) != c.pairs || convs != c.pairs {
			t.Errorf("%s: %d pairs for %d convolutions, want %d", c.name, len(cn), convs, c.pairs)
		}
	}
}
