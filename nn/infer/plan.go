package infer

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// plan is a network compiled for inference once, at load: every batch
// normalisation folded into the convolution before it (weights scaled per
// filter, the shift as the convolution's bias), every convolution an
// autograd.ConvPlan with its filters packed once and the ReLU, the
// residual add and the bias applied by its epilogue, and the activations
// in buffers of the call's scratch, reused by the next call of the same
// batch size. A plan is immutable and safe for concurrent use.
type plan interface {
	// forward returns the logits of the n images in x, computed in s
	// (valid until s is used again).
	forward(s *scratch, x []float32, n int) []float32
	// algorithms names the algorithm of every convolution at batch n.
	algorithms(n int) []string
}

// newPlan compiles net, prepared by nn.PrepareInferenceWith with report
// rep, or returns nil when net is not a network it knows (the plain
// forward pass then runs it).
func newPlan(net nn.Module, rep nn.Report) plan {
	sparse := map[string]bool{}
	for _, l := range rep.Layers {
		sparse[l.Name] = l.Sparse
	}
	direct := newDirectPlan(net, sparse)
	var gemm plan
	switch m := net.(type) {
	case *models.ResNet:
		if direct != nil {
			return direct // faster at every batch size
		}
		if p := newResNetPlan(m, sparse); p != nil {
			gemm = p
		}
	case *models.VGG:
		if p := newVGGPlan(m, sparse); p != nil {
			gemm = p
		}
	}
	switch {
	case direct != nil && gemm != nil:
		return &byBatch{small: direct, large: gemm, from: vggGEMMFrom}
	case gemm != nil:
		return gemm
	case direct != nil:
		return direct
	}
	return nil
}

// vggGEMMFrom is the batch size from which a dense VGG runs on vggPlan's
// GEMMs (Winograd on its large layers) rather than directPlan's direct
// convolutions: VGG-16 (full width, one thread, AMD EPYC Zen 4,
// bench infer) ran 140 images/s direct at every batch size and 82, 104, 153,
// 161, 229 and 291 images/s on the GEMMs at batch 1, 2, 4, 8, 16 and 64.
// (ResNet-20 and -56 run direct at every size: 0.742 against 0.844 ms per
// image at batch 1, 745 against 791 µs at batch 64.)
const vggGEMMFrom = 4

// byBatch runs batches smaller than from on small, larger ones on large.
type byBatch struct {
	small, large plan
	from         int
}

func (b *byBatch) pick(n int) plan {
	if n < b.from {
		return b.small
	}
	return b.large
}

func (b *byBatch) forward(s *scratch, x []float32, n int) []float32 {
	return b.pick(n).forward(s, x, n)
}

func (b *byBatch) algorithms(n int) []string { return b.pick(n).algorithms(n) }

// shape is the shape of one image's activation.
type shape struct{ c, h, w int }

func (s shape) size() int { return s.c * s.h * s.w }

// convStep is one compiled convolution.
type convStep struct {
	p    *autograd.ConvPlan
	in   shape
	out  shape
	relu bool
}

// foldConv compiles conv followed by bn (nil: none) for inputs of shape
// in; the layer runs sparse if sparse.
func foldConv(conv *nn.Conv2d, bn *nn.BatchNorm2d, in shape, sparse, relu bool) convStep {
	fw, bias := foldWeights(conv, bn)
	var sw *autograd.SparseWeight
	if sparse {
		sw = autograd.NewSparseWeight(fw)
	}
	cfg := autograd.ConvConfig{
		Stride:   [2]int{conv.Stride, conv.Stride},
		Padding:  [2]int{conv.Padding, conv.Padding},
		Dilation: [2]int{conv.Dilation, conv.Dilation},
	}
	p := autograd.NewConvPlan(fw, bias, cfg, in.h, in.w, sw)
	c, h, wd := p.OutShape()
	return convStep{p: p, in: in, out: shape{c, h, wd}, relu: relu}
}

