package cifar10

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/proxgen/proxgen/internal/cifarinfo"
)

// randomSplit returns a split of n images with pseudo-random content.
func randomSplit(n int, seed uint64) *Split {
	s := &Split{Images: make([]uint8, n*ImageSize), Labels: make([]uint8, n)}
	x := seed
	for i := range s.Images {
		x = splitmix(x)
		s.Images[i] = uint8(x >> 56)
	}
	for i := range s.Labels {
		s.Labels[i] = uint8(i % NumClasses)
	}
	return s
}

// referenceAugment is a deliberately naive second implementation of the
// transform: build the zero-padded image, cut the window, mirror it, then
// normalise each value with float32 arithmetic.
func referenceAugment(img []uint8, top, left int, flip bool, pad int, mean, std []float32) []float32 {
	ph, pw := Height+2*pad, Width+2*pad
	padded := make([][][]uint8, Channels)
	for c := range padded {
		padded[c] = make([][]uint8, ph)
		for y := range padded[c] {
			padded[c][y] = make([]uint8, pw)
		}
		for y := range Height {
			for x := range Width {
				padded[c][y+pad][x+pad] = img[c*1024+y*32+x]
			}
		}
	}
	out := make([]float32, ImageSize)
	for c := range Channels {
		for y := range Height {
			row := slices.Clone(padded[c][top+y][left : left+Width])
			if flip {
				slices.Reverse(row)
			}
			for x, v := range row {
				f := float32(v) / 255
				f = float32(f - mean[c])
				out[c*1024+y*32+x] = f / std[c]
			}
		}
	}
	return out
}

func TestTransformKnownImage(t *testing.T) {
	img := make([]uint8, ImageSize)
	for c := range Channels {
		for y := range Height {
			for x := range Width {
				img[c*1024+y*32+x] = uint8(1 + c*80 + (y*32+x)%79) // never 0
			}
		}
	}
	mean := []float32{0.25, 0.5, 0.75}
	std := []float32{0.5, 0.25, 2}
	tf := newTransform(mean, std, 4)
	norm := func(c int, v uint8) float32 { return tf.Table(c)[v] }
	for c := range Channels {
		for _, v := range []int{0, 1, 128, 255} {
			want := (float64(v)/255 - float64(mean[c])) / float64(std[c])
			if got := float64(tf.Table(c)[v]); math.Abs(got-want) > 1e-6 {
				t.Fatalf("lut[%d][%d] = %v, want %v", c, v, got, want)
			}
		}
	}
	dst := make([]float32, ImageSize)
	at := func(c, y, x int) float32 { return dst[c*1024+y*32+x] }
	raw := func(c, y, x int) uint8 { return img[c*1024+y*32+x] }

	// Centre window, no flip: plain normalisation.
	tf.apply(dst, img, 4, 4, false)
	for c := range Channels {
		for i := range 1024 {
			if dst[c*1024+i] != norm(c, img[c*1024+i]) {
				t.Fatalf("centre crop differs at channel %d pixel %d", c, i)
			}
		}
	}
	// Normalizer.Normalize is the same plain normalisation.
	plain := make([]float32, ImageSize)
	tf.Normalize(plain, img)
	if !slices.Equal(plain, dst) {
		t.Fatal("Normalizer.Normalize differs from the centre crop of the transform")
	}
	// Top-left window: 4 rows and columns of padding, then the image
	// shifted by 4; padding is the normalised raw zero, -mean/std.
	tf.apply(dst, img, 0, 0, false)
	for c := range Channels {
		pad := norm(c, 0)
		if want := float32(-mean[c] / std[c]); math.Abs(float64(pad-want)) > 1e-6 {
			t.Fatalf("padding value %v, want -mean/std = %v", pad, want)
		}
		if at(c, 0, 0) != pad || at(c, 3, 31) != pad || at(c, 31, 3) != pad {
			t.Fatal("top-left crop: border is not padding")
		}
		if at(c, 4, 4) != norm(c, raw(c, 0, 0)) || at(c, 31, 31) != norm(c, raw(c, 27, 27)) {
			t.Fatal("top-left crop: image not shifted by 4")
		}
	}
	// Bottom-right window, flipped: row y holds source row y+4 read from
	// the right; the last 4 rows and the first 4 columns are padding.
	tf.apply(dst, img, 8, 8, true)
	for c := range Channels {
		pad := norm(c, 0)
		if at(c, 28, 10) != pad || at(c, 5, 0) != pad || at(c, 5, 3) != pad {
			t.Fatal("bottom-right flipped crop: padding misplaced")
		}
		if at(c, 0, 4) != norm(c, raw(c, 4, 31)) || at(c, 0, 31) != norm(c, raw(c, 4, 4)) ||
			at(c, 27, 10) != norm(c, raw(c, 31, 25)) {
			t.Fatal("bottom-right flipped crop: wrong source pixel")
		}
	}
	// Every window against the naive implementation.
	for top := range 9 {
		for left := range 9 {
			for _, flip := range []bool{false, true} {
				tf.apply(dst, img, top, left, flip)
				want := referenceAugment(img, top, left, flip, 4, mean, std)
				if !slices.Equal(dst, want) {
					t.Fatalf("crop (%d,%d) flip %v differs from the reference", top, left, flip)
				}
			}
		}
	}
}

