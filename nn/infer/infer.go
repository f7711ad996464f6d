// Package infer classifies images with a trained CIFAR model: it loads a
// model file, prepares images exactly as training did and predicts class
// probabilities, safely from many goroutines at once.
//
// A Go service needs a few lines:
//
//	m, err := infer.Load("run/model.safetensors", models.Spec{})
//	...
//	img, _, err := image.Decode(r) // PNG or JPEG of any size
//	...
//	top := m.Predict([]image.Image{img}, 3)[0]
//	fmt.Println(top[0].Name, top[0].Prob) // "cat" 0.83
//
// # Model files
//
// Load reads a safetensors model file: the state dict of the network
// (checkpoint.SaveModel), a training-state file of cmd/cifar (its "model/"
// tensors) or a state dict saved from torch.nn.DataParallel ("module."
// prefix). Files written by cmd/cifar record the network and its input
// normalisation in their metadata (see Spec and the Key constants), so
// models.Spec{} is enough; for files written by PyTorch, Spec names the
// architecture, for example Spec{Model: "resnet20"}.
//
// # Preprocessing
//
// Images of any size are converted to 8-bit RGB, resized so that their
// shorter side is 32 pixels with PIL's bilinear filter, centre-cropped to
// 32×32 (RawImage says exactly how; the result is bit-identical to
// torchvision's Resize(32) and CenterCrop(32) on a PIL image) and
// normalised per channel with the mean and standard deviation of training
// (cifarinfo.Normalizer, the normalisation of the training loader). Raw
// CIFAR-10 images (3072 bytes, the layout of a record without its label
// byte) skip the resizing.
//
// # Preparation
//
// This package is the one owner of inference preparation: New reads the
// network's layer graph (models.NewGraph) and compiles it once, folding
// every batch normalisation into its convolution, packing the filters and
// choosing each convolution's algorithm (the channel-blocked direct
// convolution of autograd/nchwc, or a conv.Plan of autograd/conv: gather, Winograd,
// im2col, or sparse for layers whose weights are mostly exact zeros). The
// prepared weights belong to the Model; the layers of package nn hold no
// inference state. Prepare gives a network that runs through its Forward
// (cmd/cifar's -eval-only) the same sparse layers.
//
// # Concurrency and memory
//
// A Model is immutable after Load and safe for concurrent use: the network
// runs in evaluation mode (batch normalisation with its running
// statistics) in an autograd.Context that records no graph, and every call
// takes its working buffers and the arena of its op results from a pool
// owned by the Model, so steady-state calls allocate little and no state
// is shared between models or with training code.
package infer

