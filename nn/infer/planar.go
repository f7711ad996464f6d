package infer

import (
	"sort"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
)

// planarPlan is a compiled ResNet whose convolutions all run sparse on
// planar activations (nchwc.SparseFilter): every nonzero weight one
// register-tiled multiply-add over its whole output image, in time
// proportional to the nonzero weights; each convolution writes its output
// (batch norm folded, bias, residual and ReLU applied) straight into the
// layout its consumers read (nchwc.Shifted for stride 1, nchwc.Split for
// stride 2, nchwc.Flat for a shortcut and the head), so no layer copies
// its input. choose runs it where it is measured faster than the dense
// plans.
//
// A batch gives each worker a run of images; a batch smaller than the
// workers splits every convolution's output channels among them in runs
// of about equal nonzero weights, and a channel is computed alike however
// they are split, so the results do not depend on the number of workers.
type planarPlan struct {
	stem       planarConv
	blocks     []planarBlock
	pool       int
	classifier *nn.Linear
	// nonzero lists, per class, the classifier's nonzero weights (their
	// input features) when it runs sparse; nil: dense.
	nonzero [][]int32
	bufs    []planarBuf // the activation buffers, one of each per worker
	maxOut  int         // the largest convolution output, in values
	// whole keeps each image on one worker when a call has fewer images
	// than workers (the others idle) instead of splitting its
	// convolutions' output channels over the workers: choose times both,
	// since a split image meets the workers at every convolution (21 times
	// in a ResNet-20), which costs more than it saves where each
	// convolution is a few microseconds of work. The logits are the same
	// bits either way.
	whole bool
}

// planarConv is one compiled convolution of a planarPlan; its output goes
// to buffer out of the plan's bufs.
type planarConv struct {
	f    *nchwc.SparseFilter
	bias []float32
	relu bool
	out  int
	// selection: option A's shortcut, a 1×1 filter of zeros and ones
	// (Algorithms names it "select").
	selection bool
	// cost[o] is the cost of the output channels before o (split).
	cost []int
}

// planarBlock is a compiled residual block: out = relu(conv2(conv1(x)) +
// shortcut(x)), the shortcut nil for the identity, whose output then goes
// to the input's buffer.
type planarBlock struct {
	conv1, conv2 planarConv
	shortcut     *planarConv
}

// planarBuf is the shape and layout of an activation buffer.
type planarBuf struct {
	c, h, w int
	l       nchwc.Layout
}

// newPlanarPlan compiles r with every convolution sparse, or returns nil
// when one of its layers does not fit (filters other than 1×1 or 3×3 with
// stride 1 or 2 and padding (k−1)/2).
func newPlanarPlan(r *resnetNet, sparseLinear bool) *planarPlan {
	p := &planarPlan{classifier: r.linear, pool: r.pool}
	if sparseLinear {
		w := r.linear.Weight
		feat := w.Dim(1)
		p.nonzero = make([][]int32, w.Dim(0))
		for o := range p.nonzero {
			for k, v := range w.Data[o*feat : (o+1)*feat] {
				if v != 0 {
					p.nonzero[o] = append(p.nonzero[o], int32(k))
				}
			}
		}
	}
	var ok bool
	if p.stem, ok = p.compile(r.stem, inputShape); !ok {
		return nil
	}
	// producer writes the next block's input, whose buffer is chosen once
	// its consumers' layout is known, other than avoid (the buffer the
	// producer reads).
	avoid := -1
	cur := shape{p.stem.f.Cout, p.stem.f.Ho, p.stem.f.Wo}
	producer := &p.stem
	for _, b := range r.blocks {
		var pb planarBlock
		if pb.conv1, ok = p.compile(b.conv1, cur); !ok {
			return nil
		}
		mid := shape{pb.conv1.f.Cout, pb.conv1.f.Ho, pb.conv1.f.Wo}
		if pb.conv2, ok = p.compile(b.conv2, mid); !ok {
			return nil
		}
		out := shape{pb.conv2.f.Cout, pb.conv2.f.Ho, pb.conv2.f.Wo}
		inL := pb.conv1.f.InLayout()
		if b.shortcut != nil {
			sc, ok := p.compile(*b.shortcut, cur)
			if !ok || sc.f.InLayout() != inL || sc.relu || sc.f.Cout != out.c || sc.f.Ho != out.h || sc.f.Wo != out.w {
				return nil
			}
			sc.out = p.buffer(planarBuf{out.c, out.h, out.w, nchwc.Flat}, -1)
			pb.shortcut = &sc
		} else if inL != nchwc.Shifted || cur != out {
			return nil // the identity needs the image of the input
		}
		if !pb.conv2.relu {
			return nil
		}
		// The input's buffer, in the layout conv1 (and the shortcut) read.
		// An identity block's output overwrites its input (Store reads
		// each residual channel before it writes that channel).
		in := p.buffer(planarBuf{cur.c, cur.h, cur.w, inL}, avoid)
		producer.out = in
		pb.conv1.out = p.buffer(planarBuf{mid.c, mid.h, mid.w, pb.conv2.f.InLayout()}, in)
		avoid = pb.conv1.out
		p.blocks = append(p.blocks, pb)
		producer = &p.blocks[len(p.blocks)-1].conv2
		cur = out
	}
	if len(p.blocks) == 0 {
		return nil
	}
	// The last block's output, read by the head.
	producer.out = p.buffer(planarBuf{cur.c, cur.h, cur.w, nchwc.Flat}, -1)
	if feat := cur.c * ((cur.h-p.pool)/p.pool + 1) * ((cur.w-p.pool)/p.pool + 1); feat != r.linear.Weight.Dim(1) {
		return nil
	}
	return p
}

