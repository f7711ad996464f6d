package infer

import (
	"fmt"
	"slices"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
)

// directPlan is a compiled dense ResNet or VGG whose activations stay in
// the channel-blocked layout of package nchwc from the first convolution
// to the classifier: every convolution (batch norm folded) is one
// nchwc.Conv that reads the previous layer's padded output in place and
// applies the bias, the residual and the ReLU in registers, so no layer
// copies its input. It is chosen where nchwc runs its assembly kernels
// and every layer is dense (any channel counts: nchwc pads the last block
// of channels); elsewhere resnetPlan or vggPlan runs the network. Its 3×3
// stride-1 convolutions run Winograd's F(2×2, 3×3) in the same layout
// (nchwc.Winograd, same fusions) where that pays (directConv.winograd):
// on the dense ResNet-20, 16 of its 21 convolutions. A ResNet's trunk
// channels are reordered so that channels a compacted network's blocks
// pass through share a block of 16 whose products are skipped
// (directResNet.reorderTrunks).
// Measured on ResNet-20 at batch 1 (one thread, AMD EPYC Zen 4): 0.742 ms
// per image against 0.844 for resnetPlan (docs/benchmarks.md).
//
// A batch gives each worker a run of images, which it takes through the
// whole network in one set of activations; a batch smaller than the
// workers splits every layer's output rows among split of them
// (nchwc.ConvRows; choose picks split by timing), which computes every
// value alike, so the results do not depend on the number of workers.
type directPlan struct {
	net        directNet
	classifier *nn.Linear
	shapes     []shape // the activation shapes, the image's first; 3 buffers each
	// split is the workers among which a call of fewer images than
	// workers splits each layer's rows: 0 all of them, 1 none (each image
	// on one worker). Past a few workers the bands of a small image's
	// layers are too thin to pay for their meetings: on a 16-core Intel
	// Xeon, ResNet-20's single image ran 3,297 images/s on 2 workers
	// and 2,768 split over 16 (docs/benchmarks.md, "Thread scaling").
	split int
}

// directNet is the network of a directPlan.
type directNet interface {
	// image runs the image in a[0][0] through the network's layers and
	// returns the activation that holds their output; parts > 1 splits
	// each layer's rows into that many bands on the worker pool.
	image(a directActs, parts int) *nchwc.Act
	// features writes the classifier's input, computed from the output
	// of image, into dst.
	features(out *nchwc.Act, dst []float32)
	// algorithms names the algorithm of every convolution.
	algorithms() []string
	// winograd returns the network with the convolutions that Winograd
	// applies to (directConv.winograd) running it, and how many they are.
	winograd() (directNet, int)
}

// directConv is one compiled convolution of a directPlan.
type directConv struct {
	f         *nchwc.Filter
	wf        *nchwc.WinoFilter // not nil: the convolution runs Winograd (nchwc.Winograd) with these filters, not f
	bias      []float32
	stride    int
	relu      bool
	skip      bool // f skips its zero filter vectors (nchwc.PackFilterSkip)
	in, out   shape
	inS, outS int  // indexes of in and out in directPlan.shapes
	image     bool // the first layer, reading the image in blocks of 4 channels
	// w is the filters with the batch norm folded (out.c × in.c × k × k),
	// their channels in the order of the activations' layout
	// (reorderTrunks), from which winograd packs its filters.
	w []float32
	// inPerm and outPerm are the original channels of the input's and
	// the output's channels in the layout (nil: the same order).
	inPerm, outPerm []int
}

// newDirectPlan compiles the network r or v (the other nil), or returns
// nil when one of its layers does not fit the layout (sparse, filters
// other than 1×1 or 3×3 with stride 1 or 2) or nchwc has no fast kernels
// on this machine.
func newDirectPlan(r *resnetNet, v *vggNet, sparse map[string]bool) *directPlan {
	if !nchwc.Fast() {
		return nil
	}
	for _, s := range sparse {
		if s {
			return nil
		}
	}
	p := &directPlan{shapes: []shape{inputShape}}
	var ok bool
	switch {
	case r != nil:
		p.classifier = r.linear
		p.net, ok = p.resnet(r)
	case v != nil:
		p.classifier = v.classifier
		p.net, ok = p.vgg(v)
	}
	if !ok {
		return nil
	}
	return p
}