// TestTransformMatchesTorch compares against values computed by PyTorch
// (testdata/gen_transform.py).
func TestTransformMatchesTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/transform_torch.bin")
	if err != nil {
		t.Fatal(err)
	}
	img, rest := b[:ImageSize], b[ImageSize:]
	tf := newTransform(DefaultMean(), DefaultStd(), 4)
	dst := make([]float32, ImageSize)
	cases := 0
	for len(rest) > 0 {
		if len(rest) < 12+4*ImageSize {
			t.Fatalf("fixture has %d trailing bytes", len(rest))
		}
		top := int(int32(binary.LittleEndian.Uint32(rest[0:])))
		left := int(int32(binary.LittleEndian.Uint32(rest[4:])))
		flip := binary.LittleEndian.Uint32(rest[8:]) != 0
		rest = rest[12:]
		tf.apply(dst, img, top, left, flip)
		for i := range ImageSize {
			want := math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:]))
			if dst[i] != want {
				t.Fatalf("case (%d,%d,%v) value %d: got %v, torch %v", top, left, flip, i, dst[i], want)
			}
		}
		rest = rest[4*ImageSize:]
		cases++
	}
	if cases != 6 {
		t.Fatalf("fixture has %d cases, want 6", cases)
	}
}

func TestPermutation(t *testing.T) {
	p := Permutation(1000, 7, 3)
	seen := make([]bool, 1000)
	for _, v := range p {
		if seen[v] {
			t.Fatalf("%d appears twice", v)
		}
		seen[v] = true
	}
	if !slices.Equal(p, Permutation(1000, 7, 3)) {
		t.Fatal("same seed and epoch gave different permutations")
	}
	if slices.Equal(p, Permutation(1000, 7, 4)) || slices.Equal(p, Permutation(1000, 8, 3)) {
		t.Fatal("another epoch or seed gave the same permutation")
	}
	fixed := 0
	for i, v := range p {
		if i == v {
			fixed++
		}
	}
	if fixed > 8 { // expected 1
		t.Fatalf("%d fixed points: not shuffled", fixed)
	}
	// Every position receives every value about equally often.
	const n, trials = 5, 20000
	var count [n][n]int
	for e := range trials {
		for i, v := range Permutation(n, 1, e) {
			count[i][v]++
		}
	}
	for i := range n {
		for v := range n {
			if c := count[i][v]; c < trials/n*9/10 || c > trials/n*11/10 {
				t.Fatalf("position %d got %d %d times out of %d", i, v, c, trials)
			}
		}
	}
}