// buffer returns the index of a buffer of shape and layout b other than
// avoid, adding one if needed.
func (p *planarPlan) buffer(b planarBuf, avoid int) int {
	for i, t := range p.bufs {
		if t == b && i != avoid {
			return i
		}
	}
	p.bufs = append(p.bufs, b)
	return len(p.bufs) - 1
}

// compile folds l's batch norm into its convolution and packs its nonzero
// weights for inputs of shape in, or reports false if it does not fit.
func (p *planarPlan) compile(l convLayer, in shape) (planarConv, bool) {
	conv := l.conv
	w := conv.Weight
	if w.Rank() != 4 {
		return planarConv{}, false
	}
	cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
	if w.Dim(3) != k || (k != 1 && k != 3) || conv.Padding != (k-1)/2 || conv.Dilation != 1 ||
		(conv.Stride != 1 && conv.Stride != 2) || cin != in.c {
		return planarConv{}, false
	}
	fw, bias := foldWeights(conv, l.bn)
	f := nchwc.PackSparse(fw.Data, cout, cin, k, conv.Stride, in.h, in.w)
	if bias == nil {
		bias = make([]float32, cout)
	}
	p.maxOut = max(p.maxOut, cout*f.OutSize())
	cost := make([]int, cout+1)
	for o := range cout {
		cost[o+1] = cost[o] + f.RowNNZ(o) + storeTerms
	}
	return planarConv{f: f, bias: bias, relu: l.relu, selection: l.selection, cost: cost}, true
}

func (p *planarPlan) algorithms(int) []string {
	out := []string{"sparse"}
	for _, b := range p.blocks {
		out = append(out, "sparse", "sparse")
		switch {
		case b.shortcut != nil && b.shortcut.selection:
			out = append(out, "select")
		case b.shortcut != nil:
			out = append(out, "sparse")
		}
	}
	return out
}

func (p *planarPlan) features() int { return p.classifier.Weight.Dim(1) }

// planarActs is one worker's activations: p.bufs, the input image and
// the convolutions' output before their epilogue.
type planarActs struct {
	bufs  []*nchwc.Planar
	image *nchwc.Planar
	y     []float32
}

// planarActs returns n sets of activations, made on first use.
func (s *scratch) planarActs(p *planarPlan, n int) []*planarActs {
	if len(s.planar) > 0 && s.planarOf != p {
		s.planar = nil // another plan used this scratch
	}
	s.planarOf = p
	for len(s.planar) < n {
		a := &planarActs{y: make([]float32, p.maxOut)}
		for _, b := range p.bufs {
			a.bufs = append(a.bufs, nchwc.NewPlanar(b.c, b.h, b.w, b.l))
		}
		a.image = nchwc.NewPlanar(inputShape.c, inputShape.h, inputShape.w, p.stem.f.InLayout())
		s.planar = append(s.planar, a)
	}
	return s.planar[:n]
}