import (
	"fmt"
	"image"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

// InputSize is the number of float32 values of one preprocessed image:
// 3 channels of 32×32 pixels.
const InputSize = cifarinfo.ImageSize

// Model is a network ready for inference.
type Model struct {
	net    nn.Module
	spec   models.Spec
	norm   *cifarinfo.Normalizer
	sparse Report // which layers run sparse
	plan   plan   // the compiled network, nil: net runs it
	// scratch holds *scratch values: per-call buffers, reused.
	scratch sync.Pool
}

// scratch is the working memory of one call.
type scratch struct {
	x     []float32 // preprocessed input batch
	raw   []uint8   // one raw 32×32 image
	probs []float32 // output probabilities
	// ctx runs the network: no graph, op results from its own arena,
	// which the next call on this scratch reuses.
	ctx autograd.Context
	// act holds the activations of the plan, grown to the largest batch
	// seen; pooled and logits the results of its head.
	act            [4][]float32
	pooled, logits []float32
	// direct holds the activations of a directPlan, one set per image.
	direct []directActs
	// planar holds the activations of planarOf, one set per worker.
	planar   []*planarActs
	planarOf *planarPlan
}

// head returns buffers of the given lengths for the pooled activations and
// the logits of a plan's head, grown as needed.
func (s *scratch) head(pooled, logits int) ([]float32, []float32) {
	if cap(s.pooled) < pooled {
		s.pooled = make([]float32, pooled)
	}
	if cap(s.logits) < logits {
		s.logits = make([]float32, logits)
	}
	return s.pooled[:pooled], s.logits[:logits]
}

// buffers returns the activation buffers for n images of at most size
// values each.
func (s *scratch) buffers(n, size int) *[4][]float32 {
	for i := range s.act {
		if len(s.act[i]) < n*size {
			s.act[i] = make([]float32, n*size)
		}
	}
	return &s.act
}

// Option changes how Load, FromFile and New prepare a model.
type Option func(*options)

// options are the settings Options change.
type options struct {
	prep prepOptions
}

// prepOptions say which layers run sparse.
type prepOptions struct {
	// MinZeros is the fraction of exact zeros a weight needs for its
	// layer to run sparse.
	MinZeros float64
	// Dense keeps every layer dense.
	Dense bool
}

// Dense keeps every layer on the dense path: without it (and without
// MinZeros), New runs sparse the layers with many exact zeros where that
// is measured to be faster (see New), Prepare those with EagerMinZeros.
func Dense() Option { return func(o *options) { o.prep.Dense = true } }

// MinZeros sets the fraction of exact zeros from which a convolution or
// linear layer runs sparse, instead of New's measured choice (or
// Prepare's EagerMinZeros), which 0 keeps; a value above 1 keeps every
// layer dense.
func MinZeros(f float64) Option {
	return func(o *options) {
		if f != 0 {
			o.prep.MinZeros = f
		}
	}
}

// Load reads the model file at path and returns the model. The network is
// spec merged with the file's metadata (fields of spec win; see Spec for
// the defaults). Tensors must match the network exactly (names and
// shapes); the error says which do not. Layers whose weights are mostly
// exact zeros run sparse unless an option says otherwise (see New).
func Load(path string, spec models.Spec, opts ...Option) (*Model, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("infer: %w", err)
	}
	m, err := FromFile(f, spec, opts...)
	if err != nil {
		return nil, fmt.Errorf("infer: %s: %w", path, err)
	}
	return m, nil
}

// FromFile is Load for a safetensors file already read.
func FromFile(f *safetensors.File, spec models.Spec, opts ...Option) (*Model, error) {
	net, spec, err := Network(f, spec)
	if err != nil {
		return nil, err
	}
	return New(net, spec, opts...)
}

// Network returns the network of the model file f with its weights, and
// its description: spec merged with the file's metadata, the defaults
// filled in (see Spec). Load runs it; exporters (nn/onnx) and tools that
// need the network itself call it directly.
func Network(f *safetensors.File, spec models.Spec) (nn.Module, models.Spec, error) {
	meta, err := models.SpecFromMetadata(f.Metadata)
	if err != nil {
		return nil, models.Spec{}, err
	}
	spec, err = spec.Merge(meta).Complete()
	if err != nil {
		return nil, models.Spec{}, err
	}
	if err := spec.Validate(f); err != nil {
		return nil, models.Spec{}, err
	}
	net, err := spec.Build()
	if err != nil {
		return nil, models.Spec{}, err
	}
	if err := checkpoint.LoadWeights(f, net); err != nil {
		return nil, models.Spec{}, err
	}
	return net, spec, nil
}