func TestSampleAugmentDistribution(t *testing.T) {
	var tops, lefts [9]int
	flips := 0
	const n = 18000
	for i := range n {
		top, left, flip := SampleAugment(42, 5, i, 4)
		if top < 0 || top > 8 || left < 0 || left > 8 {
			t.Fatalf("offsets (%d,%d) out of range", top, left)
		}
		tops[top]++
		lefts[left]++
		if flip {
			flips++
		}
		if t2, l2, f2 := SampleAugment(42, 5, i, 4); t2 != top || l2 != left || f2 != flip {
			t.Fatal("SampleAugment is not deterministic")
		}
	}
	for k := range 9 {
		if tops[k] < n/9*85/100 || tops[k] > n/9*115/100 || lefts[k] < n/9*85/100 || lefts[k] > n/9*115/100 {
			t.Fatalf("offset %d drawn %d/%d times out of %d", k, tops[k], lefts[k], n)
		}
	}
	if flips < n*47/100 || flips > n*53/100 {
		t.Fatalf("%d flips out of %d", flips, n)
	}
	same := 0
	for i := range 1000 {
		a1, b1, c1 := SampleAugment(42, 5, i, 4)
		a2, b2, c2 := SampleAugment(42, 6, i, 4)
		if a1 == a2 && b1 == b2 && c1 == c2 {
			same++
		}
	}
	if same > 30 { // expected about 1000/162
		t.Fatalf("epochs 5 and 6 agree on %d of 1000 images", same)
	}
}

// collect reads every batch of a loader and closes it.
func collect(t *testing.T, s *Split, cfg LoaderConfig) []Batch {
	t.Helper()
	l := NewLoader(s, cfg)
	defer l.Close()
	var out []Batch
	for b, ok := l.Next(); ok; b, ok = l.Next() {
		if len(b.X) != b.N*ImageSize || len(b.Y) != b.N || len(b.Indices) != b.N {
			t.Fatalf("batch of %d with %d values, %d labels, %d indices", b.N, len(b.X), len(b.Y), len(b.Indices))
		}
		out = append(out, b)
	}
	if len(out) != l.NumBatches()-cfg.StartBatch {
		t.Fatalf("got %d batches, NumBatches %d, StartBatch %d", len(out), l.NumBatches(), cfg.StartBatch)
	}
	return out
}

func equalBatches(a, b []Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].N != b[i].N || !slices.Equal(a[i].X, b[i].X) || !slices.Equal(a[i].Y, b[i].Y) ||
			!slices.Equal(a[i].Indices, b[i].Indices) {
			return false
		}
	}
	return true
}

func TestLoaderEpochContents(t *testing.T) {
	s := randomSplit(23, 1)
	for _, drop := range []bool{false, true} {
		cfg := LoaderConfig{BatchSize: 5, Shuffle: true, Augment: true, Seed: 9, Epoch: 2, DropLast: drop}
		bs := collect(t, s, cfg)
		wantBatches, wantImages := 5, 23
		if drop {
			wantBatches, wantImages = 4, 20
		}
		if len(bs) != wantBatches {
			t.Fatalf("DropLast %v: %d batches, want %d", drop, len(bs), wantBatches)
		}
		perm := Permutation(23, 9, 2)
		var idx []int
		for _, b := range bs {
			idx = append(idx, b.Indices...)
			for j, i := range b.Indices {
				if b.Y[j] != int(s.Labels[i]) {
					t.Fatal("label does not match the image")
				}
				top, left, flip := SampleAugment(9, 2, i, 4)
				want := referenceAugment(s.Image(i), top, left, flip, 4, DefaultMean(), DefaultStd())
				if !slices.Equal(b.X[j*ImageSize:(j+1)*ImageSize], want) {
					t.Fatalf("image %d is not its augmented self", i)
				}
			}
		}
		if !slices.Equal(idx, perm[:wantImages]) {
			t.Fatalf("DropLast %v: order %v, want %v", drop, idx, perm[:wantImages])
		}
		if !drop && bs[4].N != 3 {
			t.Fatalf("last batch has %d images, want 3", bs[4].N)
		}
	}
	// Evaluation: fixed order, plain normalisation.
	bs := collect(t, s, LoaderConfig{BatchSize: 10})
	if len(bs) != 3 || bs[2].N != 3 || bs[1].Indices[0] != 10 {
		t.Fatalf("evaluation batches wrong: %d batches", len(bs))
	}
	tf := newTransform(DefaultMean(), DefaultStd(), 0)
	want := make([]float32, ImageSize)
	tf.apply(want, s.Image(12), 0, 0, false)
	if !slices.Equal(bs[1].X[2*ImageSize:3*ImageSize], want) {
		t.Fatal("evaluation image is not plainly normalised")
	}
}

