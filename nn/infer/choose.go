package infer

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
)

// sparseFrom are the zero fractions that define New's candidate layer
// sets: for each, the convolution and linear layers with at least that
// fraction of exact zeros run sparse, the others dense. New times the
// network under every distinct candidate and under the all-dense one, and
// keeps the fastest (choose). 0.5 is the least zero fraction at which a
// layer ran sparse no slower than dense in any measurement of
// docs/benchmarks.md.
var sparseFrom = []float64{0.5, 0.7, 0.85, 0.95}

// chooseBatches are the batch sizes at which choose times the candidates:
// a single image (its choice runs batches smaller than half the second)
// and a batch (its choice runs the larger ones).
var chooseBatches = [2]int{1, 16}

// chooseRuns are the timed passes at each of chooseBatches, whose median
// choose compares: many single images (each takes well under a
// millisecond for a CIFAR ResNet, and two workers on one image time
// bimodally on a shared machine, so that the fastest pass of a plan says
// little about its usual one: on the shared 2-core Zen 4 the dense plan's
// best single image on two workers was about as fast as the planar sparse
// plan's, its median twice as slow), few batches.
var chooseRuns = [2]int{15, 5}

// chooseStreak is the passes in a row that choose times of a candidate at
// a time with fewer images than workers, after as many untimed ones: on
// the shared 2-core Zen 4 the split image's single passes, each right
// after one untimed pass, had a median of 316–375 µs where a stream of
// them ran 165–178 (the image on one worker: 212–214 and 208), and
// choose kept each image on one worker; timed in streaks of 3, 169–176
// against 208–212 (docs/benchmarks.md).
const chooseStreak = 3

// minConvZeros returns the least zero fraction of net's convolutions (1
// without any).
func minConvZeros(net nn.Module) float64 {
	f := 1.0
	for _, l := range report(net, prepOptions{}, false).Layers {
		if l.Kind == "Conv2d" {
			f = min(f, l.ZeroFraction())
		}
	}
	return f
}

// choice is one candidate of choose: the layers at or above
// rep.MinZeros sparse (above 1: none), compiled.
type choice struct {
	rep  Report
	plan plan
	// single: the plan differs from the previous candidate only for calls
	// with fewer images than workers (planarPlan.whole), so it is timed at
	// batch 1 only.
	single bool
}

// splits returns c's plan, when it is a directPlan, splitting a call of
// fewer images than workers over 1, 2, 4, ... workers short of all of
// them (directPlan.split), as candidates timed at batch 1 only.
func splits(c choice) []choice {
	dp, ok := c.plan.(*directPlan)
	if !ok {
		return nil
	}
	var out []choice
	for k := 1; k < parallel.Workers(); k *= 2 {
		p := *dp
		p.split = k
		out = append(out, choice{rep: c.rep, plan: &p, single: true})
	}
	return out
}

