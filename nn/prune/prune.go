package prune

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/proxgen/proxgen/nn"
)

// Options selects the filters Filters zeroes.
type Options struct {
	// Fraction is the fraction of the prunable channels of every channel
	// space to zero, rounded down, leaving at least one channel per
	// space: Li et al.'s per-layer pruning rate.
	Fraction float64
	// KeepFLOPs, when positive, replaces Fraction by the smallest
	// fraction (the same in every space) whose pruned network has at most
	// KeepFLOPs times the FLOPs of the dense network (Count.FLOPsTotal).
	KeepFLOPs float64
	// Multiple, when positive, replaces Fraction and KeepFLOPs: in every
	// channel space the channels with the smallest norms are zeroed until
	// the number left with nonzero filters is a multiple of Multiple (a
	// space with fewer than Multiple of them is left as it is), so that a
	// compacted network's widths fill whole SIMD blocks (8: the half
	// blocks of nn/infer's kernels).
	Multiple int
	// Residual also prunes the channels of residual streams, the spaces
	// that several convolutions write (the stem and the second
	// convolution of every block of a ResNet stage, the option-B
	// shortcuts): a channel there is one unit whose norm is that of all
	// its filters together, zeroed in all of them. Channels an option-A
	// shortcut copies from one stage into the next form one unit with
	// the channel they become. Without Residual only the channels inside
	// residual blocks (and every VGG channel) are pruned.
	Residual bool
	// Height and Width are the input size for counting FLOPs; zero means
	// 32 × 32 (CIFAR-10).
	Height, Width int
}

// filterRef is output filter c of a convolution layer.
type filterRef struct {
	l *layer
	c int
}

// unit is a set of channels that are pruned together.
type unit struct {
	filters []filterRef
	family  int // the lowest space id of its channels
	norm    float64
}

// Mask lists the pruned filters of a model; Apply sets them (and the
// batch-norm γ and β after them) to zero.
type Mask struct {
	filters []filterRef
}

// Apply zeroes the pruned filters, their convolution bias and the γ and
// β of their batch normalisation, which makes their channels exactly
// zero in training and evaluation mode. During fine-tuning, call it after
// every optimizer step. In the networks of nn/models a dead channel's
// entries get zero gradients (the ReLU after it has derivative 0 at 0),
// so gradient steps, weight decay and proximal steps leave them at zero
// anyway; Apply makes that a guarantee for any update rule. The
// optimizer's state of those entries needs no reset: they are overwritten
// after every step and never feed into the other entries' updates.
func (m *Mask) Apply() {
	for _, f := range m.filters {
		w := f.l.conv.Weight
		n := w.Numel() / w.Dim(0)
		clear(w.Data[f.c*n : (f.c+1)*n])
		if b := f.l.conv.Bias; b != nil {
			b.Data[f.c] = 0
		}
		f.l.bn.Weight.Data[f.c] = 0
		f.l.bn.Bias.Data[f.c] = 0
	}
}

