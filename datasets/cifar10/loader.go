package cifar10

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/proxgen/proxgen/internal/cifarinfo"
)

// DefaultMean returns a new slice of the per-channel (R, G, B) means of the
// reference training code's normalisation (0.4914, 0.4822, 0.4465), which
// the loader uses unless told otherwise.
func DefaultMean() []float32 { return cifarinfo.Mean() }

// DefaultStd returns a new slice of the per-channel (R, G, B) standard
// deviations of the reference training code's normalisation (0.2023,
// 0.1994, 0.2010; the exact per-channel standard deviation of the CIFAR-10
// training set is about 0.2470, 0.2435, 0.2616), which the loader uses
// unless told otherwise.
func DefaultStd() []float32 { return cifarinfo.Std() }

// DefaultPad is the zero padding of the random crop used by the reference
// code (RandomCrop(32, padding=4)).
const DefaultPad = 4

// DefaultPrefetch is the number of batches prepared ahead when
// LoaderConfig.Prefetch is zero.
const DefaultPrefetch = 2

// LoaderConfig says how a Loader walks a split for one epoch.
type LoaderConfig struct {
	// BatchSize is the number of images per batch; it must be positive.
	BatchSize int
	// Shuffle visits the images in a random order that depends only on
	// Seed and Epoch; without it the order is 0, 1, 2, ….
	Shuffle bool
	// Augment applies the reference training augmentation to every image:
	// zero-pad by Pad pixels, crop a random 32×32 window, then flip
	// horizontally with probability 1/2 (torchvision's RandomCrop(32,
	// padding=4) followed by RandomHorizontalFlip()). The random choices
	// for an image depend only on Seed, Epoch and the image's index in the
	// split, never on the batch size, the order or the number of workers.
	Augment bool
	// Pad is the crop padding in pixels when Augment is set; zero means
	// DefaultPad.
	Pad int
	// Mean and Std are the per-channel normalisation constants: every
	// value is (pixel/255 - Mean[c]) / Std[c]. Nil means DefaultMean or
	// DefaultStd; otherwise each must have 3 elements, and Std must be
	// positive. Padding is applied to the raw image, as torchvision does,
	// so padded pixels become -Mean[c]/Std[c].
	Mean, Std []float32
	// Seed selects the shuffling and augmentation streams.
	Seed uint64
	// Epoch selects this epoch's permutation and augmentation; a run
	// resumed at epoch e with the same Seed sees exactly the same batches.
	Epoch int
	// DropLast drops the last batch when it is smaller than BatchSize
	// (typical for training); otherwise it is delivered (typical for
	// evaluation).
	DropLast bool
	// StartBatch skips the first StartBatch batches of the epoch, for
	// resuming in the middle of an epoch; the remaining batches are
	// identical to those of an uninterrupted run.
	StartBatch int
	// Prefetch is how many finished batches may wait in the channel ahead
	// of the consumer; zero means DefaultPrefetch.
	Prefetch int
	// Workers is how many goroutines prepare the images of one batch;
	// zero means runtime.GOMAXPROCS(0). Results do not depend on it.
	Workers int
}

// Batch is one mini-batch.
type Batch struct {
	// X holds N normalised images in NCHW order: N×3×32×32 float32 values.
	X []float32
	// Y holds the N labels.
	Y []int
	// N is the number of images in the batch.
	N int
	// Indices holds the position of each image in the split.
	Indices []int
}