// foldWeights returns the weights and bias of conv followed by bn (nil:
// none) as one convolution: bias nil when neither has one.
func foldWeights(conv *nn.Conv2d, bn *nn.BatchNorm2d) (*autograd.Tensor, []float32) {
	w := conv.Weight
	cout := w.Dim(0)
	per := w.Numel() / cout
	fw := autograd.New(w.Shape()...)
	copy(fw.Data, w.Data)
	var bias []float32
	if conv.Bias != nil {
		bias = append([]float32(nil), conv.Bias.Data...)
	}
	if bn != nil {
		if bias == nil {
			bias = make([]float32, cout)
		}
		for o := range cout {
			// y = (conv + b − mean)·γ/√(var+ε) + β, in float64.
			s := float64(bn.Weight.Data[o]) / math.Sqrt(float64(bn.RunningVar.Data[o])+float64(bn.Eps))
			for i := o * per; i < (o+1)*per; i++ {
				fw.Data[i] = float32(float64(w.Data[i]) * s)
			}
			bias[o] = float32((float64(bias[o])-float64(bn.RunningMean.Data[o]))*s + float64(bn.Bias.Data[o]))
		}
	}
	return fw, bias
}

// run applies the step to the n images in x, into out, adding residual if
// not nil.
func (c convStep) run(n int, x, out, residual []float32) {
	c.p.Run(n, x, out[:n*c.out.size()], residual, c.relu)
}

// inputShape is the shape of a network input.
var inputShape = shape{cifarinfo.Channels, Side, Side}

// resnetPlan is a compiled models.ResNet.
type resnetPlan struct {
	stem   convStep
	blocks []blockPlan
	pool   int // average-pooling window
	linear *nn.Linear
	max    int
}

// blockPlan is a compiled models.BasicBlock: out = relu(conv2(relu(conv1(x)))
// + shortcut(x)), the shortcut nil for the identity.
type blockPlan struct {
	conv1, conv2 convStep
	shortcut     *convStep
	// chained: conv1 writes straight into conv2's padded input (both
	// sparse; see autograd.ConvPlan.RunChained); padded: also the identity
	// shortcut, so that the block reads and writes conv1's padded layout
	// (autograd.ConvPlan.RunBlockPadded).
	chained, padded bool
}

func newResNetPlan(r *models.ResNet, sparse map[string]bool) *resnetPlan {
	p := &resnetPlan{linear: r.Linear}
	p.stem = foldConv(r.Conv1, r.BN1, inputShape, sparse["conv1"], true)
	cur := p.stem.out
	p.max = max(inputShape.size(), cur.size())
	for s, stage := range r.Stages {
		for i, l := range stage.Layers {
			b, ok := l.(*models.BasicBlock)
			if !ok {
				return nil
			}
			name := fmt.Sprintf("layer%d.%d.", s+1, i)
			bp := blockPlan{conv1: foldConv(b.Conv1, b.BN1, cur, sparse[name+"conv1"], true)}
			bp.conv2 = foldConv(b.Conv2, b.BN2, bp.conv1.out, sparse[name+"conv2"], true)
			switch sc := b.Shortcut.(type) {
			case nil:
			case *models.PadShortcut:
				st := foldConv(selectionConv(sc), nil, cur, false, false)
				bp.shortcut = &st
			case *nn.Sequential:
				conv, ok1 := sc.Layers[0].(*nn.Conv2d)
				bn, ok2 := sc.Layers[1].(*nn.BatchNorm2d)
				if len(sc.Layers) != 2 || !ok1 || !ok2 {
					return nil
				}
				st := foldConv(conv, bn, cur, sparse[name+"shortcut.0"], false)
				bp.shortcut = &st
			default:
				return nil
			}
			bp.chained = bp.conv1.p.Chains(bp.conv2.p)
			bp.padded = bp.shortcut == nil && bp.conv1.p.ChainsResidual(bp.conv2.p)
			cur = bp.conv2.out
			p.max = max(p.max, bp.conv1.out.size(), cur.size(), bp.conv1.p.PaddedSize())
			p.blocks = append(p.blocks, bp)
		}
	}
	p.pool = r.PoolKernel
	if p.pool == 0 {
		p.pool = cur.w
	}
	return p
}

// selectionConv returns option A's shortcut as PadShortcut computes it: the
// exact 0/1 selection of its channels as a 1×1 convolution with stride 2.
func selectionConv(sc *models.PadShortcut) *nn.Conv2d {
	conv := &nn.Conv2d{Weight: autograd.New(sc.Out, sc.In, 1, 1), Stride: 2, Dilation: 1}
	for c, d := range sc.Targets() {
		if d >= 0 {
			conv.Weight.Data[d*sc.In+c] = 1
		}
	}
	return conv
}