// choose compiles net (in evaluation mode) with the layer set that runs
// fastest, measured at load: the all-dense network (also with a single
// image split over fewer workers, splits), the networks with the
// layers above each fraction of sparseFrom sparse and the one with every
// convolution sparse (on planarPlan, with each image split over the
// workers, its single convolutions by channels or on one worker, and kept
// on one), each distinct set once, timed on random images at
// the batch sizes of chooseBatches (the median of chooseRuns passes after
// a warm-up, the candidates in turn pass by pass, the worker pool as it
// is; with fewer images than workers, streaks of chooseStreak passes
// timed after as many untimed ones). It returns the plan, byBatch when the two batch sizes prefer
// different sets, and the report of the set chosen for a single image; a
// nil plan (and the all-dense report) for a network that newPlan does not
// compile. Given the choice, every result is deterministic; the choice
// itself depends on the machine and its load (Model.Algorithms and
// Sparsity say what it was).
func choose(net nn.Module, m *Model) (plan, Report) {
	dense := report(net, prepOptions{MinZeros: 2}, true) // above 1: no layer sparse
	cands := []choice{{rep: dense, plan: newPlan(net, dense)}}
	if cands[0].plan == nil {
		return nil, dense
	}
	cands = append(cands, splits(cands[0])...)
	for _, f := range sparseFrom {
		rep := report(net, prepOptions{MinZeros: f}, true)
		if len(rep.SparseLayers()) == 0 {
			break
		}
		last := cands[len(cands)-1].rep.Layers
		if slices.EqualFunc(last, rep.Layers, func(a, b LayerReport) bool { return a.Sparse == b.Sparse }) {
			continue
		}
		cands = append(cands, choice{rep: rep, plan: newPlan(net, rep)})
	}
	// Every convolution sparse (the threshold of the least sparse one),
	// for a network with at least sparseFrom[0] of its weights exact
	// zeros: a ResNet runs on planarPlan, whose cost follows the nonzero
	// weights of every layer.
	if all := report(net, prepOptions{MinZeros: minConvZeros(net)}, true); all.ZeroRatio() >= sparseFrom[0] &&
		!slices.EqualFunc(cands[len(cands)-1].rep.Layers, all.Layers, func(a, b LayerReport) bool { return a.Sparse == b.Sparse }) {
		if p := newPlan(net, all); p != nil {
			cands = append(cands, choice{rep: all, plan: p})
			// The same plan keeping each image on one worker (planarPlan.whole).
			if pp, ok := p.(*planarPlan); ok && parallel.Workers() > 1 {
				whole := *pp
				whole.whole = true
				cands = append(cands, choice{rep: all, plan: &whole, single: true})
				// Its 8×8 layers on one worker (planarPlan.bandOnly).
				band := *pp
				band.bandOnly = true
				cands = append(cands, choice{rep: all, plan: &band, single: true})
			}
		}
	}
	return fastest(net, m, cands)
}

// fastest returns the plan of cands that runs fastest, as choose
// describes, and the report of the one chosen for a single image.
func fastest(net nn.Module, m *Model, cands []choice) (plan, Report) {
	if len(cands) == 1 {
		return cands[0].plan, cands[0].rep
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, chooseBatches[1]*InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	type timed struct {
		m *Model
		s *scratch
	}
	var best [2]int
	for b, n := range chooseBatches {
		var ts []timed // the candidates that compiled, as models
		var idx []int  // their indexes in cands
		for i := range cands {
			if c := &cands[i]; c.plan != nil && (b == 0 || !c.single) {
				cm := &Model{net: net, spec: m.spec, norm: m.norm, sparse: c.rep, plan: c.plan}
				ts, idx = append(ts, timed{cm, cm.getScratch()}), append(idx, i)
			}
		}
		if len(ts) == 1 {
			best[b] = idx[0]
			continue
		}
		// The candidates in turn, pass by pass, so that a burst of load
		// from other processes falls on all of them alike; each is judged
		// by its median pass.
		t := make([][]time.Duration, len(ts))
		for _, c := range ts {
			c.m.forward(c.s, x[:n*InputSize], n) // warm-up
		}
		for range chooseRuns[b] {
			for k, c := range ts {
				streak := 1
				if n < parallel.Workers() {
					// A streak of passes, timed after its first half: a
					// single image's pass of a few hundred microseconds
					// that follows another candidate's finds the caches
					// and the pool's helpers as that one left them, not
					// as a stream of calls keeps them (a split image,
					// whose bands' buffers live in two cores' caches and
					// which needs the helper awake, pays for that; an
					// image kept on one worker hardly).
					streak = chooseStreak
					for range streak {
						c.m.forward(c.s, x[:n*InputSize], n)
					}
				}
				t0 := time.Now()
				for range streak {
					c.m.forward(c.s, x[:n*InputSize], n)
				}
				t[k] = append(t[k], time.Since(t0)/time.Duration(streak))
			}
		}
		med := make([]time.Duration, len(ts))
		for k := range ts {
			slices.Sort(t[k])
			med[k] = t[k][len(t[k])/2]
		}
		bk := 0
		for k := range ts {
			if med[k] < med[bk] {
				bk = k
			}
		}
		best[b] = idx[bk]
	}
	one, many := cands[best[0]], cands[best[1]]
	if best[0] == best[1] {
		return one.plan, one.rep
	}
	return &byBatch{small: one.plan, large: many.plan, from: chooseBatches[1] / 2}, one.rep
}
