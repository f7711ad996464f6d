package experiment

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/proxgen/proxgen/nn"
)

// GMP is gradual magnitude pruning (Zhu & Gupta, "To prune, or not to
// prune", 2017), the baseline a PyTorch user builds from
// torch.nn.utils.prune: every Every updates from update Begin to update
// End, the weights with the smallest magnitudes are set to zero and kept
// there, until the fraction of zeros follows the cubic schedule
//
//	s_t = Final·(1 − (1 − (t − Begin)/(End − Begin))³)
//
// from 0 at Begin to Final at End (and Final after End). The magnitudes
// are ranked over all the weights together (torch.nn.utils.prune's
// global_unstructured with L1Unstructured), ties broken by the order of
// the weights; a pruned weight stays pruned (its mask is never cleared),
// so each pruning step only adds the smallest of the weights still
// unpruned. Call Step after every optimizer update.
type GMP struct {
	// Final is the target fraction of zeros s_f, in [0, 1).
	Final float64
	// Begin and End are the updates (counted from 1, as
	// optim.Optimizer.Steps) of the first and last pruning step; Every is
	// the number of updates between two steps (Δt).
	Begin, End, Every int

	weights []nn.Param
	pruned  [][]bool // per weight tensor: true where pruned
	count   int      // pruned entries
}

// NewGMP returns the pruner of weights with the given schedule. It panics
// unless 0 ≤ final < 1, 0 ≤ begin ≤ end and every ≥ 1.
func NewGMP(weights []nn.Param, final float64, begin, end, every int) *GMP {
	if !(final >= 0 && final < 1) || begin < 0 || end < begin || every < 1 {
		panic(fmt.Sprintf("experiment.NewGMP: final %v, begin %d, end %d, every %d: want 0 ≤ final < 1, 0 ≤ begin ≤ end, every ≥ 1", final, begin, end, every))
	}
	g := &GMP{Final: final, Begin: begin, End: end, Every: every, weights: weights, pruned: make([][]bool, len(weights))}
	for i, w := range weights {
		g.pruned[i] = make([]bool, len(w.T.Data))
	}
	return g
}

// SparsityAt returns the scheduled fraction of zeros after update t.
func (g *GMP) SparsityAt(t int) float64 {
	switch {
	case t < g.Begin:
		return 0
	case t >= g.End:
		return g.Final
	}
	f := 1 - float64(t-g.Begin)/float64(g.End-g.Begin)
	return g.Final * (1 - f*f*f)
}

// Due reports whether update t is a pruning step: Begin, every Every
// updates after it, and End.
func (g *GMP) Due(t int) bool {
	return t >= g.Begin && t <= g.End && ((t-g.Begin)%g.Every == 0 || t == g.End)
}

// Step prunes to SparsityAt(t) when update t is a pruning step (or comes
// after End with fewer weights pruned than Final asks, as after End = 0),
// then sets every pruned weight to zero (after an optimizer update has
// moved it). It returns whether it pruned a weight.
func (g *GMP) Step(t int) bool {
	pruned := false
	if g.Due(t) || t > g.End {
		pruned = g.pruneTo(g.SparsityAt(t))
	}
	g.Apply()
	return pruned
}

// Apply sets the pruned weights to zero.
func (g *GMP) Apply() {
	for i, w := range g.weights {
		for j, p := range g.pruned[i] {
			if p {
				w.T.Data[j] = 0
			}
		}
	}
}

// Pruned returns the number of pruned weights and the number of weights.
func (g *GMP) Pruned() (pruned, total int) {
	for _, p := range g.pruned {
		total += len(p)
	}
	return g.count, total
}

// pruneTo prunes the smallest unpruned weights until round(s·n) of the n
// weights are pruned, and reports whether it pruned any.
func (g *GMP) pruneTo(s float64) bool {
	_, n := g.Pruned()
	k := int(math.Round(s * float64(n)))
	if k <= g.count {
		return false
	}
	type entry struct {
		mag    float32
		tensor int
		index  int
	}
	cand := make([]entry, 0, n-g.count)
	for i, w := range g.weights {
		for j, v := range w.T.Data {
			if !g.pruned[i][j] {
				cand = append(cand, entry{float32(math.Abs(float64(v))), i, j})
			}
		}
	}
	slices.SortFunc(cand, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.mag, b.mag), cmp.Compare(a.tensor, b.tensor), cmp.Compare(a.index, b.index))
	})
	for _, e := range cand[:k-g.count] {
		g.pruned[e.tensor][e.index] = true
	}
	g.count = k
	return true
}

// Masks returns the masks as float32 tensors (1 where pruned), keyed by
// the weights' names, for a checkpoint.
func (g *GMP) Masks() map[string][]float32 {
	out := make(map[string][]float32, len(g.weights))
	for i, w := range g.weights {
		m := make([]float32, len(g.pruned[i]))
		for j, p := range g.pruned[i] {
			if p {
				m[j] = 1
			}
		}
		out[w.Name] = m
	}
	return out
}

// SetMasks restores masks saved by Masks.
func (g *GMP) SetMasks(masks map[string][]float32) error {
	count := 0
	for i, w := range g.weights {
		m, ok := masks[w.Name]
		if !ok || len(m) != len(g.pruned[i]) {
			return fmt.Errorf("gradual pruning: no mask of %d entries for %s", len(g.pruned[i]), w.Name)
		}
		for j, v := range m {
			if v != 0 && v != 1 {
				return fmt.Errorf("gradual pruning: mask of %s holds %v", w.Name, v)
			}
			g.pruned[i][j] = v == 1
			if v == 1 {
				count++
			}
		}
	}
	g.count = count
	return nil
}