// compile folds bn (nil: none) into conv and packs it for inputs of shape
// in, or reports false if the layer does not fit the layout.
func (p *directPlan) compile(conv *nn.Conv2d, bn *nn.BatchNorm2d, in shape, relu bool) (directConv, bool) {
	w := conv.Weight
	if w.Rank() != 4 {
		return directConv{}, false
	}
	cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
	image := len(p.shapes) == 1 // the first layer, which reads the image
	if w.Dim(3) != k || (k != 1 && k != 3) || conv.Padding != (k-1)/2 || conv.Dilation != 1 ||
		(conv.Stride != 1 && conv.Stride != 2) || cin != in.c ||
		(image && (cin > 4 || k != 3 || conv.Stride != 1)) {
		return directConv{}, false
	}
	fw, bias := foldWeights(conv, bn)
	pad := (k - 1) / 2
	ho, wo := (in.h+2*pad-k)/conv.Stride+1, (in.w+2*pad-k)/conv.Stride+1
	c := directConv{stride: conv.Stride, relu: relu, in: in, out: shape{cout, ho, wo}, image: image}
	c.pack(fw.Data, bias)
	c.outS = p.shapeIndex(c.out)
	if !image {
		c.inS = p.shapeIndex(in)
	}
	return c, true
}

// pack packs the folded filters w (out.c × in.c × k × k, k from their
// size) and bias for c's shapes.
func (c *directConv) pack(w, bias []float32) {
	cout, cin := c.out.c, c.in.c
	k := 1
	if len(w) == 9*cout*cin {
		k = 3
	}
	f := nchwc.PackFilter(w, cout, cin, k)
	skip := false
	switch z, _ := f.ZeroVectors(); {
	case c.image:
		f = nchwc.PackImageFilter(w, cout, cin, k)
	case z > 0:
		// Zero filter vectors skipped: never slower, and the more zero
		// vectors the faster (docs/benchmarks.md).
		f, skip = nchwc.PackFilterSkip(w, cout, cin, k, c.in.h, c.in.w), true
	}
	c.w, c.f, c.skip = w, f, skip
	c.bias = f.PadBias(bias) // whole blocks: no allocation per call
}

// permute packs c again with its channels in the orders inPerm and
// outPerm.
func (c *directConv) permute() {
	cout, cin := c.out.c, c.in.c
	kk := len(c.w) / (cout * cin)
	w, bias := make([]float32, len(c.w)), make([]float32, cout)
	for o := range cout {
		po := o
		if c.outPerm != nil {
			po = c.outPerm[o]
		}
		bias[o] = c.bias[po]
		for i := range cin {
			pi := i
			if c.inPerm != nil {
				pi = c.inPerm[i]
			}
			copy(w[(o*cin+i)*kk:(o*cin+i+1)*kk], c.w[(po*cin+pi)*kk:(po*cin+pi+1)*kk])
		}
	}
	c.pack(w, bias)
}

// shapeIndex returns the index of s in p.shapes, adding it if new; the
// image's buffers (index 0, in their own layout) are not shared with
// activations of its shape.
func (p *directPlan) shapeIndex(s shape) int {
	for i, t := range p.shapes {
		if i > 0 && t == s {
			return i
		}
	}
	p.shapes = append(p.shapes, s)
	return len(p.shapes) - 1
}

func (p *directPlan) algorithms(int) []string { return p.net.algorithms() }

// features returns the length of the classifier's input.
func (p *directPlan) features() int { return p.classifier.Weight.Dim(1) }

// directActs is the activations of one image at a time for a directPlan:
// three buffers of each of its shapes (the image's first, 4 channels to a
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
				if i == 0 {
					a[i][k] = nchwc.NewImage(sh.c, sh.h, sh.w)
				} else {
					a[i][k] = nchwc.NewAct(sh.c, sh.h, sh.w)
				}
			}
		}
		s.direct = append(s.direct, a)
	}
	return s.direct[:n]
}

