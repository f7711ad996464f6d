package infer

import (
	"slices"

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
// workers splits each image over them (unless whole): one call of
// parallel.Phases per image, whose phases are the network's layers (a
// block's shortcut and first convolution in one phase, its second in the
// next) and whose part k is the same band of output rows of every layer
// (planarConv.band), so that the workers meet at an atomic barrier
// between layers, not at a call of the pool. Part k computes its band on
// its own activation buffers (set k of the scratch): two workers storing
// bands of one shared buffer ran its store 2–4× slower than on their own
// buffers, even with rows between the bands (measured on AMD EPYC Zen 4,
// docs/benchmarks.md). The rows next to its band that its filters read
// (the halo) it computes again itself (planarPlan.rows) and, at each
// block's input, copies from its neighbours' buffers
// (nchwc.Planar.CopyRows). The convolutions of fewer than minBandImage
// output pixels are split by output channels instead, every band
// computing its channels of every row into band 0's buffers, which all
// bands read (shared), or, with bandOnly, run on band 0 alone. Every
// output value is computed alike however the image is split, so the
// results do not depend on the number of workers.
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
	// phases lists the convolutions in the order they run, those of one
	// phase independent of each other (read by images).
	phases [][]planarStep
	convs  int // the convolutions (planarConv.id)
	// whole keeps each image on one worker when a call has fewer images
	// than workers (the others idle) instead of splitting it over the
	// workers: choose times both, since a split image meets the workers
	// at every phase (19 times in a ResNet-20), which can cost more than
	// it saves where a phase is a few microseconds of work. The logits
	// are the same bits either way.
	whole bool
	// bandOnly runs the single convolutions (shared) of a split image on
	// band 0 alone, the other workers waiting, instead of splitting them
	// by output channels (each band its channels of every row, written
	// into band 0's buffers that all read: the planes of distinct
	// channels share no cache line, nothing is computed twice, and each
	// band reads the other bands' channels of its input from their
	// caches, where the rows of an 8×8 image in bands would be a quarter
	// halo). choose times both where it splits images; the logits are
	// the same bits.
	bandOnly bool
}