func (p *planarPlan) forward(s *scratch, x []float32, n int) []float32 {
	pooled, logits := s.head(n*p.features(), n*p.classifier.Weight.Dim(0))
	switch w := parallel.Workers(); {
	case w <= 1:
		p.images(s.planarActs(p, 1)[0], x, pooled, logits, 0, n, 1)
	case n < w && !p.whole:
		p.images(s.planarActs(p, 1)[0], x, pooled, logits, 0, n, w)
	default: // whole images per worker (one each when n < w)
		grain := (n + w - 1) / w
		acts := s.planarActs(p, parallel.Chunks(n, grain))
		parallel.For(n, grain, func(lo, hi int) { p.images(acts[lo/grain], x, pooled, logits, lo, hi, 1) })
	}
	return logits
}

// images computes the logits of the images [lo, hi) of x in a, each
// convolution's output channels in parts runs.
func (p *planarPlan) images(a *planarActs, x, pooled, logits []float32, lo, hi, parts int) {
	classes, feat := p.classifier.Weight.Dim(0), p.features()
	size := inputShape.h * inputShape.w
	for i := lo; i < hi; i++ {
		img := x[i*InputSize : (i+1)*InputSize]
		for c := range inputShape.c {
			a.image.SetImage(c, img[c*size:(c+1)*size])
		}
		p.stem.run(a, a.image, nil, parts)
		cur := a.bufs[p.stem.out]
		for j := range p.blocks {
			b := &p.blocks[j]
			res := cur
			if b.shortcut != nil {
				b.shortcut.run(a, cur, nil, parts)
				res = a.bufs[b.shortcut.out]
			}
			b.conv1.run(a, cur, nil, parts)
			b.conv2.run(a, a.bufs[b.conv1.out], res, parts)
			cur = a.bufs[b.conv2.out]
		}
		p.head(cur, pooled[i*feat:(i+1)*feat])
		p.linear(pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
}

// linear is the classifier on one image's features x: linear's sums, the
// zero weights skipped when it runs sparse (the same sums, bit for bit,
// for finite features).
func (p *planarPlan) linear(x, out []float32) {
	if p.nonzero == nil {
		linear(p.classifier, x, out)
		return
	}
	l := p.classifier
	feat := len(x)
	for o := range out {
		w := l.Weight.Data[o*feat : (o+1)*feat]
		var sum float32
		for _, k := range p.nonzero[o] {
			sum += x[k] * w[k]
		}
		if l.Bias != nil {
			sum += l.Bias.Data[o]
		}
		out[o] = sum
	}
}

// run computes c on in (plus the residual res, if not nil) into its
// output buffer of a, its output channels in parts runs on the worker
// pool when parts > 1.
func (c *planarConv) run(a *planarActs, in, res *nchwc.Planar, parts int) {
	out := a.bufs[c.out]
	cout, n := c.f.Cout, c.f.OutSize()
	if parts <= 1 {
		c.f.Rows(in, c.bias, a.y, 0, cout)
		nchwc.Store(out, a.y, res, c.relu, 0, cout)
		return
	}
	f, bias, relu, y := c.f, c.bias, c.relu, a.y
	parallel.For(parts, 1, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			c0, c1 := c.split(k, parts), c.split(k+1, parts)
			f.Rows(in, bias, y[c0*n:], c0, c1)
			nchwc.Store(out, y[c0*n:], res, relu, c0, c1)
		}
	})
}

// split returns the first output channel of run k of parts: the runs
// take about equal shares of the nonzero weights (plus storeTerms per
// channel for its epilogue), so that workers finish together however the
// zeros fall.
func (c *planarConv) split(k, parts int) int {
	cout := c.f.Cout
	if k >= parts {
		return cout
	}
	total := c.cost[cout]
	return sort.Search(cout, func(o int) bool { return c.cost[o]*parts >= total*k })
}

// storeTerms is the cost of a channel's epilogue (Store) counted in
// nonzero weights.
const storeTerms = 8

// head is the average pooling with window and stride p.pool of out's
// image (avgPool).
func (p *planarPlan) head(out *nchwc.Planar, dst []float32) {
	ho, wo := (out.H-p.pool)/p.pool+1, (out.W-p.pool)/p.pool+1
	for c := range out.C {
		avgPool(out.Image(c), out.H, out.W, p.pool, dst[c*ho*wo:(c+1)*ho*wo])
	}
}
