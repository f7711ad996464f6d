package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

func hcRef(la, u, beta, gamma, zeta float64, training bool) float64 {
	pre := la
	if training {
		pre = (math.Log(u) - math.Log(1-u) + la) / beta
	}
	s := 1/(1+math.Exp(-pre))*(zeta-gamma) + gamma
	return math.Min(math.Max(s, 0), 1)
}

func TestHardConcreteValues(t *testing.T) {
	h := NewHardConcrete(rand.New(rand.NewPCG(1, 2)), 3, 4)
	for i := range h.LogAlpha.Data {
		if d := float64(h.LogAlpha.Data[i]); math.Abs(d) > 0.05 {
			t.Fatalf("initial log α %g, want about N(0, 0.01²)", d)
		}
	}
	copy(h.LogAlpha.Data, []float32{-3, -1, -0.2, 0, 0.3, 1, 2, 5, -6, 0.7, -0.5, 1.5})
	// Replay the noise the module draws.
	h.rng = rand.New(rand.NewPCG(7, 8))
	z := h.Gate(nil)
	replay := rand.New(rand.NewPCG(7, 8))
	for i, la := range h.LogAlpha.Data {
		u := 1e-6 + (1-2e-6)*replay.Float64()
		want := hcRef(float64(la), u, 2.0/3, -0.1, 1.1, true)
		if math.Abs(float64(z.Data[i])-want) > 1e-6 {
			t.Fatalf("training gate %d: %g, want %g", i, z.Data[i], want)
		}
	}
	h.SetTraining(false)
	z = h.Gate(nil)
	nz := 0
	for i, la := range h.LogAlpha.Data {
		want := hcRef(float64(la), 0, 2.0/3, -0.1, 1.1, false)
		if math.Abs(float64(z.Data[i])-want) > 1e-6 {
			t.Fatalf("test gate %d: %g, want %g", i, z.Data[i], want)
		}
		if want > 0 {
			nz++
		}
	}
	if h.NonZero() != nz || nz == 0 || nz == len(h.LogAlpha.Data) {
		t.Fatalf("NonZero = %d, want %d (some but not all)", h.NonZero(), nz)
	}
	// Penalty: Σ sigmoid(log α − β log(−γ/ζ)).
	var want float64
	for _, la := range h.LogAlpha.Data {
		want += 1 / (1 + math.Exp(-(float64(la) - 2.0/3*math.Log(0.1/1.1))))
	}
	if got := float64(h.Penalty(nil).Item()); math.Abs(got-want) > 1e-5 {
		t.Fatalf("Penalty = %g, want %g", got, want)
	}
	if ps := h.Params(); len(ps) != 1 || ps[0].Name != "log_alpha" || h.Buffers() != nil {
		t.Fatalf("Params %v", ps)
	}
}

func TestHardConcreteGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := NewHardConcrete(rng, 2, 5)
	for i := range h.LogAlpha.Data {
		h.LogAlpha.Data[i] = float32(rng.NormFloat64())
	}
	w := autograd.RandN(rng, 2, 5).RequireGrad()
	// Pick a noise seed whose pre-clamp gates stay away from the kinks at
	// 0 and 1, where finite differences are not meaningful.
	var seed uint64
	for seed = 1; ; seed++ {
		r := rand.New(rand.NewPCG(seed, 9))
		ok := true
		for _, la := range h.LogAlpha.Data {
			u := 1e-6 + (1-2e-6)*r.Float64()
			pre := (math.Log(u) - math.Log(1-u) + float64(la)) / h.Beta
			s := 1/(1+math.Exp(-pre))*(h.Zeta-h.Gamma) + h.Gamma
			if math.Abs(s) < 0.05 || math.Abs(s-1) < 0.05 {
				ok = false
			}
		}
		if ok {
			break
		}
	}
	f := func() *autograd.Tensor {
		h.rng = rand.New(rand.NewPCG(seed, 9))
		return h.Forward(w)
	}
	if err := gradcheck.Check(f, []*autograd.Tensor{w, h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
	if err := gradcheck.Check(func() *autograd.Tensor { return h.Penalty(nil) }, []*autograd.Tensor{h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
	h.SetTraining(false)
	if err := gradcheck.Check(func() *autograd.Tensor { return h.Forward(w) }, []*autograd.Tensor{w, h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
}

func TestHardConcreteShapePanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on shape mismatch")
		}
	}()
	NewHardConcrete(rand.New(rand.NewPCG(1, 1)), 2, 3).Forward(autograd.New(3, 2))
}