func (p *resnetPlan) algorithms(n int) []string {
	out := []string{p.stem.p.Algorithm(n)}
	for _, b := range p.blocks {
		out = append(out, b.conv1.p.Algorithm(n), b.conv2.p.Algorithm(n))
		if b.shortcut != nil {
			out = append(out, b.shortcut.p.Algorithm(n))
		}
	}
	return out
}

func (p *resnetPlan) forward(s *scratch, x []float32, n int) []float32 {
	act := s.buffers(n, p.max)
	cur, t, sc, next := act[0], act[1], act[2], act[3]
	p.stem.run(n, x, cur, nil)
	last := p.stem.out
	// padded: cur holds the padded layout of the previous block (in
	// which it ran), not the plain activation.
	var padded *autograd.ConvPlan
	unpad := func() {
		padded.Unpad(n, cur[:n*padded.PaddedSize()], t[:n*padded.InSize()])
		cur, t, padded = t, cur, nil
	}
	for _, b := range p.blocks {
		if padded != nil && !(b.padded && b.conv1.p.SameInput(padded)) {
			unpad()
		}
		if b.padded {
			ps := b.conv1.p.PaddedSize()
			if padded == nil {
				b.conv1.p.Pad(n, cur[:n*b.conv1.in.size()], t[:n*ps])
				cur, t = t, cur
			}
			b.conv1.p.RunBlockPadded(b.conv2.p, n, cur[:n*ps], next[:n*ps])
			cur, next, padded = next, cur, b.conv1.p
			last = b.conv2.out
			continue
		}
		in := cur[:n*b.conv1.in.size()]
		res := in
		if b.shortcut != nil {
			b.shortcut.run(n, in, sc, nil)
			res = sc[:n*b.shortcut.out.size()]
		}
		if b.chained {
			b.conv1.p.RunChained(b.conv2.p, n, in, next[:n*b.conv2.out.size()], res, true)
		} else {
			b.conv1.run(n, in, t, nil)
			b.conv2.run(n, t[:n*b.conv1.out.size()], next, res)
		}
		cur, next = next, cur
		last = b.conv2.out
	}
	if padded != nil {
		unpad()
	}
	return p.head(s, cur[:n*last.size()], n, last)
}

