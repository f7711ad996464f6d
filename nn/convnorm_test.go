package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// badPairs declares a pair that is not a convolution and a batch norm.
type badPairs struct{ *nn.Sequential }

func (badPairs) NormPairs() [][2]string { return [][2]string{{"0", "1"}} }

// TestConvNormsZeroChannel checks that ConvNorms finds the convolutions
// that feed a batch norm and that zeroing filter c with γ[c] and β[c]
// makes channel c exactly zero in training and evaluation mode, while a
// zero filter alone does not.
func TestConvNormsZeroChannel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	conv1 := nn.NewConv2d(3, 4, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng)
	bn1 := nn.NewBatchNorm2d(4)
	inner := nn.NewSequential(nn.NewConv2d(4, 5, 1, nn.ConvOpts{}, rng), nn.NewBatchNorm2d(5))
	m := nn.NewSequential(conv1, bn1, nn.ReLU{}, inner, nn.ReLU{})
	got := nn.ConvNorms(m)
	want := [][3]string{{"0.weight", "1.weight", "1.bias"}, {"3.0.weight", "3.1.weight", "3.1.bias"}}
	if len(got) != len(want) {
		t.Fatalf("ConvNorms found %d pairs, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; g.Weight.Name != w[0] || g.Gamma.Name != w[1] || g.Beta.Name != w[2] {
			t.Fatalf("pair %d: %s %s %s, want %v", i, g.Weight.Name, g.Gamma.Name, g.Beta.Name, w)
		}
	}
	if got[0].Weight.T != conv1.Weight || got[0].Gamma.T != bn1.Weight || got[0].Beta.T != bn1.Bias {
		t.Fatal("pair 0 does not hold the layers' tensors")
	}

	// Channel 1 of the first pair: the filter alone, then the whole group.
	x := autograd.RandN(rng, 2, 3, 5, 5)
	for i := range conv1.Bias.Data {
		conv1.Bias.Data[i] = 0.5
	}
	for i := range bn1.Weight.Data {
		bn1.Weight.Data[i], bn1.Bias.Data[i] = 1.5, 0.3
	}
	k := conv1.Weight.Numel() / 4
	clear(conv1.Weight.Data[k : 2*k])
	channel := func(training bool) []float32 {
		head := nn.NewSequential(conv1, bn1, nn.ReLU{})
		head.SetTraining(training)
		y := head.Forward(x)
		hw := y.Dim(2) * y.Dim(3)
		var out []float32
		for n := range y.Dim(0) {
			out = append(out, y.Data[(n*4+1)*hw:(n*4+2)*hw]...)
		}
		return out
	}
	anyNonZero := func(v []float32) bool {
		for _, e := range v {
			if e != 0 {
				return true
			}
		}
		return false
	}
	channel(true) // running statistics
	if !anyNonZero(channel(true)) || !anyNonZero(channel(false)) {
		t.Fatal("a zero filter alone gave a zero channel: the test cannot tell")
	}
	bn1.Weight.Data[1], bn1.Bias.Data[1] = 0, 0
	for _, training := range []bool{true, false} {
		if v := channel(training); anyNonZero(v) {
			t.Fatalf("training = %v: zero filter, γ and β give channel values %v", training, v)
		}
	}

	defer func() {
		if recover() == nil {
			t.Fatal("a declared pair of the wrong types did not panic")
		}
	}()
	nn.ConvNorms(badPairs{nn.NewSequential(nn.NewBatchNorm2d(4), nn.NewConv2d(3, 4, 1, nn.ConvOpts{}, rng))})
}