// Loader delivers the batches of one epoch, prepared by a background
// goroutine. Call Close when done (also when stopping early) to release it.
type Loader struct {
	split   *Split
	cfg     LoaderConfig
	order   []int
	tf      *transform
	batches int
	out     chan Batch
	free    chan Batch // batches handed back by Recycle
	done    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

// NumBatches returns how many batches an epoch over n images has.
func NumBatches(n, batchSize int, dropLast bool) int {
	if batchSize <= 0 {
		panic(fmt.Sprintf("cifar10.NumBatches: batch size %d, want > 0", batchSize))
	}
	if dropLast {
		return n / batchSize
	}
	return (n + batchSize - 1) / batchSize
}

// NewLoader starts a loader for one epoch over split and returns it. It
// panics if cfg is invalid (a programming error): non-positive BatchSize,
// negative Pad, Prefetch, Workers or StartBatch, or bad Mean/Std.
func NewLoader(split *Split, cfg LoaderConfig) *Loader {
	if cfg.BatchSize <= 0 {
		panic(fmt.Sprintf("cifar10.NewLoader: BatchSize %d, want > 0", cfg.BatchSize))
	}
	if cfg.Pad < 0 || cfg.Prefetch < 0 || cfg.Workers < 0 || cfg.StartBatch < 0 {
		panic(fmt.Sprintf("cifar10.NewLoader: negative Pad %d, Prefetch %d, Workers %d or StartBatch %d",
			cfg.Pad, cfg.Prefetch, cfg.Workers, cfg.StartBatch))
	}
	if len(split.Images) != split.Len()*ImageSize {
		panic(fmt.Sprintf("cifar10.NewLoader: split has %d image bytes for %d labels",
			len(split.Images), split.Len()))
	}
	if cfg.Pad == 0 {
		cfg.Pad = DefaultPad
	}
	if !cfg.Augment {
		cfg.Pad = 0
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	mean, std := cfg.Mean, cfg.Std
	if mean == nil {
		mean = cifarinfo.Mean()
	}
	if std == nil {
		std = cifarinfo.Std()
	}
	n := split.Len()
	l := &Loader{
		split:   split,
		cfg:     cfg,
		tf:      newTransform(mean, std, cfg.Pad),
		batches: NumBatches(n, cfg.BatchSize, cfg.DropLast),
		out:     make(chan Batch, cfg.Prefetch),
		free:    make(chan Batch, cfg.Prefetch+2),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
	}
	if cfg.Shuffle {
		l.order = Permutation(n, cfg.Seed, cfg.Epoch)
	} else {
		l.order = make([]int, n)
		for i := range l.order {
			l.order[i] = i
		}
	}
	go l.run()
	return l
}

// NumBatches returns the number of batches in the epoch, including any
// skipped by StartBatch.
func (l *Loader) NumBatches() int { return l.batches }

// Next returns the next batch, or false when the epoch is over or the
// loader was closed.
func (l *Loader) Next() (Batch, bool) {
	select {
	case <-l.done:
		return Batch{}, false
	default:
	}
	b, ok := <-l.out
	return b, ok
}

// Recycle hands a batch returned by Next back to the loader, which then
// prepares a later batch in its buffers instead of allocating new ones. The
// caller must not use b (its X, Y or Indices) afterwards. Recycling is
// optional; batches that are not recycled are left to the garbage
// collector, and surplus ones are dropped.
func (l *Loader) Recycle(b Batch) {
	if b.X == nil {
		return
	}
	select {
	case l.free <- b:
	default:
	}
}

// Close stops the background goroutine and waits for it to exit. It is safe
// to call more than once and after the epoch is over.
func (l *Loader) Close() {
	l.once.Do(func() { close(l.done) })
	<-l.exited
}

// run prepares the batches in order and sends them to l.out.
func (l *Loader) run() {
	defer close(l.exited)
	defer close(l.out)
	for b := l.cfg.StartBatch; b < l.batches; b++ {
		select {
		case <-l.done:
			return
		default:
		}
		batch := l.makeBatch(b)
		select {
		case l.out <- batch:
		case <-l.done:
			return
		}
	}
}

// makeBatch builds batch number b of the epoch.
func (l *Loader) makeBatch(b int) Batch {
	lo := b * l.cfg.BatchSize
	hi := min(lo+l.cfg.BatchSize, len(l.order))
	n := hi - lo
	var batch Batch
	select {
	case batch = <-l.free:
	default:
	}
	batch.X = resize(batch.X, n*ImageSize)
	batch.Y = resize(batch.Y, n)
	batch.N = n
	batch.Indices = append(batch.Indices[:0], l.order[lo:hi]...)
	workers := min(l.cfg.Workers, n)
	if workers <= 1 {
		l.fill(&batch, 0, n)
		return batch
	}
	var wg sync.WaitGroup
	for w := range workers {
		wlo, whi := w*n/workers, (w+1)*n/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.fill(&batch, wlo, whi)
		}()
	}
	wg.Wait()
	return batch
}

// resize returns b with length n, reusing its storage when large enough.
func resize[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]T, n)
}

