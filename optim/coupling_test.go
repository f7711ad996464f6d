package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// coupledNet is a weight with per-filter companions (γ, β) and the same
// coordinates as one tensor whose rows are (filter c, γ[c], β[c]): ByFilter
// groups of the joined tensor are exactly the coupled groups, and every
// optimizer of this package updates coordinates one by one apart from the
// group map, so both must give the same bits.
type coupledNet struct {
	w, gamma, beta *autograd.Tensor
	joined         *autograd.Tensor
}

func newCoupledNet(rng *rand.Rand, cout, k int) *coupledNet {
	n := &coupledNet{
		w:      autograd.RandN(rng, cout, k),
		gamma:  autograd.RandN(rng, cout),
		beta:   autograd.RandN(rng, cout),
		joined: autograd.New(cout, k+2),
	}
	// Filter c and its γ, β scaled by (c+1)/cout: the group maps zero
	// the small ones.
	for c := range cout {
		f := float32(c+1) / float32(cout)
		for i := range k {
			n.w.Data[c*k+i] *= 0.1 * f
		}
		n.gamma.Data[c] *= f
		n.beta.Data[c] *= f
	}
	n.join(func(t *autograd.Tensor) []float32 { return t.Data })
	return n
}

// join copies the rows of w, γ and β (through field) into the joined
// tensor's same field.
func (n *coupledNet) join(field func(*autograd.Tensor) []float32) {
	cout, k := n.w.Dim(0), n.w.Dim(1)
	j, w, g, b := field(n.joined), field(n.w), field(n.gamma), field(n.beta)
	for c := range cout {
		copy(j[c*(k+2):], w[c*k:(c+1)*k])
		j[c*(k+2)+k] = g[c]
		j[c*(k+2)+k+1] = b[c]
	}
}

func (n *coupledNet) setGrads(rng *rand.Rand) {
	for _, t := range []*autograd.Tensor{n.w, n.gamma, n.beta} {
		t.Grad = make([]float32, t.Numel())
		for i := range t.Grad {
			t.Grad[i] = float32(0.1 * rng.NormFloat64())
		}
	}
	n.joined.Grad = make([]float32, n.joined.Numel())
	n.join(func(t *autograd.Tensor) []float32 { return t.Grad })
}

// groups returns the coupled groups (weight regularized, γ and β in the
// unregularized group, coupled) and the joined tensor's group.
func (n *coupledNet) groups(reg prox.GroupRegularizer, lambda, wd float64) (coupled, joined []*Group) {
	coupled = []*Group{
		{Params: []*autograd.Tensor{n.w}, Names: []string{"w"}, Reg: reg, Lambda: lambda, WeightDecay: wd, LR: 0.05},
		{Params: []*autograd.Tensor{n.gamma, n.beta}, Names: []string{"gamma", "beta"}, WeightDecay: wd, LR: 0.05},
	}
	if !Couple(coupled, n.w, n.gamma, n.beta) {
		panic("Couple refused")
	}
	joined = []*Group{{Params: []*autograd.Tensor{n.joined}, Names: []string{"j"}, Reg: reg, Lambda: lambda, WeightDecay: wd, LR: 0.05}}
	return coupled, joined
}

// coupledCase builds an optimizer over groups.
type coupledCase struct {
	name string
	make func(gs []*Group) Optimizer
}

func coupledCases() []coupledCase {
	gen := func(cfg Config) func(gs []*Group) Optimizer {
		return func(gs []*Group) Optimizer { return New(gs, cfg) }
	}
	generic := func(cfg Config) func(gs []*Group) Optimizer {
		return func(gs []*Group) Optimizer { o := New(gs, cfg); o.generic = true; return o }
	}
	sub := AdamWConfig(0.9, 0.999, 1e-8)
	sub.RegMode = RegSubgradient
	eu := ProxGenAdam(0.9, 0.999, 1e-8)
	eu.Metric = Euclidean
	return []coupledCase{
		{"proxgen", gen(ProxGenAdam(0.9, 0.999, 1e-8))},
		{"proxgen-generic", generic(ProxGenAdam(0.9, 0.999, 1e-8))},
		{"proxgen-euclidean", gen(eu)},
		{"subgradient", gen(sub)},
		{"proxsgd", func(gs []*Group) Optimizer {
			return NewProxSGD(gs, ProxSGDConfig{Eps: schedule.Constant{}, Rho: schedule.Constant{}, Rho0: 0.5})
		}},
	}
}