func TestLoaderDeterminism(t *testing.T) {
	s := randomSplit(37, 2)
	base := LoaderConfig{BatchSize: 6, Shuffle: true, Augment: true, Seed: 11, Epoch: 1}
	ref := collect(t, s, base)
	for _, workers := range []int{1, 2, 3, 7} {
		for _, procs := range []int{1, 2, 4} {
			old := runtime.GOMAXPROCS(procs)
			cfg := base
			cfg.Workers = workers
			cfg.Prefetch = workers // vary prefetch too
			got := collect(t, s, cfg)
			runtime.GOMAXPROCS(old)
			if !equalBatches(ref, got) {
				t.Fatalf("Workers %d, GOMAXPROCS %d changed the batches", workers, procs)
			}
		}
	}
	// Another epoch differs; the same epoch again is identical.
	other := base
	other.Epoch = 2
	if equalBatches(ref, collect(t, s, other)) {
		t.Fatal("epoch 2 equals epoch 1")
	}
	if !equalBatches(ref, collect(t, s, base)) {
		t.Fatal("epoch 1 is not reproducible")
	}
	// Augmentation of an image does not depend on the batch size.
	cfg := base
	cfg.BatchSize = 4
	byIndex := map[int][]float32{}
	for _, b := range collect(t, s, cfg) {
		for j, i := range b.Indices {
			byIndex[i] = b.X[j*ImageSize : (j+1)*ImageSize]
		}
	}
	for _, b := range ref {
		for j, i := range b.Indices {
			if !slices.Equal(byIndex[i], b.X[j*ImageSize:(j+1)*ImageSize]) {
				t.Fatalf("image %d augmented differently with another batch size", i)
			}
		}
	}
	// Resuming in the middle of the epoch gives the remaining batches.
	cfg = base
	cfg.StartBatch = 4
	if !equalBatches(ref[4:], collect(t, s, cfg)) {
		t.Fatal("StartBatch 4 does not give the tail of the epoch")
	}
}

// TestLoaderRecycle checks that recycled batches give the same epoch
// (including a short last batch) and that their buffers are reused.
func TestLoaderRecycle(t *testing.T) {
	s := randomSplit(37, 3)
	cfg := LoaderConfig{BatchSize: 6, Shuffle: true, Augment: true, Seed: 5, Epoch: 2, Prefetch: 1}
	ref := collect(t, s, cfg)
	l := NewLoader(s, cfg)
	defer l.Close()
	var got []Batch
	seen := map[*float32]bool{}
	for b, ok := l.Next(); ok; b, ok = l.Next() {
		seen[&b.X[0]] = true
		got = append(got, Batch{X: slices.Clone(b.X), Y: slices.Clone(b.Y), N: b.N, Indices: slices.Clone(b.Indices)})
		// Scribble over the batch: the loader must overwrite all of it.
		for i := range b.X {
			b.X[i] = float32(i)
		}
		clear(b.Y)
		l.Recycle(b)
	}
	if !equalBatches(ref, got) {
		t.Fatal("recycling changed the batches")
	}
	// Prefetch 1: at most the batch in the channel, the one being filled
	// and the one being consumed hold distinct buffers.
	if len(seen) > cfg.Prefetch+2 || len(seen) == len(ref) {
		t.Fatalf("%d batches used %d distinct buffers", len(ref), len(seen))
	}
	l.Recycle(Batch{}) // ignored
}