// head returns the logits of the n images of act (each of shape in): the
// average pooling (window and stride p.pool, as autograd.AvgPool2d sums a
// window row by row and divides by its size) and the classifier, computed
// here rather than by autograd ops so that a call allocates nothing. The
// result lies in s until s is used again.
func (p *resnetPlan) head(s *scratch, act []float32, n int, in shape) []float32 {
	ho, wo := (in.h-p.pool)/p.pool+1, (in.w-p.pool)/p.pool+1
	feat := in.c * ho * wo
	w := p.linear.Weight
	classes := w.Dim(0)
	if w.Dim(1) != feat {
		panic(fmt.Sprintf("infer: the classifier takes %d features, the pooled activation has %d (%d×%d×%d)", w.Dim(1), feat, in.c, ho, wo))
	}
	pooled, logits := s.head(n*feat, n*classes)
	div := float32(p.pool * p.pool)
	for i := range n {
		for c := range in.c {
			plane := act[(i*in.c+c)*in.h*in.w : (i*in.c+c+1)*in.h*in.w]
			for oh := range ho {
				for ow := range wo {
					var sum float32
					for ih := oh * p.pool; ih < (oh+1)*p.pool; ih++ {
						for _, v := range plane[ih*in.w+ow*p.pool : ih*in.w+(ow+1)*p.pool] {
							sum += v
						}
					}
					pooled[i*feat+(c*ho+oh)*wo+ow] = sum / div
				}
			}
		}
		linear(p.linear, pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
	return logits
}

// linear sets out to the classifier l applied to one image's features x.
func linear(l *nn.Linear, x, out []float32) {
	feat := len(x)
	for o := range out {
		var sum float32
		for k, v := range l.Weight.Data[o*feat : (o+1)*feat] {
			sum += x[k] * v
		}
		if l.Bias != nil {
			sum += l.Bias.Data[o]
		}
		out[o] = sum
	}
}

// vggPlan is a compiled models.VGG: convolutions (with their batch
// normalisation and ReLU) and pooling layers, then the classifier.
type vggPlan struct {
	steps      []vggStep
	classifier *nn.Linear
	out        shape
	max        int
}

// vggStep is a convolution or, when conv is nil, a pooling layer.
type vggStep struct {
	conv *convStep
	pool nn.Module
	in   shape
	out  shape
}

func newVGGPlan(v *models.VGG, sparse map[string]bool) *vggPlan {
	layers, ok := vggLayers(v)
	if !ok {
		return nil
	}
	p := &vggPlan{classifier: v.Classifier}
	cur := inputShape
	p.max = cur.size()
	for _, l := range layers {
		if l.conv != nil {
			st := foldConv(l.conv, l.bn, cur, sparse[fmt.Sprintf("features.%d", l.index)], true)
			p.steps = append(p.steps, vggStep{conv: &st, in: cur, out: st.out})
			cur = st.out
		} else {
			k, stride, pad := l.window()
			out := shape{cur.c, poolSize(cur.h, k, stride, pad), poolSize(cur.w, k, stride, pad)}
			p.steps = append(p.steps, vggStep{pool: l.pool, in: cur, out: out})
			cur = out
		}
		p.max = max(p.max, cur.size())
	}
	p.out = cur
	return p
}

// vggLayer is one layer of a VGG's features: a convolution followed by
// batch normalisation and ReLU, or a pooling layer (pool).
type vggLayer struct {
	index int // the convolution's or pooling's index in the features
	conv  *nn.Conv2d
	bn    *nn.BatchNorm2d
	pool  nn.Module // nn.MaxPool2d or nn.AvgPool2d
}

// window returns the pooling's window, stride and padding.
func (l vggLayer) window() (k, stride, pad int) {
	switch m := l.pool.(type) {
	case nn.MaxPool2d:
		return m.Kernel, m.Stride, m.Padding
	case nn.AvgPool2d:
		return m.Kernel, m.Stride, m.Padding
	}
	panic(fmt.Sprintf("infer: %T is not a pooling layer", l.pool))
}

// vggLayers returns the layers of v's features (identity average poolings
// left out), or false if they are not convolution–batch-norm–ReLU triples
// and poolings.
func vggLayers(v *models.VGG) ([]vggLayer, bool) {
	var out []vggLayer
	ls := v.Features.Layers
	for i := 0; i < len(ls); i++ {
		switch l := ls[i].(type) {
		case *nn.Conv2d:
			bn, ok1 := at[*nn.BatchNorm2d](ls, i+1)
			_, ok2 := at[nn.ReLU](ls, i+2)
			if !ok1 || !ok2 {
				return nil, false
			}
			out = append(out, vggLayer{index: i, conv: l, bn: bn})
			i += 2
		case nn.MaxPool2d:
			out = append(out, vggLayer{index: i, pool: l})
		case nn.AvgPool2d:
			if l.Kernel != 1 || l.Stride != 1 || l.Padding != 0 {
				out = append(out, vggLayer{index: i, pool: l})
			}
		default:
			return nil, false
		}
	}
	return out, true
}

// at returns ls[i] as a T, if it is one.
func at[T any](ls []nn.Module, i int) (T, bool) {
	var zero T
	if i >= len(ls) {
		return zero, false
	}
	v, ok := ls[i].(T)
	return v, ok
}

// poolSize is the output length of a pooling window (floor mode).
func poolSize(in, k, stride, pad int) int { return (in+2*pad-k)/stride + 1 }

func (p *vggPlan) algorithms(n int) []string {
	var out []string
	for _, st := range p.steps {
		if st.conv != nil {
			out = append(out, st.conv.p.Algorithm(n))
		}
	}
	return out
}

func (p *vggPlan) forward(s *scratch, x []float32, n int) []float32 {
	act := s.buffers(n, p.max)
	cur, in := x, -1 // in: the buffer of act that holds cur, −1 none
	for _, st := range p.steps {
		if st.conv != nil {
			o := 0
			if in == 0 {
				o = 1
			}
			st.conv.run(n, cur, act[o], nil)
			cur, in = act[o][:n*st.out.size()], o
			continue
		}
		cur = st.pool.Forward(autograd.FromSlice(cur, n, st.in.c, st.in.h, st.in.w).In(&s.ctx)).Data
		in = -1
	}
	y := autograd.FromSlice(cur[:n*p.out.size()], n, p.out.size())
	return p.classifier.Forward(y.In(&s.ctx)).Data
}
