package infer

import (
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// directPlan is a compiled dense models.ResNet whose activations stay in
// the channel-blocked layout of package nchwc from the stem to the head:
// every convolution (batch norm folded) is one nchwc.Conv that reads the
// previous layer's padded output in place and applies the bias, the
// residual and the ReLU in registers, so no layer copies its input. It
// is chosen where nchwc runs its assembly kernels, every layer is dense
// and every channel count a multiple of 16 (the stem's input: at most 4);
// elsewhere resnetPlan runs the network. Measured on ResNet-20 at batch 1
// (one thread, AMD EPYC Zen 4): 729–743 CPU µs per image against 860–902
// for resnetPlan (docs/benchmarks.md).
//
// Each image runs through the whole network on one worker, images in
// parallel; a batch smaller than the workers splits every layer's output
// rows among them (nchwc.ConvRows), which computes every value alike, so
// the results do not depend on the number of workers.
type directPlan struct {
	stem   directConv
	blocks []directBlock
	pool   int
	linear *nn.Linear
	shapes []shape // the activation shapes, input first; 3 buffers each
	max    int
}

// directConv is one compiled convolution of a directPlan.
type directConv struct {
	f         *nchwc.Filter
	bias      []float32
	stride    int
	relu      bool
	in, out   shape
	inS, outS int // indexes of in and out in directPlan.shapes
}

// directBlock is a compiled models.BasicBlock: out = relu(conv2(conv1(x))
// + shortcut(x)), the shortcut nil for the identity.
type directBlock struct {
	conv1, conv2 directConv
	shortcut     *directConv
}

// newDirectPlan compiles r, or returns nil when a layer does not fit the
// layout (sparse, channels not multiples of 16, other filters) or nchwc
// has no fast kernels on this machine.
func newDirectPlan(r *models.ResNet, sparse map[string]bool) *directPlan {
	if !nchwc.Fast() {
		return nil
	}
	for _, s := range sparse {
		if s {
			return nil
		}
	}
	p := &directPlan{linear: r.Linear}
	compile := func(conv *nn.Conv2d, bn *nn.BatchNorm2d, in shape, relu bool) (directConv, bool) {
		w := conv.Weight
		cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
		stem := in == inputShape
		if w.Rank() != 4 || w.Dim(3) != k || (k != 1 && k != 3) || conv.Padding != (k-1)/2 || conv.Dilation != 1 ||
			(conv.Stride != 1 && conv.Stride != 2) || cout%16 != 0 || cin != in.c ||
			(stem && (cin > 4 || k != 3 || conv.Stride != 1)) || (!stem && cin%16 != 0) {
			return directConv{}, false
		}
		fw, bias := foldWeights(conv, bn)
		if bias == nil {
			bias = make([]float32, cout)
		}
		f := nchwc.PackFilter(fw.Data, cout, cin, k)
		ho, wo := f.OutSize(in.h, in.w, conv.Stride)
		c := directConv{f: f, bias: bias, stride: conv.Stride, relu: relu, in: in, out: shape{cout, ho, wo}}
		c.inS, c.outS = p.shapeIndex(in), p.shapeIndex(c.out)
		return c, true
	}
	var ok bool
	if p.stem, ok = compile(r.Conv1, r.BN1, inputShape, true); !ok {
		return nil
	}
	cur := p.stem.out
	for _, stage := range r.Stages {
		for _, l := range stage.Layers {
			b, isBlock := l.(*models.BasicBlock)
			if !isBlock {
				return nil
			}
			var db directBlock
			if db.conv1, ok = compile(b.Conv1, b.BN1, cur, true); !ok {
				return nil
			}
			if db.conv2, ok = compile(b.Conv2, b.BN2, db.conv1.out, true); !ok {
				return nil
			}
			switch sc := b.Shortcut.(type) {
			case nil:
			case *models.PadShortcut:
				c, ok := compile(selectionConv(sc), nil, cur, false)
				if !ok {
					return nil
				}
				db.shortcut = &c
			case *nn.Sequential:
				conv, ok1 := sc.Layers[0].(*nn.Conv2d)
				bn, ok2 := sc.Layers[1].(*nn.BatchNorm2d)
				if len(sc.Layers) != 2 || !ok1 || !ok2 {
					return nil
				}
				c, ok := compile(conv, bn, cur, false)
				if !ok {
					return nil
				}
				db.shortcut = &c
			default:
				return nil
			}
			// image's buffers: conv1's output has the block's output shape,
			// and exactly the blocks that change the shape have a shortcut.
			if db.conv1.outS != db.conv2.outS || (db.shortcut != nil) == (db.conv1.inS == db.conv2.outS) ||
				(db.shortcut != nil && db.shortcut.outS != db.conv2.outS) {
				return nil
			}
			cur = db.conv2.out
			p.blocks = append(p.blocks, db)
		}
	}
	p.pool = r.PoolKernel
	if p.pool == 0 {
		p.pool = cur.w
	}
	for _, s := range p.shapes {
		p.max = max(p.max, s.size())
	}
	return p
}

// shapeIndex returns the index of s in p.shapes, adding it if new.
func (p *directPlan) shapeIndex(s shape) int {
	for i, t := range p.shapes {
		if t == s {
			return i
		}
	}
	p.shapes = append(p.shapes, s)
	return len(p.shapes) - 1
}

func (p *directPlan) actSize() int { return p.max }

func (p *directPlan) algorithms(int) []string {
	out := []string{"direct"}
	for _, b := range p.blocks {
		out = append(out, "direct", "direct")
		if b.shortcut != nil {
			out = append(out, "direct")
		}
	}
	return out
}

// directActs is the activations of one image at a time for a directPlan:
// three buffers of each of its shapes (the input's first, 4 channels to a
// block).
type directActs [][3]*nchwc.Act

// acts returns n sets of activations (one per worker), made on first use.
func (s *scratch) acts(p *directPlan, n int) []directActs {
	if len(s.direct) > 0 && len(s.direct[0]) != len(p.shapes) {
		s.direct = nil // another plan used this scratch
	}
	for len(s.direct) < n {
		a := make(directActs, len(p.shapes))
		for i, sh := range p.shapes {
			for k := range a[i] {
				a[i][k] = nchwc.NewAct(sh.c, sh.h, sh.w)
			}
		}
		s.direct = append(s.direct, a)
	}
	return s.direct[:n]
}

func (p *directPlan) forward(s *scratch, x []float32, n int) []float32 {
	classes := p.linear.Weight.Dim(0)
	feat := p.features()
	pooled, logits := s.head(n*feat, n*classes)
	switch w := parallel.Workers(); {
	case w <= 1:
		p.images(s.acts(p, 1)[0], x, pooled, logits, 0, n, 1)
	case n < w:
		// Few images: each layer's output rows split among the workers.
		p.images(s.acts(p, 1)[0], x, pooled, logits, 0, n, w)
	default:
		// A run of images per worker, each run through one set of
		// activations, which stays in that core's caches.
		grain := (n + w - 1) / w
		acts := s.acts(p, parallel.Chunks(n, grain))
		parallel.For(n, grain, func(lo, hi int) { p.images(acts[lo/grain], x, pooled, logits, lo, hi, 1) })
	}
	return logits
}

// images computes the logits of the images [lo, hi) of x in the
// activations a, with each layer's rows in parts bands.
func (p *directPlan) images(a directActs, x, pooled, logits []float32, lo, hi, parts int) {
	classes, feat := p.linear.Weight.Dim(0), p.features()
	for i := lo; i < hi; i++ {
		last := p.image(a, x[i*InputSize:(i+1)*InputSize], parts)
		p.classify(last, pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
}

// features returns the length of the pooled activation.
func (p *directPlan) features() int {
	last := p.shapes[p.lastShape()]
	return last.c * ((last.h-p.pool)/p.pool + 1) * ((last.w-p.pool)/p.pool + 1)
}

// lastShape returns the index of the network's output shape.
func (p *directPlan) lastShape() int {
	if len(p.blocks) == 0 {
		return p.stem.outS
	}
	return p.blocks[len(p.blocks)-1].conv2.outS
}

// image runs one image x through the convolutions and returns the
// activation holding the network's output; parts > 1 splits each layer's
// rows into that many bands on the worker pool. A block whose output has
// its input's shape rotates that shape's three buffers (input, conv1's
// output, the block's output); a block that changes the shape writes
// conv1's output, the shortcut's and its own into the three of the new
// shape.
func (p *directPlan) image(a directActs, x []float32, parts int) *nchwc.Act {
	a[0][0].FromNCHW(x)
	p.stem.run(a[0][0], nil, a[p.stem.outS][0], parts)
	cur := 0 // the index of the next block's input among its shape's buffers
	for i := range p.blocks {
		b := &p.blocks[i]
		src := a[b.conv1.inS][cur]
		bufs := &a[b.conv2.outS]
		var mid, res, dst *nchwc.Act
		if b.conv1.inS == b.conv2.outS {
			mid, dst, res = bufs[(cur+1)%3], bufs[(cur+2)%3], src
			cur = (cur + 2) % 3
		} else {
			mid, res, dst = bufs[0], bufs[1], bufs[2]
			cur = 2
			b.shortcut.run(src, nil, res, parts)
		}
		b.conv1.run(src, nil, mid, parts)
		b.conv2.run(mid, res, dst, parts)
	}
	return a[p.lastShape()][cur]
}

// run computes c on in (plus res when not nil) into out, its output rows
// in parts bands on the worker pool when parts > 1.
func (c *directConv) run(in, res, out *nchwc.Act, parts int) {
	ho := c.out.h
	if parts <= 1 || ho < 2 {
		nchwc.Conv(in, c.f, c.stride, c.bias, res, c.relu, out)
		return
	}
	parts = min(parts, ho)
	per := (ho + parts - 1) / parts
	f, stride, bias, relu := c.f, c.stride, c.bias, c.relu // c itself stays off the heap
	parallel.For(parts, 1, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			nchwc.ConvRows(in, f, stride, bias, res, relu, out, min(k*per, ho), min((k+1)*per, ho))
		}
	})
}

// classify writes the pooled activation of act (the network's output) into
// pooled and the classifier's output into logits: average pooling with
// window and stride p.pool (each window summed row by row, then divided
// by its size, as autograd.AvgPool2d does) and the linear layer.
func (p *directPlan) classify(act *nchwc.Act, pooled, logits []float32) {
	ho, wo := (act.H-p.pool)/p.pool+1, (act.W-p.pool)/p.pool+1
	div := float32(p.pool * p.pool)
	for c := range act.C {
		for oh := range ho {
			for ow := range wo {
				var sum float32
				for y := oh * p.pool; y < (oh+1)*p.pool; y++ {
					for x := ow * p.pool; x < (ow+1)*p.pool; x++ {
						sum += act.At(c, y, x)
					}
				}
				pooled[(c*ho+oh)*wo+ow] = sum / div
			}
		}
	}
	linear(p.linear, pooled, logits)
}