// Filters returns the indices of the pruned filters of each convolution,
// keyed by its state-dict prefix ("layer1.0.conv1").
func (m *Mask) Filters() map[string][]int {
	out := map[string][]int{}
	for _, f := range m.filters {
		out[f.l.name] = append(out[f.l.name], f.c)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// NewMask returns the Mask of m that zeroes the given filters, keyed as
// Mask.Filters returns them (to restore a mask saved with a training
// run). It fails on an unknown layer or filter index.
func NewMask(m nn.Module, filters map[string][]int) (*Mask, error) {
	g, err := newGraph(m, 32, 32) // only its layers are needed
	if err != nil {
		return nil, err
	}
	byName := map[string]*layer{}
	for _, l := range g.layers {
		if l.conv != nil {
			byName[l.name] = l
		}
	}
	mask := &Mask{}
	for _, name := range slices.Sorted(maps.Keys(filters)) {
		l := byName[name]
		if l == nil {
			return nil, fmt.Errorf("prune.NewMask: the model has no convolution %q", name)
		}
		for _, c := range filters[name] {
			if c < 0 || c >= l.conv.Weight.Dim(0) {
				return nil, fmt.Errorf("prune.NewMask: %s has no filter %d", name, c)
			}
			mask.filters = append(mask.filters, filterRef{l, c})
		}
	}
	return mask, nil
}

// Len returns the number of pruned filters.
func (m *Mask) Len() int { return len(m.filters) }

// Filters zeroes, in every channel space of m (a VGG or ResNet of
// package nn/models), the output filters with the smallest ℓ2 norm as
// opt says, together with the γ and β of the batch normalisation after
// them, and returns the Mask of what it zeroed. See Options for the
// choice of the fraction and of the channels considered.
func Filters(m nn.Module, opt Options) (*Mask, error) {
	if !(opt.Fraction >= 0 && opt.Fraction < 1) {
		return nil, fmt.Errorf("prune.Filters: fraction %v outside [0, 1)", opt.Fraction)
	}
	if !(opt.KeepFLOPs >= 0 && opt.KeepFLOPs <= 1) {
		return nil, fmt.Errorf("prune.Filters: FLOPs target %v outside (0, 1]", opt.KeepFLOPs)
	}
	if opt.Multiple < 0 {
		return nil, fmt.Errorf("prune.Filters: multiple %d is negative", opt.Multiple)
	}
	if opt.Height == 0 && opt.Width == 0 {
		opt.Height, opt.Width = 32, 32
	}
	g, err := Analyze(m, opt.Height, opt.Width)
	if err != nil {
		return nil, err
	}
	units := g.units(opt.Residual)
	if opt.Multiple > 0 {
		mask := selectMultiple(units, opt.Multiple)
		mask.Apply()
		return mask, nil
	}
	if opt.KeepFLOPs == 0 {
		mask := selectUnits(units, opt.Fraction)
		mask.Apply()
		return mask, nil
	}
	total := g.Count().FLOPsTotal
	target := int64(math.Floor(opt.KeepFLOPs * float64(total)))
	snap := g.snapshot()
	// The graph refers to the model's tensors: analysing it again sees
	// the mask's zeros.
	flopsAt := func(f float64) (int64, *Mask) {
		snap.restore()
		mask := selectUnits(units, f)
		mask.Apply()
		g.analyze()
		return g.Count().FLOPs, mask
	}
	// The remaining FLOPs fall as the fraction grows: bisect for the
	// smallest fraction that reaches the target.
	lo, hi := 0.0, 1.0
	if fl, mask := flopsAt(lo); fl <= target {
		return mask, nil
	}
	if fl, _ := flopsAt(math.Nextafter(hi, 0)); fl > target {
		snap.restore()
		return nil, fmt.Errorf("prune.Filters: keeping one channel per space leaves %d of %d FLOPs, more than the target %v", fl, total, opt.KeepFLOPs)
	}
	for range 40 {
		mid := (lo + hi) / 2
		if fl, _ := flopsAt(mid); fl <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	_, mask := flopsAt(hi)
	return mask, nil
}

// units returns the pruning units of g: connected sets of channels of
// the spaces (option-A shortcuts join a channel to the one it is copied
// to), with their filters and norms, the residual ones only if residual.
func (g *Graph) units(residual bool) []*unit {
	base := make([]int, len(g.spaces)+1)
	for i, s := range g.spaces {
		base[i+1] = base[i] + s.c
	}
	parent := make([]int, base[len(g.spaces)])
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, n := range g.nodes {
		for _, t := range n.terms {
			if t.kind != termPad {
				continue
			}
			for i, d := range t.dst {
				if d >= 0 {
					a, b := find(base[t.src.space.id]+i), find(base[n.space.id]+d)
					parent[max(a, b)] = min(a, b)
				}
			}
		}
	}
	byRoot := map[int]*unit{}
	var order []*unit
	for _, s := range g.spaces {
		if s.input {
			continue
		}
		for c := range s.c {
			r := find(base[s.id] + c)
			u := byRoot[r]
			if u == nil {
				u = &unit{family: s.id}
				byRoot[r] = u
				order = append(order, u)
			}
			for _, n := range s.nodes {
				for _, t := range n.terms {
					if t.kind == termConv {
						u.filters = append(u.filters, filterRef{t.layer, c})
					}
				}
			}
		}
	}
	var out []*unit
	for _, u := range order {
		if len(u.filters) == 0 || (len(u.filters) > 1 && !residual) {
			continue
		}
		var ss float64
		for _, f := range u.filters {
			w := f.l.conv.Weight
			n := w.Numel() / w.Dim(0)
			for _, v := range w.Data[f.c*n : (f.c+1)*n] {
				ss += float64(v) * float64(v)
			}
		}
		u.norm = math.Sqrt(ss)
		out = append(out, u)
	}
	return out
}

// selectUnits returns the mask of the fraction f of the units of every
// family with the smallest norms (ties: the first), at least one unit of
// each family left.
func selectUnits(units []*unit, f float64) *Mask {
	return selectSmallest(units, func(us []*unit) int {
		return min(int(math.Floor(f*float64(len(us))+1e-9)), len(us)-1)
	})
}

// selectMultiple returns the mask of the units of every family with the
// smallest norms that leave a multiple of k units of nonzero norm, when
// the family has at least k of them (ties: the first).
func selectMultiple(units []*unit, k int) *Mask {
	return selectSmallest(units, func(us []*unit) int {
		live := 0
		for _, u := range us {
			if u.norm > 0 {
				live++
			}
		}
		if live < k {
			return len(us) - live
		}
		return len(us) - live + live%k
	})
}

// selectSmallest returns the mask of the count(us) units of smallest
// norm of every family us (ties: the first), the families in the order
// of units.
func selectSmallest(units []*unit, count func(us []*unit) int) *Mask {
	fam := map[int][]*unit{}
	var ids []int
	for _, u := range units {
		if fam[u.family] == nil {
			ids = append(ids, u.family)
		}
		fam[u.family] = append(fam[u.family], u)
	}
	m := &Mask{}
	for _, id := range ids {
		us := slices.Clone(fam[id])
		slices.SortStableFunc(us, func(a, b *unit) int { return cmp.Compare(a.norm, b.norm) })
		for _, u := range us[:count(us)] {
			m.filters = append(m.filters, u.filters...)
		}
	}
	return m
}

// snapshot is a copy of the tensors a Mask changes.
type snapshot struct {
	dst, src [][]float32
}

func (g *Graph) snapshot() *snapshot {
	s := &snapshot{}
	for _, l := range g.layers {
		if l.conv == nil {
			continue
		}
		for _, t := range [][]float32{l.conv.Weight.Data, l.bn.Weight.Data, l.bn.Bias.Data} {
			s.dst = append(s.dst, t)
			s.src = append(s.src, slices.Clone(t))
		}
		if l.conv.Bias != nil {
			s.dst = append(s.dst, l.conv.Bias.Data)
			s.src = append(s.src, slices.Clone(l.conv.Bias.Data))
		}
	}
	return s
}

func (s *snapshot) restore() {
	for i, d := range s.dst {
		copy(d, s.src[i])
	}
}
