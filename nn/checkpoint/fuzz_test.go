package checkpoint

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// fuzzModel is a small model with a convolution, batch-norm statistics and
// a counter.
func fuzzModel() nn.Module {
	return nn.NewSequential(nn.NewConv2d(1, 2, 3, nn.ConvOpts{Bias: true}, newRng(1)), nn.NewBatchNorm2d(2))
}

// snapshot copies every state tensor of m.
func snapshot(m nn.Module) [][]float32 {
	var s [][]float32
	for _, p := range nn.StateDict(m) {
		s = append(s, slices.Clone(p.T.Data))
	}
	return s
}

// FuzzLoadStateDict loads arbitrary bytes as a model file: a file that
// does not parse or does not fit is an error that leaves the model exactly
// as it was; a file that loads leaves only finite values and non-negative
// running variances in the model. Nothing panics.
func FuzzLoadStateDict(f *testing.F) {
	good, err := safetensors.Marshal(StateDict(fuzzModel(), ""))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	bad := StateDict(fuzzModel(), "")
	v, shape, _ := bad.Float32("1.running_var")
	v[1] = -1
	bad.Set("1.running_var", safetensors.FromFloat32(shape, v))
	b, _ := safetensors.Marshal(bad)
	f.Add(b)
	nan := StateDict(fuzzModel(), "")
	v, shape, _ = nan.Float32("0.weight")
	v[0] = float32(math.NaN())
	nan.Set("0.weight", safetensors.FromFloat32(shape, v))
	b, _ = safetensors.Marshal(nan)
	f.Add(b)
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := safetensors.Parse(data)
		if err != nil {
			return
		}
		m := fuzzModel()
		before := snapshot(m)
		for _, opt := range []LoadOptions{{}, {NonStrict: true}} {
			if err := LoadStateDict(file, m, opt); err != nil {
				if after := snapshot(m); !slices.EqualFunc(before, after, func(a, b []float32) bool {
					return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
				}) {
					t.Fatalf("failed load (%v) changed the model", err)
				}
				continue
			}
			for _, p := range nn.StateDict(m) {
				for _, x := range p.T.Data {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (p.Name == "1.running_var" && x < 0) {
						t.Fatalf("loaded %v into %s", x, p.Name)
					}
				}
			}
		}
	})
}

// TestLoadRejectsNonFinite checks the messages for NaN, Inf and a
// negative running variance, and that the model is left unchanged.
func TestLoadRejectsNonFinite(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float32
		want string
	}{
		{"0.weight", float32(math.NaN()), `tensor "0.weight": element 1 is NaN: weights must be finite`},
		{"0.bias", float32(math.Inf(1)), `tensor "0.bias": element 1 is +Inf: weights must be finite`},
		{"1.running_mean", float32(math.Inf(-1)), `tensor "1.running_mean": element 1 is -Inf`},
		{"1.running_var", -2, `tensor "1.running_var": element 1 is -2: a running variance must not be negative`},
	} {
		f := StateDict(fuzzModel(), "")
		v, shape, _ := f.Float32(c.name)
		v[1] = c.v
		f.Set(c.name, safetensors.FromFloat32(shape, v))
		m := fuzzModel()
		before := snapshot(m)
		if err := LoadStateDict(f, m, LoadOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if !slices.EqualFunc(before, snapshot(m), slices.Equal[[]float32]) {
			t.Errorf("%s: the model changed", c.name)
		}
	}
}
