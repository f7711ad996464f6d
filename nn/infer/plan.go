package infer

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/nn"
)

// plan is a network compiled for inference once, at load: every batch
// normalisation folded into the convolution before it (weights scaled per
// filter, the shift as the convolution's bias), every convolution an
// conv.Plan with its filters packed once and the ReLU, the
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

// newPlan compiles net with the layers that rep marks sparse, or returns
// nil when net's graph has neither the ResNet nor the VGG shape (see
// network).
func newPlan(net nn.Module, rep Report) plan {
	r, v := network(net)
	if r == nil && v == nil {
		return nil
	}
	sparse := map[string]bool{}
	for _, l := range rep.Layers {
		sparse[l.Name] = l.Sparse
	}
	if r != nil {
		if allConvSparse(rep) {
			if p := newPlanarPlan(r, sparse[r.linearName], planarDefaults()); p != nil {
				return p
			}
		}
		if direct := newDirectPlan(r, nil, sparse); direct != nil {
			// Faster at every batch size; with Winograd where it pays.
			if w := direct.winograd(); w != nil {
				return w
			}
			return direct
		}
		return newResNetPlan(r, sparse)
	}
	if direct := newDirectPlan(nil, v, sparse); direct != nil {
		if w := direct.winograd(); w != nil {
			direct = w
		}
		return &byBatch{small: direct, large: newVGGPlan(v, sparse), from: vggGEMMFrom}
	}
	return newVGGPlan(v, sparse)
}

// allConvSparse reports whether rep marks every convolution sparse.
func allConvSparse(rep Report) bool {
	n := 0
	for _, l := range rep.Layers {
		if l.Kind == "Conv2d" {
			if !l.Sparse {
				return false
			}
			n++
		}
	}
	return n > 0
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
	p    *conv.Plan
	in   shape
	out  shape
	relu bool
}

// foldConv compiles l for inputs of shape in; the layer runs sparse if
// sparse.
func foldConv(l convLayer, in shape, sparse bool) convStep {
	cl, relu := l.conv, l.relu
	fw, bias := foldWeights(cl, l.bn)
	var sw *conv.SparseWeight
	if sparse {
		sw = conv.NewSparseWeight(fw.Data, fw.Shape())
	}
	p := conv.NewPlan(fw.Data, fw.Shape(), bias, convConfig(cl), in.h, in.w, sw)
	c, h, wd := p.OutShape()
	return convStep{p: p, in: in, out: shape{c, h, wd}, relu: relu}
}

// foldWeights returns the weights and bias of conv followed by bn (nil:
// none) as one convolution: bias nil when neither has one.
func foldWeights(conv *nn.Conv2d, bn *nn.BatchNorm2d) (*autograd.Tensor, []float32) {
	if bn != nil {
		w, bias := FoldBatchNorm(conv, bn)
		return autograd.FromSlice(w, conv.Weight.Shape()...), bias
	}
	fw := autograd.New(conv.Weight.Shape()...)
	copy(fw.Data, conv.Weight.Data)
	var bias []float32
	if conv.Bias != nil {
		bias = append([]float32(nil), conv.Bias.Data...)
	}
	return fw, bias
}

// FoldBatchNorm returns the weight and bias of the convolution conv
// followed by the batch normalisation bn in evaluation mode, as one
// convolution: W'[o] = W[o]·s[o] and b'[o] = (b[o] − mean[o])·s[o] + β[o]
// with s = γ/√(var + eps), computed in float64 and rounded once (b is 0
// when conv has no bias). The compiled plans and the ONNX export with
// folded batch normalisation (nn/onnx) use it.
func FoldBatchNorm(conv *nn.Conv2d, bn *nn.BatchNorm2d) (w, bias []float32) {
	cout := conv.Weight.Dim(0)
	per := conv.Weight.Numel() / cout
	w = make([]float32, conv.Weight.Numel())
	bias = make([]float32, cout)
	for o := range cout {
		s := float64(bn.Weight.Data[o]) / math.Sqrt(float64(bn.RunningVar.Data[o])+float64(bn.Eps))
		for i := o * per; i < (o+1)*per; i++ {
			w[i] = float32(float64(conv.Weight.Data[i]) * s)
		}
		b0 := 0.0
		if conv.Bias != nil {
			b0 = float64(conv.Bias.Data[o])
		}
		bias[o] = float32((b0-float64(bn.RunningMean.Data[o]))*s + float64(bn.Bias.Data[o]))
	}
	return w, bias
}

// run applies the step to the n images in x, into out, adding residual if
// not nil.
func (c convStep) run(n int, x, out, residual []float32) {
	c.p.Run(n, x, out[:n*c.out.size()], residual, c.relu)
}

