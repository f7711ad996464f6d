package prune

import (
	"slices"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// analyze works out which channels are exact constants (forward) and then
// which channels of each space are removable (to a fixed point).
func (g *Graph) analyze() {
	for _, n := range g.nodes {
		g.constants(n)
	}
	for _, s := range g.spaces {
		s.keep = make([]bool, s.c)
		for c := range s.keep {
			s.keep[c] = true
		}
	}
	for {
		used := map[*layer][]bool{}
		for _, l := range g.layers {
			used[l] = l.usedInputs()
		}
		changed := false
		for _, s := range g.spaces {
			if s.input {
				continue
			}
			// A space keeps at least one channel (a zero one if need
			// be), so every layer of the compacted network has inputs
			// and outputs.
			for c := range s.c {
				if s.keep[c] && s.kept() > 1 && s.removable(c, used) {
					s.keep[c] = false
					changed = true
				}
			}
		}
		if !changed {
			return
		}
	}
}

// constants sets n.isConst and n.val from the terms of n; the nodes its
// terms read are done.
func (g *Graph) constants(n *node) {
	n.isConst = make([]bool, n.c)
	n.val = make([]float32, n.c)
	if len(n.terms) == 0 {
		return // the model input
	}
	for c := range n.isConst {
		n.isConst[c] = true
	}
	for _, t := range n.terms {
		isConst, val := make([]bool, n.c), make([]float32, n.c)
		switch t.kind {
		case termConv:
			isConst, val = t.layer.constants()
		case termIdentity:
			copy(isConst, t.src.isConst)
			copy(val, t.src.val)
		case termPad:
			for c := range isConst {
				isConst[c] = true // the padded channels are zero
			}
			for i, d := range t.dst {
				if d >= 0 {
					isConst[d], val[d] = t.src.isConst[i], t.src.val[i]
				}
			}
		}
		for c := range n.c {
			n.isConst[c] = n.isConst[c] && isConst[c]
			n.val[c] += val[c]
		}
	}
	for c := range n.c {
		if !n.isConst[c] {
			n.val[c] = 0
		} else if n.relu && n.val[c] < 0 {
			n.val[c] = 0
		}
	}
}

// zero reports whether channel c of n is exactly zero.
func (n *node) zero(c int) bool { return n.isConst[c] && n.val[c] == 0 }

// constants returns which output channels of a convolution layer's batch
// norm are the same constant everywhere, and those constants computed by
// the batch-norm kernel in evaluation mode: the channels whose filter
// touches only exactly-zero inputs (the convolution gives its bias) and
// those with γ = 0 (the batch norm gives β).
func (l *layer) constants() ([]bool, []float32) {
	w := l.conv.Weight
	cout, cin := w.Dim(0), w.Dim(1)
	kk := w.Numel() / (cout * cin)
	isConst := make([]bool, cout)
	in := make([]float32, cout)
	for o := range cout {
		isConst[o] = true
		for i := range cin {
			if l.in.zero(i) {
				continue
			}
			if !allZero(w.Data[(o*cin+i)*kk : (o*cin+i+1)*kk]) {
				isConst[o] = false
				break
			}
		}
		if l.conv.Bias != nil {
			in[o] = l.conv.Bias.Data[o]
		}
		if l.bn.Weight.Data[o] == 0 {
			isConst[o] = true
		}
	}
	// The kernel's own arithmetic, on planes wide enough for its vector
	// path.
	const plane = 64
	x := autograd.New(1, cout, 8, 8)
	for o := range cout {
		for j := range plane {
			x.Data[o*plane+j] = in[o]
		}
	}
	vec := func(t *autograd.Tensor) *autograd.Tensor {
		return autograd.FromSlice(slices.Clone(t.Data), cout)
	}
	y := autograd.BatchNorm2d(x, vec(l.bn.Weight), vec(l.bn.Bias), vec(l.bn.RunningMean), vec(l.bn.RunningVar), false, l.bn.Momentum, l.bn.Eps)
	val := make([]float32, cout)
	for o := range cout {
		if isConst[o] {
			val[o] = y.Data[o*plane]
		}
	}
	return isConst, val
}

// usedInputs returns, for each input channel of l, whether a kept output
// filter (every output of the classifier) has a non-zero weight on it.
func (l *layer) usedInputs() []bool {
	cin := l.cin()
	used := make([]bool, cin)
	if l.linear != nil {
		w := l.linear.Weight
		out, per := w.Dim(0), w.Dim(1)/cin
		for o := range out {
			row := w.Data[o*w.Dim(1) : (o+1)*w.Dim(1)]
			for i := range cin {
				if !used[i] && !allZero(row[i*per:(i+1)*per]) {
					used[i] = true
				}
			}
		}
		return used
	}
	w := l.conv.Weight
	cout := w.Dim(0)
	kk := w.Numel() / (cout * cin)
	keep := l.out.space.keep
	for o := range cout {
		if !keep[o] {
			continue
		}
		for i := range cin {
			if !used[i] && !allZero(w.Data[(o*cin+i)*kk:(o*cin+i+1)*kk]) {
				used[i] = true
			}
		}
	}
	return used
}

// removable reports whether channel c of s can go: every activation of
// s has it exactly zero or unread.
func (s *space) removable(c int, used map[*layer][]bool) bool {
	for _, n := range s.nodes {
		if n.zero(c) {
			continue
		}
		for _, l := range n.readers {
			if used[l][c] {
				return false
			}
		}
		for _, cr := range n.carries {
			switch cr.t.kind {
			case termIdentity:
				// Same space: its own activations are checked here.
			case termPad:
				if d := cr.t.dst[c]; d >= 0 && cr.to.space.keep[d] {
					return false
				}
			}
		}
	}
	return true
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// LayerCount is what remains of one convolution or linear layer.
type LayerCount struct {
	// Name is the layer's state-dict prefix ("layer1.0.conv1",
	// "features.0", "linear").
	Name string `json:"name"`
	// In and Out are the input and output channels kept, of InTotal and
	// OutTotal (the classifier's outputs are always kept).
	In       int `json:"in"`
	InTotal  int `json:"in_total"`
	Out      int `json:"out"`
	OutTotal int `json:"out_total"`
	// Params counts the weights, bias and batch-norm γ and β kept, of
	// ParamsTotal.
	Params      int `json:"params"`
	ParamsTotal int `json:"params_total"`
	// FLOPs counts the multiply-adds for one image, of FLOPsTotal.
	FLOPs      int64 `json:"flops"`
	FLOPsTotal int64 `json:"flops_total"`
}

// Count is what remains of a network after removing its removable
// channels.
type Count struct {
	// Channels counts the channels kept over all channel spaces but the
	// input image (a residual stream counts once), of ChannelsTotal.
	Channels      int `json:"channels"`
	ChannelsTotal int `json:"channels_total"`
	// Params counts the trainable parameters kept, of ParamsTotal
	// (nn.NumParams of the model).
	Params      int `json:"params"`
	ParamsTotal int `json:"params_total"`
	// FLOPs counts the multiply-adds of the convolution and linear layers
	// for one image, of FLOPsTotal.
	FLOPs      int64 `json:"flops"`
	FLOPsTotal int64 `json:"flops_total"`
	// Layers has one entry per convolution and linear layer in forward
	// order.
	Layers []LayerCount `json:"layers"`
}

// FLOPsRatio returns FLOPs / FLOPsTotal.
func (c *Count) FLOPsRatio() float64 { return ratio(float64(c.FLOPs), float64(c.FLOPsTotal)) }

// ParamsRatio returns Params / ParamsTotal.
func (c *Count) ParamsRatio() float64 { return ratio(float64(c.Params), float64(c.ParamsTotal)) }

// ChannelsRatio returns Channels / ChannelsTotal.
func (c *Count) ChannelsRatio() float64 {
	return ratio(float64(c.Channels), float64(c.ChannelsTotal))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// kept returns the number of channels of s that are kept.
func (s *space) kept() int {
	n := 0
	for _, k := range s.keep {
		if k {
			n++
		}
	}
	return n
}

// Count returns the channels, parameters and FLOPs that remain when the
// removable channels are removed.
func (g *Graph) Count() Count {
	var ct Count
	for _, s := range g.spaces {
		if !s.input {
			ct.Channels += s.kept()
			ct.ChannelsTotal += s.c
		}
	}
	for _, l := range g.layers {
		lc := LayerCount{Name: l.name, In: l.in.space.kept(), InTotal: l.in.c}
		if l.linear != nil {
			w := l.linear.Weight
			per := w.Dim(1) / l.in.c
			lc.Out, lc.OutTotal = w.Dim(0), w.Dim(0)
			lc.Params, lc.ParamsTotal = lc.Out*lc.In*per, w.Numel()
			lc.FLOPs, lc.FLOPsTotal = int64(lc.Params), int64(lc.ParamsTotal)
			if l.linear.Bias != nil {
				lc.Params += lc.Out
				lc.ParamsTotal += lc.Out
			}
		} else {
			w := l.conv.Weight
			kk := w.Numel() / (w.Dim(0) * w.Dim(1))
			lc.Out, lc.OutTotal = l.out.space.kept(), w.Dim(0)
			lc.Params, lc.ParamsTotal = lc.Out*lc.In*kk, w.Numel()
			hw := int64(l.h * l.w)
			lc.FLOPs, lc.FLOPsTotal = int64(lc.Params)*hw, int64(lc.ParamsTotal)*hw
			per := 2 // batch norm γ and β
			if l.conv.Bias != nil {
				per++
			}
			lc.Params += per * lc.Out
			lc.ParamsTotal += per * lc.OutTotal
		}
		ct.Params += lc.Params
		ct.ParamsTotal += lc.ParamsTotal
		ct.FLOPs += lc.FLOPs
		ct.FLOPsTotal += lc.FLOPsTotal
		ct.Layers = append(ct.Layers, lc)
	}
	return ct
}

// CountModel analyses m for inputs of height × width pixels and returns
// its Count.
func CountModel(m nn.Module, height, width int) (Count, error) {
	g, err := Analyze(m, height, width)
	if err != nil {
		return Count{}, err
	}
	return g.Count(), nil
}