// planarStep is one convolution of a phase: conv on buffer in (−1: the
// input image), plus the residual buffer res (−1: none, else of rows the
// same band of the step writes), its products in the scratch y from yOff
// on (steps of one phase apart).
type planarStep struct {
	conv    *planarConv
	in, res int
	yOff    int
	// producer and resConv are the convolutions that write buffers in
	// and res (nil: the input image, or none).
	producer, resConv *planarConv
	// exchange: the rows of in that a band reads and did not compute come
	// from the other bands' buffers (nchwc.Planar.CopyRows), which stops
	// the recomputed rows from growing back through the network (rows);
	// copied: an earlier step of the phase has copied them.
	exchange, copied bool
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
	// id numbers the convolutions in the order they run (rows).
	id int
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
func newPlanarPlan(r *resnetNet, sparseLinear bool, opt planarOptions) *planarPlan {
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
	avoid, prevIn := -1, -1
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
		// The input's buffer, in the layout conv1 (and the shortcut) read:
		// with opt.pingPong, not the previous block's input, so that an
		// identity block's output does not overwrite its input (else
		// Store reads each residual value before it writes it).
		in := p.buffer(planarBuf{cur.c, cur.h, cur.w, inL}, avoid, prevIn)
		if opt.pingPong {
			prevIn = in
		}
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
	p.phases = [][]planarStep{{{conv: &p.stem, in: -1, res: -1}}}
	in, producer := p.stem.out, &p.stem
	since := 0 // blocks since the last exchange
	for j := range p.blocks {
		b := &p.blocks[j]
		// Exchange rows at the block's input where its resolution
		// changes (a band of a strided layer reads twice the rows, so
		// recomputing them would double at every stage) or after
		// opt.exchangeEvery blocks.
		since++
		ex := b.conv1.f.S != 1 || b.conv1.single() != producer.single() || since >= opt.exchangeEvery
		if ex {
			since = 0
		}
		first := []planarStep{{conv: &b.conv1, in: in, res: -1, producer: producer, exchange: ex}}
		res, resConv := in, producer
		if b.shortcut != nil {
			// Its 1×1 filter reads no row outside those conv1 reads, which
			// conv1's step has in place before it runs.
			first = append(first, planarStep{conv: b.shortcut, in: in, res: -1, yOff: p.maxOut, producer: producer, exchange: ex, copied: ex})
			res, resConv = b.shortcut.out, b.shortcut
		}
		p.phases = append(p.phases, first, []planarStep{{conv: &b.conv2, in: b.conv1.out, res: res,
			producer: &b.conv1, resConv: resConv}})
		in, producer = b.conv2.out, &b.conv2
	}
	id := 0
	for _, ph := range p.phases {
		for _, t := range ph {
			t.conv.id = id
			id++
		}
	}
	p.convs = id
	if feat := cur.c * ((cur.h-p.pool)/p.pool + 1) * ((cur.w-p.pool)/p.pool + 1); feat != r.linear.Weight.Dim(1) {
		return nil
	}
	return p
}

// buffer returns the index of a buffer of shape and layout b other than
// those in avoid, adding one if needed.
func (p *planarPlan) buffer(b planarBuf, avoid ...int) int {
	for i, t := range p.bufs {
		if t == b && !slices.Contains(avoid, i) {
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
	return planarConv{f: f, bias: bias, relu: l.relu, selection: l.selection}, true
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
	rows  [][2]int // per convolution, the output rows this set computes (planarPlan.rows)
}

// planarActs returns n sets of activations, made on first use.
func (s *scratch) planarActs(p *planarPlan, n int) []*planarActs {
	if len(s.planar) > 0 && s.planarOf != p {
		s.planar = nil // another plan used this scratch
	}
	s.planarOf = p
	for len(s.planar) < n {
		a := &planarActs{y: make([]float32, 2*p.maxOut)}
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
		p.images(s.planarActs(p, 1), x, pooled, logits, 0, n)
	case n < w && !p.whole:
		p.images(s.planarActs(p, w), x, pooled, logits, 0, n)
	default: // whole images per worker (one each when n < w)
		grain := (n + w - 1) / w
		acts := s.planarActs(p, parallel.Chunks(n, grain))
		parallel.For(n, grain, func(lo, hi int) { p.images(acts[lo/grain:lo/grain+1], x, pooled, logits, lo, hi) })
	}
	return logits
}

// images computes the logits of the images [lo, hi) of x, each image's
// layers in len(acts) bands of rows, band k on acts[k] (on the worker
// pool when there are several).
func (p *planarPlan) images(acts []*planarActs, x, pooled, logits []float32, lo, hi int) {
	classes, feat := p.classifier.Weight.Dim(0), p.features()
	parts := len(acts)
	for k, a := range acts {
		p.rows(k, parts, a)
	}
	last := p.blocks[len(p.blocks)-1].conv2
	for i := lo; i < hi; i++ {
		img := x[i*InputSize : (i+1)*InputSize]
		if parts == 1 {
			for ph := range p.phases {
				p.phase(acts, img, ph, 0)
			}
		} else {
			parallel.Phases(parts, len(p.phases), func(ph, k int) { p.phase(acts, img, ph, k) })
		}
		out := acts[0].bufs[last.out]
		for k := 1; k < parts && !p.shared(&last); k++ {
			r0, r1 := p.band(&last, k, parts)
			out.CopyRows(acts[k].bufs[last.out], r0, r1)
		}
		p.head(out, pooled[i*feat:(i+1)*feat])
		p.linear(pooled[i*feat:(i+1)*feat], logits[i*classes:(i+1)*classes])
	}
}

// phase runs band k of phase ph of image img on acts[k].
func (p *planarPlan) phase(acts []*planarActs, img []float32, ph, k int) {
	if ph == 0 {
		a, size := acts[k], inputShape.h*inputShape.w
		for c := range inputShape.c {
			a.image.SetImage(c, img[c*size:(c+1)*size])
		}
	}
	for i := range p.phases[ph] {
		p.phases[ph][i].run(p, acts, k)
	}
}

// rows sets a.rows, the output rows [r0, r1) that band k of parts
// computes of every convolution: its band, and the rows around it that
// the later convolutions of band k read (as input or residual) up to
// the next exchange, which band k computes again rather than take from
// the other bands' buffers. Between two exchanges the bands meet at the
// barriers alone: taking each layer's rows next to a band from another
// worker's cache costs more than computing them (docs/benchmarks.md).
func (p *planarPlan) rows(k, parts int, a *planarActs) {
	if len(a.rows) != p.convs {
		a.rows = make([][2]int, p.convs)
	}
	r := a.rows
	grow := func(c *planarConv, lo, hi int) {
		if lo >= hi {
			return
		}
		if q := &r[c.id]; q[0] >= q[1] {
			*q = [2]int{lo, hi}
		} else {
			q[0], q[1] = min(q[0], lo), max(q[1], hi)
		}
	}
	for _, ph := range p.phases {
		for _, t := range ph {
			r[t.conv.id][0], r[t.conv.id][1] = p.band(t.conv, k, parts)
		}
	}
	for ph := len(p.phases) - 1; ph >= 0; ph-- {
		for i := len(p.phases[ph]) - 1; i >= 0; i-- {
			t := &p.phases[ph][i]
			q := r[t.conv.id]
			if q[0] >= q[1] {
				continue
			}
			if t.resConv != nil {
				grow(t.resConv, q[0], q[1])
			}
			if t.producer != nil && !t.exchange {
				n0, n1 := t.conv.inRows(q[0], q[1])
				grow(t.producer, n0, n1)
			}
		}
	}
	for _, ph := range p.phases {
		for _, t := range ph {
			if q := &r[t.conv.id]; q[0] < q[1] && p.bufs[t.conv.out].l == nchwc.Split {
				q[0] &^= 1 // StoreRows' rule for a Split output
			}
		}
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

// run computes the rows of s's convolution that band k of len(acts)
// computes (planarPlan.rows) on acts[k], first, at an exchange, copying
// the rows of its input that those read and band k did not compute from
// the buffers of the bands that did.
func (s *planarStep) run(p *planarPlan, acts []*planarActs, k int) {
	c, a, parts := s.conv, acts[k], len(acts)
	r0, r1 := a.rows[c.id][0], a.rows[c.id][1]
	lo, hi := p.chans(c, k, parts)
	if r0 >= r1 || lo >= hi {
		return
	}
	// The buffers of a convolution split by channels are acts[0]'s.
	set := func(c *planarConv) *planarActs {
		if p.shared(c) {
			return acts[0]
		}
		return a
	}
	in := a.image
	if s.in >= 0 {
		in = set(s.producer).bufs[s.in]
	}
	if s.exchange && !s.copied && !p.shared(s.producer) {
		n0, n1 := c.inRows(r0, r1)
		own := a.rows[s.producer.id]
		for j := range parts {
			if j == k {
				continue
			}
			q0, q1 := p.band(s.producer, j, parts)
			// The rows of band j's that band k reads and did not compute
			// (outside own, which is one run with the band inside).
			for _, g := range [2][2]int{{max(q0, n0), min(q1, n1, own[0])}, {max(q0, n0, own[1]), min(q1, n1)}} {
				if g[0] < g[1] {
					in.CopyRows(acts[j].bufs[s.in], g[0], g[1])
				}
			}
		}
	}
	var res *nchwc.Planar
	if s.res >= 0 {
		res = set(s.resConv).bufs[s.res]
	}
	y := a.y[s.yOff : s.yOff+c.f.Cout*c.f.OutSize()]
	c.f.BlockStore(in, c.bias, y, set(c).bufs[c.out], res, c.relu, lo, hi, r0, r1)
}

// inRows returns the input rows [n0, n1) that c's output rows [r0, r1)
// read (the image's rows; padding rows left out).
func (c *planarConv) inRows(r0, r1 int) (n0, n1 int) {
	pad := (c.f.K - 1) / 2
	return max(r0*c.f.S-pad, 0), min((r1-1)*c.f.S-pad+c.f.K, c.f.H)
}

// band returns band k of parts of c's output rows, [r0, r1): bands of
// about equal rows (a row costs the same in every row), each starting at
// an even row; a single convolution's rows all in band 0, a shared one's
// in every band (chans splits it).
func (p *planarPlan) band(c *planarConv, k, parts int) (r0, r1 int) {
	ho := c.f.Ho
	if p.shared(c) {
		return 0, ho
	}
	if c.single() {
		if k == 0 {
			return 0, ho
		}
		return ho, ho
	}
	at := func(k int) int {
		if k >= parts {
			return ho
		}
		return (k*ho + parts/2) / parts &^ 1
	}
	return at(k), at(k + 1)
}

// single reports whether c's output is not split in bands of rows: its
// output image is less than minBandImage pixels. It is split by output
// channels (shared) or runs on band 0 alone.
func (c *planarConv) single() bool { return c.f.OutSize() < minBandImage }

// shared reports whether c is split by output channels among the bands
// (chans), each band computing its channels of every row into the
// buffers of band 0 (planarActs), which every band then reads: a single
// convolution, unless p.bandOnly (nil: the input image, not shared).
func (p *planarPlan) shared(c *planarConv) bool { return c != nil && !p.bandOnly && c.single() }

// chans returns the output channels [lo, hi) that band k of parts
// computes of c: a run of about Cout/parts of a shared convolution, all
// of them otherwise.
func (p *planarPlan) chans(c *planarConv, k, parts int) (lo, hi int) {
	if !p.shared(c) || parts <= 1 {
		return 0, c.f.Cout
	}
	return k * c.f.Cout / parts, (k + 1) * c.f.Cout / parts
}

// minBandImage is the least output image, in pixels, that runs in bands
// of rows (smaller ones are split by channels, shared): measured on the
// shipped sparse file (AMD EPYC Zen 4, 2 workers), its
// 8×8 layers ran 2–3× slower in two bands of 4 rows than on one worker
// (a band's halo row is a quarter of its rows, and kernels.SparseRows'
// register tile of 64 pixels holds half a band), its 32×32 ones about
// 0.6× (docs/benchmarks.md).
const minBandImage = 256

// planarOptions are two choices of newPlanarPlan's buffers and exchanges,
// settled by measurement (planarDefaults); BenchmarkPlanarSplit compiles
// plans with the others.
type planarOptions struct {
	// pingPong gives each block's input a buffer other than the previous
	// block's input, so that an identity block writes its output next to
	// its input instead of over it: a split image ran 3.5 % faster
	// (167–168 against 173–174 µs an image on the shared Zen 4, the same
	// run), an image on one worker 0.5 % slower (docs/benchmarks.md).
	pingPong bool
	// exchangeEvery is the most blocks between two exchanges
	// (planarStep): every block's input, against every 2, 3 or only at
	// the strided blocks, was 1–4 % faster on the shipped sparse file
	// (docs/benchmarks.md).
	exchangeEvery int
}

// planarDefaults are the planarOptions that the product uses.
func planarDefaults() planarOptions { return planarOptions{pingPong: true, exchangeEvery: 1} }

// head is the average pooling with window and stride p.pool of out's
// image (avgPool).
func (p *planarPlan) head(out *nchwc.Planar, dst []float32) {
	ho, wo := (out.H-p.pool)/p.pool+1, (out.W-p.pool)/p.pool+1
	for c := range out.C {
		avgPool(out.Image(c), out.H, out.W, p.pool, dst[c*ho*wo:(c+1)*ho*wo])
	}
}