// fill prepares images lo..hi-1 of batch.
func (l *Loader) fill(batch *Batch, lo, hi int) {
	for j := lo; j < hi; j++ {
		idx := batch.Indices[j]
		batch.Y[j] = int(l.split.Labels[idx])
		dst := batch.X[j*ImageSize : (j+1)*ImageSize]
		img := l.split.Image(idx)
		if !l.cfg.Augment {
			l.tf.apply(dst, img, 0, 0, false)
			continue
		}
		top, left, flip := SampleAugment(l.cfg.Seed, l.cfg.Epoch, idx, l.cfg.Pad)
		l.tf.apply(dst, img, top, left, flip)
	}
}

// Permutation returns the order in which a shuffled epoch visits n images:
// a uniformly random permutation of 0..n-1 that depends only on n, seed and
// epoch (and not on the Go release: it uses PCG and its own Fisher–Yates).
func Permutation(n int, seed uint64, epoch int) []int {
	src := rand.NewPCG(mix(seed, 0x5eed5eed5eed5eed), mix(uint64(epoch), 0x9e3779b97f4a7c15))
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(boundedUint(src, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// SampleAugment returns the random crop offsets (top and left, each in
// 0..2*pad, in padded-image coordinates) and the flip decision for image
// index idx of a split in the given epoch. The choice depends only on its
// arguments, so augmentation is reproducible whatever the batch size,
// order or number of workers.
func SampleAugment(seed uint64, epoch, idx, pad int) (top, left int, flip bool) {
	src := rand.NewPCG(mix(seed, uint64(epoch)), mix(uint64(idx), 0xa0761d6478bd642f))
	span := uint64(2*pad + 1)
	top = int(boundedUint(src, span))
	left = int(boundedUint(src, span))
	flip = src.Uint64()>>63 == 1
	return top, left, flip
}

// mix hashes two words into one (splitmix64 finaliser applied twice).
func mix(a, b uint64) uint64 {
	return splitmix(splitmix(a) ^ b)
}

// splitmix is the splitmix64 output function.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// boundedUint returns a uniform value in [0, n) from src (n > 0), using
// rejection so that there is no modulo bias.
func boundedUint(src *rand.PCG, n uint64) uint64 {
	limit := -n % n // (2^64 - n) mod n: values below it are rejected
	for {
		v := src.Uint64()
		if v >= limit {
			return v % n
		}
	}
}

// transform turns a raw image into a normalised float32 image, optionally
// cropping from the zero-padded image and flipping.
type transform struct {
	pad                  int
	cifarinfo.Normalizer // the table inference uses too (nn/infer)
}

// newTransform precomputes the normalisation table; it panics on bad
// constants (a programming error of the loader's caller).
func newTransform(mean, std []float32, pad int) *transform {
	n, err := cifarinfo.NewNormalizer(mean, std)
	if err != nil {
		panic(err.Error())
	}
	return &transform{pad: pad, Normalizer: *n}
}

// apply writes the normalised image into dst: the 32×32 window at (top,
// left) of img zero-padded by t.pad on every side, mirrored left-right when
// flip is set. With top = left = t.pad and no flip it is plain
// normalisation.
func (t *transform) apply(dst []float32, img []uint8, top, left int, flip bool) {
	off := t.pad
	for c := range Channels {
		lut := t.Table(c)
		plane := img[c*planeSize : (c+1)*planeSize]
		out := dst[c*planeSize : (c+1)*planeSize]
		for y := range Height {
			row := out[y*Width : (y+1)*Width]
			sy := top + y - off
			if sy < 0 || sy >= Height {
				for x := range row {
					row[x] = lut[0]
				}
				continue
			}
			src := plane[sy*Width : (sy+1)*Width]
			for x := range row {
				sx := left + x - off
				if flip {
					sx = left + Width - 1 - x - off
				}
				if sx < 0 || sx >= Width {
					row[x] = lut[0]
				} else {
					row[x] = lut[src[sx]]
				}
			}
		}
	}
}