// New returns a model that runs net, whose weights are final, with the
// preprocessing of spec (spec.Model, Width and Shortcut are only recorded).
// New takes net over: it switches it to evaluation mode and compiles it
// once (batch normalisation folded, filters packed, every layer's
// algorithm chosen) from its layer graph (models.NewGraph). Which
// convolution and linear layers run sparse it chooses by measured cost
// (choose): where some layers have at least half their weights exact
// zeros, it times the network with the layers above each of a few zero
// fractions sparse and all dense, at batch 1 and 16, and keeps the
// fastest for each (Sparsity reports the batch-1 choice, Algorithms the
// choice per batch size); the options Dense and MinZeros replace the
// measurement by a fixed rule. A network that does not compile runs node
// by node as Prepare's result does (EagerMinZeros unless an option says
// otherwise). The prepared weights belong to the Model; net's layers hold
// no inference state, but net must not be changed or trained afterwards
// (train a copy instead).
func New(net nn.Module, spec models.Spec, opts ...Option) (*Model, error) {
	if spec.Model == "" {
		spec.Model = fmt.Sprintf("%T", net)
	}
	spec, err := spec.Complete()
	if err != nil {
		return nil, err
	}
	norm, err := cifarinfo.NewNormalizer(spec.Mean, spec.Std)
	if err != nil {
		return nil, err
	}
	var o options // MinZeros 0: measured (choose)
	for _, opt := range opts {
		opt(&o)
	}
	net.SetTraining(false)
	m := &Model{net: net, spec: spec, norm: norm}
	if o.prep.MinZeros == 0 && !o.prep.Dense {
		m.plan, m.sparse = choose(net, m)
	} else {
		rep := report(net, o.prep, true)
		c := choice{rep: rep, plan: newPlan(net, rep)}
		m.plan, m.sparse = fastest(net, m, append([]choice{c}, splits(c)...))
	}
	if m.plan == nil {
		if o.prep.MinZeros == 0 {
			o.prep.MinZeros = EagerMinZeros
		}
		m.net, m.sparse = prepare(net, o.prep)
	}
	return m, nil
}

// Algorithms names the algorithm of every convolution, in the order of
// the network (a ResNet block's conv1, conv2, then its shortcut, option A's
// selection included), for a batch of the given size: "gather",
// "winograd", "im2col" or "sparse" (see conv.Plan), or "direct"
// for a dense ResNet run in autograd/nchwc's channel-blocked layout
// ("direct-skip" for its convolutions with all-zero filter vectors, which
// the kernels skip: SIMD-block sparsity; "winograd" for its 3×3
// stride-1 convolutions that run nchwc.Winograd in the same layout); a
// ResNet with every convolution sparse runs them all on planar
// activations (nchwc.SparseFilter), "sparse", option A's selections
// "select". It is
// nil for a network that New does not compile (its graph has neither the
// ResNet nor the VGG shape), which runs node by node as Prepare's result
// does.
func (m *Model) Algorithms(batch int) []string {
	if m.plan == nil {
		return nil
	}
	return m.plan.algorithms(batch)
}

// Sparsity reports, for every convolution and linear layer, its fraction
// of exact zeros and whether it runs sparse.
func (m *Model) Sparsity() Report {
	r := m.sparse
	r.Layers = slices.Clone(r.Layers)
	return r
}

// Spec returns the network's description with its defaults filled in.
func (m *Model) Spec() models.Spec {
	s := m.spec
	s.Mean, s.Std, s.Classes = slices.Clone(s.Mean), slices.Clone(s.Std), slices.Clone(s.Classes)
	return s
}

// NumClasses returns the number of classes the model predicts.
func (m *Model) NumClasses() int { return m.spec.NumClasses }

// ClassName returns the name of class i.
func (m *Model) ClassName(i int) string { return m.spec.Classes[i] }

// Preprocess writes the network input for img (InputSize values) into dst:
// RawImage, then the normalisation of training. It panics if dst does not
// have InputSize values.
func (m *Model) Preprocess(dst []float32, img image.Image) {
	s := m.getScratch()
	RawImage(s.raw, img)
	m.norm.Normalize(dst, s.raw)
	m.scratch.Put(s)
}

// PreprocessRaw writes the network input for a raw CIFAR-10 image into
// dst (InputSize values): rec is either a record of the binary release
// (cifarinfo.RecordSize = 3073 bytes, the label byte first, which is
// ignored) or the image alone (cifarinfo.ImageSize = 3072 bytes: the R, G
// and B planes of 32×32 pixels, rows top to bottom). Other lengths are an
// error.
func (m *Model) PreprocessRaw(dst []float32, rec []byte) error {
	switch len(rec) {
	case cifarinfo.RecordSize:
		rec = rec[1:]
	case cifarinfo.ImageSize:
	default:
		return fmt.Errorf("infer: a raw CIFAR-10 image has %d bytes (or %d with its label byte), got %d",
			cifarinfo.ImageSize, cifarinfo.RecordSize, len(rec))
	}
	m.norm.Normalize(dst, rec)
	return nil
}