// TestCouplingEqualsJoinedTensor checks every optimizer that applies group
// regularizers with coupled companions against the joined tensor, bit for
// bit, and that whole groups, γ and β included, become exactly zero.
func TestCouplingEqualsJoinedTensor(t *testing.T) {
	// 40 filters of 144 coordinates: several chunks and work items.
	const cout, k = 40, 144
	for _, oc := range coupledCases() {
		for _, reg := range []prox.GroupRegularizer{prox.GroupL0(prox.ByFilter), prox.GroupLasso(prox.ByFilter)} {
			t.Run(fmt.Sprintf("%s/%v", oc.name, reg), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(41, 42))
				n := newCoupledNet(rng, cout, k)
				l0 := strings.HasPrefix(fmt.Sprint(reg), "gl0")
				lambda := 0.7
				switch {
				case oc.name == "subgradient" && l0:
					t.Skip("group ℓ0 has no subgradient")
				case oc.name == "subgradient":
					lambda = 0.2
				case l0:
					lambda = 1
				}
				if oc.name == "proxgen-euclidean" {
					lambda *= 10 // η = α is 10 times Adam's η here
				}
				// Prox-SGD's θ only moves toward x̂ (ε = 0.05 here), so no
				// coordinate reaches zero.
				wantZeros := oc.name != "subgradient" && oc.name != "proxsgd"
				cg, jg := n.groups(reg, lambda, 0.01)
				a, b := oc.make(cg), oc.make(jg)
				for range 8 {
					n.setGrads(rng)
					a.Step()
					b.Step()
				}
				got := autograd.New(cout, k+2)
				for i, v := range n.joined.Data {
					got.Data[i] = v
				}
				n.join(func(t *autograd.Tensor) []float32 { return t.Data })
				for i := range got.Data {
					if math.Float32bits(got.Data[i]) != math.Float32bits(n.joined.Data[i]) {
						t.Fatalf("element %d (row %d): joined %g, coupled %g", i, i/(k+2), got.Data[i], n.joined.Data[i])
					}
				}
				nz, groups := prox.GroupNonZero(prox.ByFilter, n.w.Data, n.w.Shape(), n.gamma.Data, n.beta.Data)
				wantNZ, _ := prox.GroupNonZero(prox.ByFilter, got.Data, got.Shape())
				if nz != wantNZ {
					t.Fatalf("prox.GroupNonZero with companions %d, joined %d", nz, wantNZ)
				}
				if p, q := Penalty(cg), Penalty(jg); p != q {
					t.Fatalf("Penalty coupled %g, joined %g", p, q)
				}
				if wantZeros && (nz == 0 || nz == groups) {
					t.Fatalf("%d of %d groups non-zero: want some zeroed", nz, groups)
				}
				for c := range cout {
					zero := n.gamma.Data[c] == 0 && n.beta.Data[c] == 0
					for _, v := range n.w.Data[c*k : (c+1)*k] {
						zero = zero && v == 0
					}
					if z2 := n.gamma.Data[c] == 0 || n.beta.Data[c] == 0; z2 != zero && wantZeros {
						t.Fatalf("channel %d: γ = %g, β = %g but the group is not zero as a whole", c, n.gamma.Data[c], n.beta.Data[c])
					}
				}
			})
		}
	}
}

