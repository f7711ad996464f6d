package experiment

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
)

// TestScaleBinary trains a small perceptron with ProxGen on momentum SGD
// and the W-shaped ℓ1 regularizer at each tensor's own scale: each weight
// gets a group whose wells are at ±(its mean |w| at the epoch's start), the
// pull moves the weights towards them, hard quantisation sets exactly ±s
// and the statistics count them as binary.
func TestScaleBinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	model := nn.NewSequential(nn.NewLinear(8, 16, true, rng), nn.ReLU{}, nn.NewLinear(16, 2, true, rng))
	regularized := func(_ string, t *autograd.Tensor) bool { return optim.IsWeight(t) }
	if _, err := NewMethod(model, MethodConfig{Optimizer: "proxgen-sgd", Reg: prox.L1(), Regularized: regularized, ScaleBinary: true}); err == nil {
		t.Fatal("ScaleBinary with ℓ1 accepted")
	}
	m, err := NewMethod(model, MethodConfig{
		Optimizer: "proxgen-sgd", Reg: prox.BinaryW(1), Lambda: 0.5, Homotopy: true, LR: 0.05,
		Regularized: regularized, Hyper: Hyper{Momentum: 0.9}, ScaleBinary: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Regs) != 2 {
		t.Fatalf("%d binarised groups, want one per weight (2)", len(m.Regs))
	}
	distance := func() float64 { // mean of ||w| − s| / s over the weights
		var d float64
		for _, g := range m.Regs {
			s, _ := prox.BinaryScale(g.Reg)
			for _, v := range g.Params[0].Data {
				d += math.Abs(math.Abs(float64(v))-s) / s / float64(len(g.Params[0].Data))
			}
		}
		return d / float64(len(m.Regs))
	}
	x := make([]float32, 32*8)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int, 32)
	for i := range labels {
		labels[i] = i % 2
	}
	var before float64
	for epoch := range 4 {
		m.SetEpoch(epoch)
		for i, g := range m.Regs {
			s, ok := prox.BinaryScale(g.Reg)
			if want := optim.MeanAbs(g.Params[0].Data); !ok || s != want {
				t.Fatalf("epoch %d group %d: scale %v (binary %v), want the mean |w| %v", epoch, i, s, ok, want)
			}
			if got := m.BinaryScale(g.Names[0]); got != float32(s) {
				t.Fatalf("BinaryScale(%s) = %v, want %v", g.Names[0], got, s)
			}
		}
		if epoch == 1 {
			before = distance()
		}
		for range 10 {
			m.Opt.ZeroGrad()
			ctx := &autograd.Context{Arena: autograd.NewArena()}
			loss := autograd.CrossEntropy(model.Forward(autograd.FromSlice(x, 32, 8).In(ctx)), labels)
			loss.Backward()
			m.Opt.Step()
		}
	}
	m.SetEpoch(4)
	if after := distance(); !(after < before/2) {
		t.Fatalf("mean distance to ±s %.4f after the pull, %.4f before: the weights did not move to the wells", after, before)
	}
	scales := make([]float32, len(m.Regs))
	for i, g := range m.Regs {
		s, _ := prox.BinaryScale(g.Reg)
		scales[i] = float32(s)
	}
	m.HardQuantize()
	for i, g := range m.Regs {
		for _, v := range g.Params[0].Data {
			if v != scales[i] && v != -scales[i] {
				t.Fatalf("group %d: %v after hard quantisation, want ±%v", i, v, scales[i])
			}
		}
	}
	if ws := ComputeWeightStatsAt(m.Weights, m.BinaryScale); ws.PM1 != 1 {
		t.Fatalf("binary fraction %v after hard quantisation, want 1", ws.PM1)
	}
	if ws := ComputeWeightStats(m.Weights); ws.PM1 != 1 {
		t.Fatalf("binary fraction %v without the scales (one magnitude per tensor), want 1", ws.PM1)
	}
}