// Probabilities runs the network on the n = len(x)/InputSize preprocessed
// images in x and returns their class probabilities (softmax of the
// logits) as n rows of NumClasses values, in dst when it has room. The
// result for an image does not depend on the other images of the batch.
// It panics if len(x) is not a positive multiple of InputSize.
func (m *Model) Probabilities(dst, x []float32) []float32 {
	m.checkInput("Probabilities", x)
	s := m.getScratch()
	defer m.scratch.Put(s)
	return m.probabilities(s, dst, x)
}

// Logits is Probabilities without the softmax: the network's outputs.
func (m *Model) Logits(dst, x []float32) []float32 {
	m.checkInput("Logits", x)
	s := m.getScratch()
	defer m.scratch.Put(s)
	logits := m.logits(s, "Logits", x)
	return append(dst[:0], logits...)
}

// checkInput panics unless x holds a positive number of images.
func (m *Model) checkInput(op string, x []float32) {
	if len(x) == 0 || len(x)%InputSize != 0 {
		panic(fmt.Sprintf("infer.Model.%s: %d input values, want a positive multiple of %d", op, len(x), InputSize))
	}
}

// logits runs the network on x with the working memory s and checks the
// size of its result (valid until s is used again).
func (m *Model) logits(s *scratch, op string, x []float32) []float32 {
	n, k := len(x)/InputSize, m.spec.NumClasses
	logits := m.forward(s, x, n)
	if len(logits) != n*k {
		panic(fmt.Sprintf("infer.Model.%s: the network returned %d values for %d images of %d classes", op, len(logits), n, k))
	}
	return logits
}

// probabilities is Probabilities with the working memory s.
func (m *Model) probabilities(s *scratch, dst, x []float32) []float32 {
	n, k := len(x)/InputSize, m.spec.NumClasses
	logits := m.logits(s, "Probabilities", x)
	dst = slices.Grow(dst[:0], n*k)[:n*k]
	for i := range n {
		softmax(dst[i*k:(i+1)*k], logits[i*k:(i+1)*k])
	}
	return dst
}

// forward returns the logits of the n images in x. It is the one place
// that runs the network: the compiled plan, or else the network in
// evaluation mode, in a context that records no graph and takes every op
// result from the arena of s (valid until s is used again).
func (m *Model) forward(s *scratch, x []float32, n int) []float32 {
	s.ctx.Arena.Reset()
	if m.plan != nil {
		return m.plan.forward(s, x, n)
	}
	return m.net.Forward(autograd.FromSlice(x, n, cifarinfo.Channels, Side, Side).In(&s.ctx)).Data
}

// softmax writes the softmax of logits into dst, accumulating in float64.
func softmax(dst, logits []float32) {
	hi := float32(math.Inf(-1))
	for _, v := range logits {
		hi = max(hi, v)
	}
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v - hi))
	}
	for i, v := range logits {
		dst[i] = float32(math.Exp(float64(v-hi)) / sum)
	}
}

// Class is one predicted class.
type Class struct {
	// Index is the class number, the output index of the network.
	Index int `json:"class"`
	// Name is the class name (Spec.Classes).
	Name string `json:"label"`
	// Prob is the predicted probability.
	Prob float32 `json:"prob"`
}

// TopK returns the k most probable classes of one row of probabilities,
// most probable first (ties: lower index first), named by names. k is
// clamped to 1..len(probs).
func TopK(probs []float32, k int, names []string) []Class {
	k = min(max(k, 1), len(probs))
	out := make([]Class, 0, k)
	for i, p := range probs {
		// Insertion into the sorted top k: k is small.
		if len(out) == k && !(p > out[k-1].Prob) {
			continue
		}
		if len(out) < k {
			out = append(out, Class{})
		}
		j := len(out) - 1
		for j > 0 && p > out[j-1].Prob {
			out[j] = out[j-1]
			j--
		}
		out[j] = Class{Index: i, Name: names[i], Prob: p}
	}
	return out
}

