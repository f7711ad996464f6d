// Package gradcheck verifies reverse-mode gradients against central finite
// differences.
//
// Check projects the output of a function onto a fixed random direction w,
// L(x) = Σ w·f(x), computes ∂L/∂x by backpropagation and compares it with
// (L(x+h·e_i) − L(x−h·e_i)) / 2h for every input element, accumulating L in
// float64 on perturbed copies of the inputs.
package gradcheck

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// Options tunes a check. The zero value uses the defaults shown.
type Options struct {
	// Step is the finite-difference step h (default 1e-2).
	Step float64
	// RTol and ATol bound |analytic − numeric| <= ATol + RTol·max(|analytic|, |numeric|)
	// (defaults 2e-2 and 2e-3).
	RTol, ATol float64
	// Seed selects the random projection direction (default 1).
	Seed uint64
	// MaxPerInput limits how many elements of each input are checked
	// (evenly spread, always including the first and last); 0 checks all.
	MaxPerInput int
}

func (o *Options) defaults() {
	if o.Step == 0 {
		o.Step = 1e-2
	}
	if o.RTol == 0 {
		o.RTol = 2e-2
	}
	if o.ATol == 0 {
		o.ATol = 2e-3
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Check compares the backpropagated gradient of Σ w·f() with respect to each
// tensor in inputs against central differences. f must build a fresh graph
// from inputs on every call and be deterministic (reseed any randomness
// inside f). Every input must be a leaf that requires a gradient. Check
// restores the inputs' data and clears their Grad before returning. It
// returns an error describing the first few mismatches.
func Check(f func() *autograd.Tensor, inputs []*autograd.Tensor, opt Options) error {
	opt.defaults()
	for i, in := range inputs {
		if !in.RequiresGrad() || !in.IsLeaf() {
			return fmt.Errorf("gradcheck: input %d (shape %v) must be a leaf that requires a gradient", i, in.Shape())
		}
		in.Grad = nil
	}
	out := f()
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	w := make([]float32, out.Numel())
	for i := range w {
		w[i] = float32(rng.Float64()*2 - 1)
	}
	project := func(t *autograd.Tensor) float64 {
		s := 0.0
		for i, v := range t.Data {
			s += float64(w[i]) * float64(v)
		}
		return s
	}
	out.BackwardWith(w)

	var errs []string
	for idx, in := range inputs {
		analytic := make([]float32, in.Numel())
		copy(analytic, in.Grad) // nil Grad means a zero gradient
		in.Grad = nil
		original := append([]float32(nil), in.Data...)
		for _, j := range indices(in.Numel(), opt.MaxPerInput) {
			in.Data[j] = float32(float64(original[j]) + opt.Step)
			hi := float64(in.Data[j])
			lp := project(f())
			in.Data[j] = float32(float64(original[j]) - opt.Step)
			lo := float64(in.Data[j])
			lm := project(f())
			in.Data[j] = original[j]
			numeric := (lp - lm) / (hi - lo)
			a := float64(analytic[j])
			if math.IsNaN(a) || math.Abs(a-numeric) > opt.ATol+opt.RTol*math.Max(math.Abs(a), math.Abs(numeric)) {
				if len(errs) < 8 {
					errs = append(errs, fmt.Sprintf("input %d %v element %d: analytic %.6g, numeric %.6g", idx, in.Shape(), j, a, numeric))
				} else {
					errs[7] = "..."
				}
			}
		}
		copy(in.Data, original)
	}
	if len(errs) > 0 {
		msg := "gradcheck: gradient mismatch:"
		for _, e := range errs {
			msg += "\n\t" + e
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// indices returns the element indices to check: all of [0,n), or at most
// max of them spread evenly.
func indices(n, max int) []int {
	if max <= 0 || n <= max {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, max)
	for i := 0; i < max; i++ {
		out = append(out, i*(n-1)/(max-1))
	}
	return out
}