func (p *directPlan) forward(s *scratch, x []float32, n int) []float32 {
	pooled, logits := s.head(n*p.features(), n*p.classifier.Weight.Dim(0))
	switch w := parallel.Workers(); {
	case w <= 1:
		p.images(s.acts(p, 1)[0], x, pooled, logits, 0, n, 1)
	case n < w && p.split != 1:
		// Few images: each layer's output rows split among the workers.
		parts := w
		if p.split > 1 {
			parts = min(p.split, w)
		}
		p.images(s.acts(p, 1)[0], x, pooled, logits, 0, n, parts)
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
	classes, feat := p.classifier.Weight.Dim(0), p.features()
	for i := lo; i < hi; i++ {
		a[0][0].FromNCHW(x[i*InputSize : (i+1)*InputSize])
		out := p.net.image(a, parts)
		p.net.features(out, pooled[i*feat:(i+1)*feat])
		linear(p.classifier, pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
}

// winograd returns c running Winograd's F(2×2, 3×3) (nchwc.Winograd), or
// false where it does not apply or does not pay: it applies to a 3×3,
// stride-1 convolution of an activation in blocks of 16 channels (not
// the image's) from winoMinTiles tiles and winoMinWork, and pays where
// its estimated cost is below the direct kernels' (winoPays), for dense
// filters as for those that skip zero filter vectors.
func (c *directConv) winograd() (directConv, bool) {
	if !c.winogradFits() {
		return *c, false
	}
	d := c.withWinograd()
	if !winoPays(c.f, d.wf.MACs(c.out.h, c.out.w), c.in.c, c.out.c, c.out.h, c.out.w) {
		return *c, false
	}
	return d, true
}

// winogradFits reports whether Winograd applies to c (3×3, stride 1,
// blocks of 16 channels, not already Winograd) and passes the thresholds
// winoMinTiles and winoMinWork.
func (c *directConv) winogradFits() bool {
	tiles := (c.out.h + 1) / 2 * ((c.out.w + 1) / 2)
	return c.f.K == 3 && c.stride == 1 && c.f.CB == 16 && c.wf == nil &&
		tiles >= winoMinTiles && c.in.c*c.out.c*tiles >= winoMinWork
}

// withWinograd returns c running Winograd with its filters transformed.
func (c *directConv) withWinograd() directConv {
	d := *c
	d.wf = nchwc.PackWinograd(c.w, c.out.c, c.in.c)
	return d
}

// winoMinTiles and winoMinWork are the least 2×2 output tiles and
// product of input channels, output channels and tiles from which a
// convolution runs Winograd in a directPlan (with fewer tiles, each
// transformed filter, 16/9 the size of the direct one, serves too few
// outputs). Measured on the 2-core AMD EPYC Zen 4, one thread, batch 1
// (µs, direct against Winograd, bias and ReLU, before Winograd's product
// kernels ran 16 products a call): 16→16 channels at 4×4 pixels
// 0.91–0.97 against 1.14–1.37, at 8×8 3.0 against 2.5; 64→64 at 4×4
// 11.3 against 6.3, at 2×2 3.7–5.2 against 3.8–4.6; 5→9 at 16×16 4.1
// against 6.3; 128→128 and 512→512 at 4×4 43 and 780–900 against 23
// and 750–770. Above them winoPays decides; below 12 input channels it
// chose direct kernels until the product kernels made narrow products
// cheaper (9→16 at 32×32, 5→27 at 16×16 and 10→30 at 8×8 from
// resnet20-compact: 24.0, 7.0 and 3.3 µs direct against 17.9, 6.4 and
// 2.2 with Winograd).
const (
	winoMinTiles = 4
	winoMinWork  = 16 * 16 * 16
)

// winograd returns p with the convolutions where Winograd applies and
// pays (directConv.winograd) running it, or nil where there are none.
func (p *directPlan) winograd() *directPlan {
	net, n := p.net.winograd()
	if n == 0 {
		return nil
	}
	w := *p
	w.net = net
	return &w
}

// run computes c on in (plus res when not nil) into out, its output rows
// in parts bands on the worker pool when parts > 1.
func (c *directConv) run(in, res, out *nchwc.Act, parts int) {
	ho := c.out.h
	if c.wf != nil {
		// Bands of whole 2×2 tiles.
		tiles := (ho + 1) / 2
		if parts <= 1 || tiles < 2 {
			nchwc.Winograd(in, c.wf, c.bias, res, c.relu, out)
			return
		}
		parts = min(parts, tiles)
		per := 2 * ((tiles + parts - 1) / parts)
		wf, bias, relu := c.wf, c.bias, c.relu // c itself stays off the heap
		parallel.For(parts, 1, func(lo, hi int) {
			for k := lo; k < hi; k++ {
				nchwc.WinogradRows(in, wf, bias, res, relu, out, min(k*per, ho), min((k+1)*per, ho))
			}
		})
		return
	}
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

// directResNet is a network of the ResNet shape for a directPlan.
type directResNet struct {
	stem   directConv
	blocks []directBlock
	pool   int // the average-pooling window before the classifier
	// order is the original channels of the last activation's channels
	// in the layout (nil: the same order; reorderTrunks).
	order []int
}

// directBlock is a compiled residual block: out = relu(conv2(conv1(x))
// + shortcut(x)), the shortcut nil for the identity.
type directBlock struct {
	conv1, conv2 directConv
	shortcut     *directConv
}

// resnet compiles r's layers, or reports false.
func (p *directPlan) resnet(r *resnetNet) (*directResNet, bool) {
	d := &directResNet{}
	var ok bool
	if d.stem, ok = p.compile(r.stem.conv, r.stem.bn, inputShape, r.stem.relu); !ok {
		return nil, false
	}
	cur := d.stem.out
	for _, b := range r.blocks {
		var db directBlock
		if db.conv1, ok = p.compile(b.conv1.conv, b.conv1.bn, cur, b.conv1.relu); !ok {
			return nil, false
		}
		if db.conv2, ok = p.compile(b.conv2.conv, b.conv2.bn, db.conv1.out, b.conv2.relu); !ok {
			return nil, false
		}
		if b.shortcut != nil {
			c, ok := p.compile(b.shortcut.conv, b.shortcut.bn, cur, b.shortcut.relu)
			if !ok {
				return nil, false
			}
			db.shortcut = &c
		}
		// image's buffers: exactly the blocks that change the shape have
		// a shortcut.
		if (db.shortcut != nil) == (db.conv1.inS == db.conv2.outS) ||
			(db.shortcut != nil && db.shortcut.outS != db.conv2.outS) {
			return nil, false
		}
		cur = db.conv2.out
		d.blocks = append(d.blocks, db)
	}
	d.pool = r.pool
	if feat := cur.c * ((cur.h-d.pool)/d.pool + 1) * ((cur.w-d.pool)/d.pool + 1); feat != r.linear.Weight.Dim(1) {
		return nil, false
	}
	d.reorderTrunks()
	return d, true
}

// reorderTrunks reorders the channels of each trunk, the activation that
// a stage's residual blocks add to (written by the stem or a block's
// shortcut and by the second convolution of every block of the stage,
// read by the first convolution of every block of the stage and of the
// next one, that one's shortcut, and the pooling), so that the filters of
// the last block of 16 channels are zero in as many of its writers as can
// be (trunkOrder). A compacted network keeps a channel in the trunk for
// the blocks that use it and zeroes its filters in the others, which pass
// it through; with the zero filters in one block of channels, the
// Winograd convolutions skip that block's products
// (nchwc.PackWinograd) and the direct kernels its filter vectors
// (nchwc.PackFilterSkip). Each convolution computes the same sums over
// its input channels in another order (the same values up to rounding).
func (d *directResNet) reorderTrunks() {
	var touched []*directConv
	reorder := func(writers, readers []*directConv) []int {
		order := trunkOrder(writers)
		if order == nil {
			return nil
		}
		for _, c := range writers {
			c.outPerm = order
		}
		for _, c := range readers {
			c.inPerm = order
		}
		touched = append(touched, writers...)
		touched = append(touched, readers...)
		return order
	}
	writers, readers := []*directConv{&d.stem}, []*directConv(nil)
	for i := range d.blocks {
		b := &d.blocks[i]
		readers = append(readers, &b.conv1)
		if b.shortcut != nil { // a new trunk
			reorder(writers, append(readers, b.shortcut))
			writers, readers = []*directConv{b.shortcut}, nil
		}
		writers = append(writers, &b.conv2)
	}
	d.order = reorder(writers, readers)
	for i, c := range touched {
		if !slices.Contains(touched[:i], c) {
			c.permute()
		}
	}
}

// trunkOrder returns an order of the channels of the trunk that writers
// (the convolutions that write it, batch norm folded) write, which puts
// into its last block of 16 channels (the C − 16·(⌈C/16⌉−1) channels of
// the tail, or 16) channels whose filters are zero in as many writers as
// it can: the writers taken greedily in order of decreasing
// multiply-adds, each whose zero filters leave enough channels in common
// with those taken before; among the channels left, those zero in most
// writers, then the first; in that block first the channels that writers
// need, so that as many writers as can have zero filters in its channels
// 8-15 (computed 8 wide, nchwc.PackWinograd). It returns nil where the
// trunk has one block,
// no writer has that many zero filters, or the order would leave the
// writers more nonzero filter vectors (nonzeroVectors) than they have.
func trunkOrder(writers []*directConv) []int {
	c := writers[0].out.c
	nb := (c + 15) / 16
	if nb < 2 {
		return nil
	}
	last := c - 16*(nb-1)
	zero := make([][]bool, len(writers))
	for k, w := range writers {
		zero[k] = make([]bool, c)
		n := len(w.w) / c
		for o := range c {
			zero[k][o] = !slices.ContainsFunc(w.w[o*n:(o+1)*n], func(x float32) bool { return x != 0 })
		}
	}
	byCost := make([]int, len(writers))
	for k := range byCost {
		byCost[k] = k
	}
	macs := func(k int) int { w := writers[k]; return len(w.w) * w.out.h * w.out.w }
	slices.SortStableFunc(byCost, func(a, b int) int { return macs(b) - macs(a) })
	cand := make([]bool, c)
	for o := range cand {
		cand[o] = true
	}
	taken := 0
	for _, k := range byCost {
		n := 0
		for o := range c {
			if cand[o] && zero[k][o] {
				n++
			}
		}
		if n < last {
			continue
		}
		for o := range c {
			cand[o] = cand[o] && zero[k][o]
		}
		taken++
	}
	if taken == 0 {
		return nil
	}
	var pick []int
	for o := range c {
		if cand[o] {
			pick = append(pick, o)
		}
	}
	score := func(o int) int {
		n := 0
		for k := range zero {
			if zero[k][o] {
				n++
			}
		}
		return n
	}
	slices.SortStableFunc(pick, func(a, b int) int { return score(b) - score(a) })
	inLast := make([]bool, c)
	for _, o := range pick[:last] {
		inLast[o] = true
	}
	// In the last block, first (its channels 0-7) the channels with
	// nonzero filters in the writers taken greedily in the same order,
	// each whose nonzero ones there fit among the 8 with those taken
	// before: Winograd computes the block 8 wide for those writers.
	front := make([]bool, c)
	nfront := 0
	for _, k := range byCost {
		n := nfront
		for o := range c {
			if inLast[o] && !front[o] && !zero[k][o] {
				n++
			}
		}
		if n > 8 {
			continue
		}
		for o := range c {
			front[o] = front[o] || inLast[o] && !zero[k][o]
		}
		nfront = n
	}
	order := make([]int, 0, c)
	for _, in := range []func(o int) bool{
		func(o int) bool { return !inLast[o] },
		func(o int) bool { return front[o] },
		func(o int) bool { return inLast[o] && !front[o] },
	} {
		for o := range c {
			if in(o) {
				order = append(order, o)
			}
		}
	}
	if nonzeroVectors(writers, order) >= nonzeroVectors(writers, nil) {
		return nil // other zeros (SIMD-block sparsity) are aligned with the blocks as they are
	}
	return order
}

// nonzeroVectors returns how many filter vectors of the writers — the
// weights of one block of 16 output channels at one input channel and
// tap, the output channels in order (nil: as they are) — are not all
// zero: the vectors that the kernels skipping zero ones load.
func nonzeroVectors(writers []*directConv, order []int) int {
	n := 0
	for _, w := range writers {
		c := w.out.c
		per := len(w.w) / c // input channels × taps
		for b := 0; b < c; b += 16 {
			for i := range per {
				for pos := b; pos < min(b+16, c); pos++ {
					o := pos
					if order != nil {
						o = order[pos]
					}
					if w.w[o*per+i] != 0 {
						n++
						break
					}
				}
			}
		}
	}
	return n
}

// image runs the ResNet. A block whose output has its input's shape
// rotates that shape's three buffers (input, conv1's output, the block's
// output); a block that changes the shape writes conv1's output, the
// shortcut's and its own into the three of the new shape. Where conv1's
// output has a shape of its own (a compacted block's inner width), it
// goes to a buffer of that shape other than the input.
func (d *directResNet) image(a directActs, parts int) *nchwc.Act {
	d.stem.run(a[0][0], nil, a[d.stem.outS][0], parts)
	cur, curS := 0, d.stem.outS // the next block's input among its shape's buffers
	for i := range d.blocks {
		b := &d.blocks[i]
		src, in := a[b.conv1.inS][cur], cur
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
		switch midS := b.conv1.outS; {
		case midS == b.conv2.outS:
		case midS == b.conv1.inS:
			mid = a[midS][(in+1)%3]
		default:
			mid = a[midS][0]
		}
		b.conv1.run(src, nil, mid, parts)
		b.conv2.run(mid, res, dst, parts)
		curS = b.conv2.outS
	}
	return a[curS][cur]
}

// features is the average pooling with window and stride d.pool, each
// window summed row by row and divided by its size, as autograd.AvgPool2d
// computes it.
func (d *directResNet) features(out *nchwc.Act, dst []float32) {
	ho, wo := (out.H-d.pool)/d.pool+1, (out.W-d.pool)/d.pool+1
	div := float32(d.pool * d.pool)
	cb, rs, bs := out.CB, out.RowStride(), out.BlockStride()
	var sums [16]float32
	for b := 0; b*cb < out.C; b++ {
		lanes := min(cb, out.C-b*cb) // the block's channels
		for oh := range ho {
			for ow := range wo {
				// Each channel's window summed in the order y, then x, as
				// a lane of the block's pixel vectors.
				acc := sums[:lanes]
				clear(acc)
				for y := oh * d.pool; y < (oh+1)*d.pool; y++ {
					row := out.Data[b*bs+(y+1)*rs:]
					for x := ow * d.pool; x < (ow+1)*d.pool; x++ {
						px := row[(x+1)*cb:][:lanes]
						for l, v := range px {
							acc[l] += v
						}
					}
				}
				for l, v := range acc {
					oc := b*cb + l // the channel's place among the features
					if d.order != nil {
						oc = d.order[oc]
					}
					dst[(oc*ho+oh)*wo+ow] = v / div
				}
			}
		}
	}
}

func (d *directResNet) algorithms() []string {
	out := []string{d.stem.algorithm()}
	for _, b := range d.blocks {
		out = append(out, b.conv1.algorithm(), b.conv2.algorithm())
		if b.shortcut != nil {
			out = append(out, b.shortcut.algorithm())
		}
	}
	return out
}

func (d *directResNet) winograd() (directNet, int) {
	w := *d
	w.blocks = slices.Clone(d.blocks)
	n := 0
	for i := range w.blocks {
		b := &w.blocks[i]
		for _, c := range []*directConv{&b.conv1, &b.conv2} {
			if wc, ok := c.winograd(); ok {
				*c = wc
				n++
			}
		}
		if b.shortcut != nil {
			if wc, ok := b.shortcut.winograd(); ok {
				b.shortcut = &wc
				n++
			}
		}
	}
	return &w, n
}

// algorithm names c's algorithm: "direct", "direct-skip" where its
// filter skips zero vectors, or "winograd".
func (c *directConv) algorithm() string {
	if c.wf != nil {
		return "winograd"
	}
	if c.skip {
		return "direct-skip"
	}
	return "direct"
}

// directVGG is a network of the VGG shape for a directPlan: convolutions (batch norm and
// ReLU folded in) and max-pooling layers.
type directVGG struct {
	steps []directStep
}

// directStep is a convolution or, when conv is nil, a max pooling of
// window and stride pool from the shape inS to outS.
type directStep struct {
	conv      *directConv
	pool      int
	inS, outS int
}

// vgg compiles v's layers, or reports false.
func (p *directPlan) vgg(v *vggNet) (*directVGG, bool) {
	d := &directVGG{}
	cur := inputShape
	for _, l := range v.layers {
		if l.conv != nil {
			c, ok := p.compile(l.conv.conv, l.conv.bn, cur, l.conv.relu)
			if !ok {
				return nil, false
			}
			d.steps = append(d.steps, directStep{conv: &c, inS: c.inS, outS: c.outS})
			cur = c.out
			continue
		}
		k := l.k
		if !l.max || k != l.stride || l.pad != 0 || k < 1 || cur.h < k || cur.w < k {
			return nil, false
		}
		out := shape{cur.c, poolSize(cur.h, k, k, 0), poolSize(cur.w, k, k, 0)}
		d.steps = append(d.steps, directStep{pool: k, inS: p.shapeIndex(cur), outS: p.shapeIndex(out)})
		cur = out
	}
	if len(d.steps) == 0 || d.steps[0].conv == nil || cur.size() != v.classifier.Weight.Dim(1) {
		return nil, false
	}
	return d, true
}

// image runs the VGG, each layer writing a buffer of its output shape
// other than the one it reads.
func (d *directVGG) image(a directActs, parts int) *nchwc.Act {
	cur, curS := 0, 0
	for i := range d.steps {
		st := &d.steps[i]
		next := 0
		if st.outS == curS {
			next = (cur + 1) % 3
		}
		src, dst := a[curS][cur], a[st.outS][next]
		if st.conv != nil {
			st.conv.run(src, nil, dst, parts)
		} else {
			maxPool(src, dst, st.pool)
		}
		cur, curS = next, st.outS
	}
	return a[curS][cur]
}

// maxPool writes the maximum of every k×k window of src (stride k) into
// dst.
func maxPool(src, dst *nchwc.Act, k int) {
	if dst.C != src.C || dst.H != src.H/k || dst.W != src.W/k {
		panic(fmt.Sprintf("infer: max pooling %d×%d×%d by %d into %d×%d×%d", src.C, src.H, src.W, k, dst.C, dst.H, dst.W))
	}
	for c := range dst.C {
		for y := range dst.H {
			for x := range dst.W {
				m := src.At(c, y*k, x*k)
				for dy := range k {
					for dx := range k {
						m = max(m, src.At(c, y*k+dy, x*k+dx))
					}
				}
				dst.Set(c, y, x, m)
			}
		}
	}
}

// features flattens the output channel by channel, as nn.Flatten does.
func (d *directVGG) features(out *nchwc.Act, dst []float32) {
	for c := range out.C {
		for y := range out.H {
			for x := range out.W {
				dst[(c*out.H+y)*out.W+x] = out.At(c, y, x)
			}
		}
	}
}

func (d *directVGG) winograd() (directNet, int) {
	w := &directVGG{steps: slices.Clone(d.steps)}
	n := 0
	for i := range w.steps {
		st := &w.steps[i]
		if st.conv == nil {
			continue
		}
		if wc, ok := st.conv.winograd(); ok {
			st.conv = &wc
			n++
		}
	}
	return w, n
}

func (d *directVGG) algorithms() []string {
	var out []string
	for _, st := range d.steps {
		if st.conv != nil {
			out = append(out, st.conv.algorithm())
		}
	}
	return out
}

// winoPays reports whether Winograd is estimated to be faster than the
// direct kernels (skipping zero filter vectors where f does,
// PackFilterSkip) on a convolution of cin to cout channels and ho×wo
// output pixels whose filter f has nonzero vectors of f.FB blocks, and
// whose Winograd products execute wino multiply-adds
// (nchwc.WinoFilter.MACs). The cost is counted in multiply-adds of the
// direct kernels: theirs are the nonzero vectors times their full width
// per output pixel (the half kernels of a last block of at most 8
// channels took 22–29 ns per thousand of their 8-lane multiply-adds
// against 18–19.5 for the full ones, so they count as 16 lanes),
// Winograd's its products' weighted by winoMACCost plus winoTransformCost
// per 16-channel block and 2×2 tile, in and out. The rule depends on the
// weights and shapes alone, so every load of a model chooses alike.
func winoPays(f *nchwc.Filter, wino, cin, cout, ho, wo int) bool {
	z, n := f.ZeroVectors()
	direct := float64((n-z)*16*f.FB) * float64(ho*wo)
	tiles := (ho + 1) / 2 * ((wo + 1) / 2)
	blocks := (cin+15)/16 + (cout+15)/16
	return float64(wino)*winoMACCost+float64(tiles*blocks)*winoTransformCost < direct
}

// winoMACCost and winoTransformCost are the cost of one multiply-add of
// Winograd's products and of transforming one 16-channel block of one
// tile (in or out), in multiply-adds of the direct kernels. Fitted (least
// squares) to BenchmarkDirectLayers on the 2-core AMD EPYC Zen 4 (one
// thread, batch 1, shared machine) with the product kernels that run a
// strip's 16 products per call: 18 Winograd layers of resnet20-compact and
// resnet20-block, 0.08–1.05 million product multiply-adds, 48–512 blocks
// of tiles, 2.2–26.5 µs, took 18.0 ns per thousand product multiply-adds
// and 15.5 ns per block of a tile, the direct kernels 18.2 ns per
// thousand executed multiply-adds (55 G/s; 53–56 on these layers): 0.99
// and 851 direct multiply-adds. (With a call per product, before: 0.85
// and 1,620, the calls counted in the transforms.)
const (
	winoMACCost       = 1.0
	winoTransformCost = 850
)