// TopK returns the k most probable classes of every row of probs, as
// returned by Probabilities.
func (m *Model) TopK(probs []float32, k int) [][]Class {
	c := m.spec.NumClasses
	out := make([][]Class, len(probs)/c)
	for i := range out {
		out[i] = TopK(probs[i*c:(i+1)*c], k, m.spec.Classes)
	}
	return out
}

// Predict classifies a batch of images (any size, see RawImage) and
// returns the k most probable classes of each.
func (m *Model) Predict(images []image.Image, k int) [][]Class {
	if len(images) == 0 {
		return nil
	}
	s := m.getScratch()
	defer m.scratch.Put(s)
	s.x = slices.Grow(s.x[:0], len(images)*InputSize)[:len(images)*InputSize]
	for i, img := range images {
		RawImage(s.raw, img)
		m.norm.Normalize(s.x[i*InputSize:(i+1)*InputSize], s.raw)
	}
	s.probs = m.probabilities(s, s.probs, s.x)
	return m.TopK(s.probs, k)
}

func (m *Model) getScratch() *scratch {
	if s, ok := m.scratch.Get().(*scratch); ok {
		return s
	}
	return &scratch{raw: make([]uint8, cifarinfo.ImageSize), ctx: autograd.Context{NoGrad: true, Arena: autograd.NewArena()}}
}

// String describes the model, for logs and model cards: its network, how
// many of its layers run sparse (Sparsity says which) and how many of its
// convolutions run on each algorithm at batch 1 and 64 (Algorithms says
// which; the algorithms depend on the CPU's kernels), and for the planar
// sparse plan whether a call of fewer images than workers splits each
// image over the workers (measured at load, as the algorithms).
func (m *Model) String() string {
	s := m.spec
	var b strings.Builder
	fmt.Fprintf(&b, "%s width %g", s.Model, s.Width)
	if strings.HasPrefix(s.Model, "resnet") {
		fmt.Fprintf(&b, " shortcut %s", s.Shortcut)
	}
	fmt.Fprintf(&b, ", %d classes", s.NumClasses)
	fmt.Fprintf(&b, ", %d of %d layers sparse", len(m.sparse.SparseLayers()), len(m.sparse.Layers))
	if m.plan == nil {
		b.WriteString("; run node by node")
		return b.String()
	}
	one, many := algorithmMix(m.Algorithms(1)), algorithmMix(m.Algorithms(64))
	if one == many {
		fmt.Fprintf(&b, "; convolutions: %s", one)
	} else {
		fmt.Fprintf(&b, "; convolutions at batch 1: %s, at batch 64: %s", one, many)
	}
	if s := singleImage(m.plan); s != "" {
		b.WriteString("; " + s)
	}
	return b.String()
}

// singleImage says, for Model.String, how pl runs a call of fewer images
// than workers (choose's choice between splitting each image and keeping
// it on one worker), else "" (also with one worker).
func singleImage(pl plan) string {
	if b, ok := pl.(*byBatch); ok {
		pl = b.small
	}
	w := parallel.Workers()
	if w <= 1 {
		return ""
	}
	const one = "fewer images than workers: each on one worker"
	switch p := pl.(type) {
	case *planarPlan:
		switch {
		case p.whole:
			return one
		case p.bandOnly:
			return "fewer images than workers: each split over the workers in bands of rows, its smallest layers on one worker"
		}
		return "fewer images than workers: each split over the workers in bands of rows, its smallest layers by output channels"
	case *directPlan:
		switch {
		case p.split == 1:
			return one
		case p.split > 1 && p.split < w:
			return fmt.Sprintf("fewer images than workers: each split over %d workers in bands of rows", p.split)
		}
	default:
		return ""
	}
	return "fewer images than workers: each split over the workers in bands of rows"
}

// algorithmMix counts the convolutions of each algorithm in algs, in the
// order the algorithms first appear: "19 direct, 2 sparse".
func algorithmMix(algs []string) string {
	var names []string
	count := map[string]int{}
	for _, a := range algs {
		if count[a] == 0 {
			names = append(names, a)
		}
		count[a]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d %s", count[n], n)
	}
	return strings.Join(parts, ", ")
}