// TestCoupledProxRule checks the coupled work item against the group map
// applied to the gathered group (filter then companions) and the group ℓ0
// rule on the gathered sums: a filter whose own cost is below λ is kept
// because of its companions.
func TestCoupledProxRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	const cout, k = 6, 8
	for _, reg := range []prox.GroupRegularizer{prox.GroupL0(prox.ByFilter), prox.GroupLasso(prox.ByFilter)} {
		x := make([]float32, cout*k)
		eta := make([]float32, cout*k)
		for i := range x {
			x[i] = float32(0.1 * rng.NormFloat64())
			eta[i] = float32(0.01 * (0.5 + rng.Float64()))
		}
		cz, ce := [2][]float32{make([]float32, cout), make([]float32, cout)}, [2][]float32{make([]float32, cout), make([]float32, cout)}
		for j := range 2 {
			for c := range cout {
				cz[j][c] = float32(rng.NormFloat64())
				ce[j][c] = float32(0.01 * (0.5 + rng.Float64()))
			}
		}
		// cost returns Σ z²/(2η) of filter c alone and with its
		// companions.
		cost := func(c int) (own, all float64) {
			for i := range k {
				own += float64(x[c*k+i]) * float64(x[c*k+i]) / (2 * float64(eta[c*k+i]))
			}
			all = own
			for j := range 2 {
				all += float64(cz[j][c]) * float64(cz[j][c]) / (2 * float64(ce[j][c]))
			}
			return own, all
		}
		// λ between filter 0's own cost and its cost with γ, β: group
		// ℓ0 would zero the filter alone but keeps the coupled group.
		own0, all0 := cost(0)
		lam := float32((own0 + all0) / 2)
		ws := appendGroupWork(nil, 0, reg, []int{cout, k})
		ws[0].comps = []int{1, 2}
		ws[0].buf = make([]float32, 2*(k+2))
		got := append([]float32(nil), x...)
		gz := [2][]float32{append([]float32(nil), cz[0]...), append([]float32(nil), cz[1]...)}
		ws[0].prox(got, eta, 0, lam, 0, []member{{gz[0], ce[0], 0}, {gz[1], ce[1], 0}})
		for c := range cout {
			z := append(append([]float32(nil), x[c*k:(c+1)*k]...), cz[0][c], cz[1][c])
			e := append(append([]float32(nil), eta[c*k:(c+1)*k]...), ce[0][c], ce[1][c])
			reg.Prox(z, z, e, lam)
			w := append(append([]float32(nil), got[c*k:(c+1)*k]...), gz[0][c], gz[1][c])
			for i := range z {
				if math.Float32bits(z[i]) != math.Float32bits(w[i]) {
					t.Fatalf("%v filter %d coordinate %d: coupled %g, gathered %g", reg, c, i, w[i], z[i])
				}
			}
		}
		if strings.HasPrefix(fmt.Sprint(reg), "gl0") {
			for c := range cout {
				_, all := cost(c)
				if kept := got[c*k] != 0; kept != (all > float64(lam)) {
					t.Fatalf("gl0 filter %d: kept = %v with cost %g, λ = %g", c, kept, all, lam)
				}
			}
			if got[0] == 0 || own0 >= float64(lam) {
				t.Fatalf("gl0 filter 0: own cost %g, λ = %g, kept = %v", own0, lam, got[0] != 0)
			}
		}
	}
}