func TestLoaderCloseNoLeak(t *testing.T) {
	s := randomSplit(64, 3)
	before := runtime.NumGoroutine()
	for i := range 20 {
		l := NewLoader(s, LoaderConfig{BatchSize: 4, Shuffle: true, Augment: true, Seed: 1, Epoch: i, Prefetch: 2, Workers: 3})
		switch i % 4 {
		case 0: // close at once
		case 1: // read some
			for range 3 {
				if _, ok := l.Next(); !ok {
					t.Fatal("loader ended early")
				}
			}
		case 2: // read everything
			n := 0
			for _, ok := l.Next(); ok; _, ok = l.Next() {
				n++
			}
			if n != 16 {
				t.Fatalf("read %d batches, want 16", n)
			}
		case 3: // let the producer fill the channel and block
			time.Sleep(5 * time.Millisecond)
		}
		l.Close()
		l.Close() // idempotent
		if _, ok := l.Next(); ok {
			t.Fatal("Next after Close returned a batch")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after closing loaders, %d before", n, before)
	}
}

func TestLoaderEmptyAndPanics(t *testing.T) {
	if bs := collect(t, &Split{}, LoaderConfig{BatchSize: 3}); len(bs) != 0 {
		t.Fatalf("empty split gave %d batches", len(bs))
	}
	if bs := collect(t, randomSplit(2, 1), LoaderConfig{BatchSize: 3, DropLast: true}); len(bs) != 0 {
		t.Fatalf("2 images, batch 3, DropLast gave %d batches", len(bs))
	}
	for _, cfg := range []LoaderConfig{
		{BatchSize: 0},
		{BatchSize: 2, Mean: []float32{0.5}},
		{BatchSize: 2, Std: []float32{1, 0, 1}},
		{BatchSize: 2, Pad: -1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLoader(%+v) did not panic", cfg)
				}
			}()
			NewLoader(randomSplit(2, 1), cfg).Close()
		}()
	}
}

func TestLoaderCustomNormalisation(t *testing.T) {
	s := randomSplit(3, 4)
	bs := collect(t, s, LoaderConfig{BatchSize: 3, Mean: []float32{0, 0, 0}, Std: []float32{1, 1, 1}})
	for i, v := range bs[0].X {
		if want := float32(s.Images[i]) / 255; v != want {
			t.Fatalf("value %d = %v, want %v", i, v, want)
		}
	}
}

func BenchmarkLoaderEpoch(b *testing.B) {
	s := randomSplit(2048, 5)
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(int64(s.Len() * ImageSize * 4))
			for i := range b.N {
				l := NewLoader(s, LoaderConfig{BatchSize: 128, Shuffle: true, Augment: true, Seed: 1, Epoch: i, Workers: workers})
				for _, ok := l.Next(); ok; _, ok = l.Next() {
				}
				l.Close()
			}
		})
	}
}

func TestNewNormalizerRejectsBadConstants(t *testing.T) {
	for _, c := range []struct{ mean, std []float32 }{
		{[]float32{0, 0}, []float32{1, 1, 1}},
		{[]float32{0, 0, 0}, []float32{1, 0, 1}},
		{[]float32{0, 0, 0}, []float32{1, 1, -2}},
		{[]float32{0, float32(math.NaN()), 0}, []float32{1, 1, 1}},
		{[]float32{0, 0, 0}, []float32{1, float32(math.Inf(1)), 1}},
	} {
		if _, err := cifarinfo.NewNormalizer(c.mean, c.std); err == nil {
			t.Errorf("NewNormalizer(%v, %v) accepted bad constants", c.mean, c.std)
		}
	}
}