// inputShape is the shape of a network input.
var inputShape = shape{cifarinfo.Channels, Side, Side}

// resnetPlan is a compiled network of the ResNet shape.
type resnetPlan struct {
	stem   convStep
	blocks []blockPlan
	pool   int // average-pooling window
	linear *nn.Linear
	max    int
}

// blockPlan is a compiled residual block: out = relu(conv2(relu(conv1(x)))
// + shortcut(x)), the shortcut nil for the identity.
type blockPlan struct {
	conv1, conv2 convStep
	shortcut     *convStep
	// chained: conv1 writes straight into conv2's padded input (both
	// sparse; see conv.Plan.RunChained); padded: also the identity
	// shortcut, so that the block reads and writes conv1's padded layout
	// (conv.Plan.RunBlockPadded).
	chained, padded bool
}

func newResNetPlan(r *resnetNet, sparse map[string]bool) *resnetPlan {
	p := &resnetPlan{linear: r.linear, pool: r.pool}
	p.stem = foldConv(r.stem, inputShape, sparse[r.stem.name])
	cur := p.stem.out
	p.max = max(inputShape.size(), cur.size())
	for _, b := range r.blocks {
		bp := blockPlan{conv1: foldConv(b.conv1, cur, sparse[b.conv1.name])}
		bp.conv2 = foldConv(b.conv2, bp.conv1.out, sparse[b.conv2.name])
		if b.shortcut != nil {
			st := foldConv(*b.shortcut, cur, sparse[b.shortcut.name])
			bp.shortcut = &st
		}
		bp.chained = bp.conv1.p.Chains(bp.conv2.p)
		bp.padded = bp.shortcut == nil && bp.conv1.p.ChainsResidual(bp.conv2.p)
		cur = bp.conv2.out
		p.max = max(p.max, bp.conv1.out.size(), cur.size(), bp.conv1.p.PaddedSize())
		p.blocks = append(p.blocks, bp)
	}
	return p
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
	var padded *conv.Plan
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
	for i := range n {
		for c := range in.c {
			plane := act[(i*in.c+c)*in.h*in.w : (i*in.c+c+1)*in.h*in.w]
			avgPool(plane, in.h, in.w, p.pool, pooled[i*feat+c*ho*wo:i*feat+(c+1)*ho*wo])
		}
		linear(p.linear, pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
	return logits
}

// avgPool sets dst to the average pooling with window and stride pool of
// plane (h rows of w values): each window summed row by row and divided
// by its size, as autograd.AvgPool2d computes it.
func avgPool(plane []float32, h, w, pool int, dst []float32) {
	ho, wo := (h-pool)/pool+1, (w-pool)/pool+1
	div := float32(pool * pool)
	for oh := range ho {
		for ow := range wo {
			var sum float32
			for ih := oh * pool; ih < (oh+1)*pool; ih++ {
				for _, v := range plane[ih*w+ow*pool : ih*w+(ow+1)*pool] {
					sum += v
				}
			}
			dst[oh*wo+ow] = sum / div
		}
	}
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

// vggPlan is a compiled network of the VGG shape: convolutions (with
// their batch normalisation and ReLU) and pooling layers, then the
// classifier.
type vggPlan struct {
	steps      []vggStep
	classifier *nn.Linear
	// sparse is the classifier's sparse weight when it runs sparse.
	sparse *conv.SparseWeight
	out    shape
	max    int
}

// vggStep is a convolution or, when conv is nil, a pooling layer.
type vggStep struct {
	conv *convStep
	pool nn.Module
	in   shape
	out  shape
}

func newVGGPlan(v *vggNet, sparse map[string]bool) *vggPlan {
	p := &vggPlan{classifier: v.classifier}
	if sparse[v.classifierName] {
		p.sparse = conv.NewSparseWeight(v.classifier.Weight.Data, v.classifier.Weight.Shape())
	}
	cur := inputShape
	p.max = cur.size()
	for _, l := range v.layers {
		if l.conv != nil {
			st := foldConv(*l.conv, cur, sparse[l.conv.name])
			p.steps = append(p.steps, vggStep{conv: &st, in: cur, out: st.out})
			cur = st.out
		} else {
			out := shape{cur.c, poolSize(cur.h, l.k, l.stride, l.pad), poolSize(cur.w, l.k, l.stride, l.pad)}
			p.steps = append(p.steps, vggStep{pool: l.pool, in: cur, out: out})
			cur = out
		}
		p.max = max(p.max, cur.size())
	}
	p.out = cur
	return p
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
	y := autograd.FromSlice(cur[:n*p.out.size()], n, p.out.size()).In(&s.ctx)
	if p.sparse != nil {
		return linearSparse(y, p.classifier, p.sparse).Data
	}
	return p.classifier.Forward(y).Data
}