// TestCouplingResumeAndWorkers checks that a coupled run is the same with
// 1 and 3 workers and that saving and loading the state mid-run gives the
// same bits.
func TestCouplingResumeAndWorkers(t *testing.T) {
	const cout, k = 40, 144
	for _, oc := range coupledCases() {
		run := func(workers, split int) []float32 {
			old := parallel.SetWorkers(workers)
			defer parallel.SetWorkers(old)
			rng := rand.New(rand.NewPCG(45, 46))
			n := newCoupledNet(rng, cout, k)
			cg, _ := n.groups(prox.GroupLasso(prox.ByFilter), 2e-3, 0.01)
			o := oc.make(cg)
			for s := range 6 {
				if s == split {
					st := o.State()
					o = oc.make(cg)
					if err := o.LoadState(st); err != nil {
						t.Fatal(err)
					}
				}
				n.setGrads(rng)
				o.Step()
			}
			return append(append(append([]float32(nil), n.w.Data...), n.gamma.Data...), n.beta.Data...)
		}
		ref := run(1, -1)
		for _, alt := range [][2]int{{3, -1}, {1, 3}, {3, 2}} {
			got := run(alt[0], alt[1])
			for i := range ref {
				if math.Float32bits(ref[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s, %d workers, resumed at %d: element %d %g vs %g", oc.name, alt[0], alt[1], i, got[i], ref[i])
				}
			}
		}
	}
}

// TestCouplingChecks checks the panics of invalid couplings and that
// frozen companions drop out of the groups.
func TestCouplingChecks(t *testing.T) {
	w, g, b := autograd.New(4, 3), autograd.New(4), autograd.New(3)
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	cfg := ProxGenAdam(0.9, 0.999, 1e-8)
	mustPanic("wrong size", func() {
		New([]*Group{{Params: []*autograd.Tensor{w}, Reg: prox.GroupL0(prox.ByFilter), Couplings: []Coupling{{w, []*autograd.Tensor{b}}}}, {Params: []*autograd.Tensor{b}}}, cfg)
	})
	mustPanic("not a parameter", func() {
		New([]*Group{{Params: []*autograd.Tensor{w}, Reg: prox.GroupL0(prox.ByFilter), Couplings: []Coupling{{w, []*autograd.Tensor{g}}}}}, cfg)
	})
	mustPanic("regularized companion", func() {
		New([]*Group{{Params: []*autograd.Tensor{w, g}, Reg: prox.GroupL0(prox.ByFilter), Couplings: []Coupling{{w, []*autograd.Tensor{g}}}}}, cfg)
	})
	mustPanic("input channels", func() {
		NewProxSGD([]*Group{{Params: []*autograd.Tensor{w}, Reg: prox.GroupL0(prox.ByInputChannel), Couplings: []Coupling{{w, []*autograd.Tensor{g}}}}, {Params: []*autograd.Tensor{g}}}, ProxSGDConfig{})
	})
	mustPanic("twice", func() {
		w2 := autograd.New(4, 2)
		New([]*Group{{Params: []*autograd.Tensor{w, w2}, Reg: prox.GroupL0(prox.ByFilter), Couplings: []Coupling{{w, []*autograd.Tensor{g}}, {w2, []*autograd.Tensor{g}}}}, {Params: []*autograd.Tensor{g}}}, cfg)
	})
	if Couple([]*Group{{Params: []*autograd.Tensor{w}, Reg: prox.L1()}}, w, g) {
		t.Error("Couple accepted a scalar regularizer")
	}
	if Couple([]*Group{{Params: []*autograd.Tensor{w}, Reg: prox.GroupL0(prox.ByInputChannel)}}, w, g) {
		t.Error("Couple accepted input-channel groups")
	}
	// A frozen companion keeps its values; the weight's groups are then
	// mapped alone: a large λ zeroes the filters but not γ.
	rng := rand.New(rand.NewPCG(47, 48))
	n := newCoupledNet(rng, 4, 3)
	cg, _ := n.groups(prox.GroupL0(prox.ByFilter), 1e6, 0)
	cg[1].Frozen = true
	before := append([]float32(nil), n.gamma.Data...)
	n.setGrads(rng)
	New(cg, cfg).Step()
	for c := range 4 {
		if n.gamma.Data[c] != before[c] || n.w.Data[c*3] != 0 {
			t.Fatalf("frozen companion: γ %v (was %v), w %v", n.gamma.Data, before, n.w.Data)
		}
	}
}
