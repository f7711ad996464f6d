package infer_test

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x1f3)) }

// randomize gives the batch-norm buffers of m random running statistics,
// so that evaluation mode differs visibly from training mode.
func randomize(m nn.Module, rng *rand.Rand) {
	for _, b := range m.Buffers() {
		switch {
		case strings.HasSuffix(b.Name, "running_mean"):
			for i := range b.T.Data {
				b.T.Data[i] = float32(rng.NormFloat64() * 0.2)
			}
		case strings.HasSuffix(b.Name, "running_var"):
			for i := range b.T.Data {
				b.T.Data[i] = float32(0.5 + rng.Float64())
			}
		}
	}
}

// tinySpec is a small ResNet with option-B shortcuts, 7 classes and its
// own normalisation and class names.
var tinySpec = models.Spec{
	Model: "resnet8", Width: 0.25, Shortcut: "B", NumClasses: 7,
	Mean: []float32{0.5, 0.4, 0.3}, Std: []float32{0.25, 0.2, 0.3},
	Classes: []string{"a", "b", "c", "d", "e", "f", "g"},
}

// saveTiny writes a random tiny model with tinySpec's metadata and returns
// its path and network.
func saveTiny(t testing.TB, seed uint64) (string, nn.Module) {
	t.Helper()
	net, err := tinySpec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := newRng(seed)
	for _, p := range net.Params() {
		for i := range p.T.Data {
			p.T.Data[i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	randomize(net, rng)
	path := filepath.Join(t.TempDir(), "tiny.safetensors")
	if err := checkpoint.SaveModel(path, net, tinySpec.Metadata()); err != nil {
		t.Fatal(err)
	}
	return path, net
}

func randomInputs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n*infer.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// TestLoadRecordsSpec checks that a model file carries its network and
// preprocessing: Load with an empty Spec rebuilds it, and the model
// computes exactly what the saved network computes in evaluation mode.
func TestLoadRecordsSpec(t *testing.T) {
	path, net := saveTiny(t, 1)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Spec(); !reflect.DeepEqual(got, tinySpec) {
		t.Fatalf("spec from the file %+v, want %+v", got, tinySpec)
	}
	x := randomInputs(newRng(2), 3)
	want := evalSoftmax(net, x, 3)
	got := m.Probabilities(nil, x)
	if !slices.Equal(got, want) {
		t.Fatalf("probabilities differ from the saved network's:\n got %v\nwant %v", got, want)
	}
	// The model file also loads as a training-state file and with the
	// "module." prefix of DataParallel.
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{checkpoint.ModelPrefix, "module."} {
		g := &safetensors.File{Tensors: map[string]safetensors.Tensor{}, Metadata: f.Metadata}
		for name, v := range f.Tensors {
			g.Set(prefix+name, v)
		}
		if prefix == checkpoint.ModelPrefix {
			g.Metadata = map[string]string{checkpoint.FormatKey: "proxgen-run-v1"}
			for k, v := range f.Metadata {
				g.Metadata[k] = v
			}
		}
		m2, err := infer.FromFile(g, models.Spec{})
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		if !slices.Equal(m2.Probabilities(nil, x), want) {
			t.Fatalf("prefix %q: probabilities differ", prefix)
		}
	}
}

// evalSoftmax is the reference: the network in evaluation mode, softmax in
// float64.
func evalSoftmax(net nn.Module, x []float32, n int) []float32 {
	m, err := infer.New(net, models.Spec{NumClasses: 7})
	if err != nil {
		panic(err)
	}
	out := m.Probabilities(nil, x)
	// Check the softmax itself against a plain float64 computation of the
	// logits' softmax: rows sum to 1 and are positive.
	for i := range n {
		s := 0.0
		for _, p := range out[i*7 : (i+1)*7] {
			if !(p > 0) {
				panic(fmt.Sprintf("probability %v", p))
			}
			s += float64(p)
		}
		if math.Abs(s-1) > 1e-5 {
			panic(fmt.Sprintf("row %d sums to %v", i, s))
		}
	}
	return out
}

// TestLoadPyTorchFile loads a model file written by PyTorch without any
// metadata: the architecture is given explicitly, and the probabilities
// match PyTorch's eval-mode logits (testdata/gen_checkpoint.py).
func TestLoadPyTorchFile(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "checkpoint")
	f, err := safetensors.ReadFile(filepath.Join(dir, "torch_resnet20.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	f.Metadata = nil
	if _, err := infer.FromFile(f, models.Spec{}); err == nil || !strings.Contains(err.Error(), "Spec.Model") {
		t.Fatalf("no architecture anywhere: error %v, want one that asks for Spec.Model", err)
	}
	if _, err := infer.FromFile(f, models.Spec{Model: "resnet32"}); err == nil || !strings.Contains(err.Error(), "missing keys") {
		t.Fatalf("wrong architecture: error %v", err)
	}
	m, err := infer.FromFile(f, models.Spec{Model: "resnet20"})
	if err != nil {
		t.Fatal(err)
	}
	io, err := safetensors.ReadFile(filepath.Join(dir, "torch_resnet20.io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := io.Float32("x")
	if err != nil {
		t.Fatal(err)
	}
	logits, _, err := io.Float32("logits")
	if err != nil {
		t.Fatal(err)
	}
	got := m.Probabilities(nil, x)
	for i := range len(logits) / 10 {
		row := logits[i*10 : (i+1)*10]
		hi := slices.Max(row)
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v - hi))
		}
		for j, v := range row {
			want := math.Exp(float64(v-hi)) / sum
			if d := math.Abs(float64(got[i*10+j]) - want); d > 1e-5 {
				t.Fatalf("image %d class %d: probability %v, PyTorch %v", i, j, got[i*10+j], want)
			}
		}
	}
	if m.Spec().Classes[3] != "cat" || m.NumClasses() != 10 {
		t.Fatalf("defaults: %+v", m.Spec())
	}
}

func TestLoadErrors(t *testing.T) {
	path, _ := saveTiny(t, 3)
	for _, c := range []struct {
		spec models.Spec
		want string
	}{
		{models.Spec{NumClasses: 10}, "7 class names for 10 classes"},
		{models.Spec{Width: 0.5}, "conv1.weight"},
		{models.Spec{Shortcut: "C"}, "shortcut"},
		{models.Spec{Classes: []string{"x"}}, "class names"},
		{models.Spec{Std: []float32{1, 0, 1}}, "std"},
		{models.Spec{Model: "lenet"}, "unknown model"},
	} {
		_, err := infer.Load(path, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%+v: error %v, want one naming the file and %q", c.spec, err, c.want)
		}
	}
	if _, err := infer.Load(filepath.Join(t.TempDir(), "none.safetensors"), models.Spec{}); err == nil {
		t.Error("missing file: no error")
	}
	f := &safetensors.File{Tensors: map[string]safetensors.Tensor{}, Metadata: map[string]string{models.KeyMean: "[1,2"}}
	if _, err := infer.FromFile(f, models.Spec{Model: "resnet8"}); err == nil || !strings.Contains(err.Error(), "mean") {
		t.Errorf("bad mean metadata: error %v", err)
	}
}

// TestBatchInvariance checks that an image's probabilities do not depend
// on the batch it runs in or on GOMAXPROCS, bit for bit: the server batches
// independent requests together.
func TestBatchInvariance(t *testing.T) {
	path, _ := saveTiny(t, 4)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 9
	x := randomInputs(newRng(5), n)
	batch := m.Probabilities(nil, x)
	k := m.NumClasses()
	for _, procs := range []int{1, 2, 4} {
		prev := runtime.GOMAXPROCS(procs)
		for i := range n {
			one := m.Probabilities(nil, x[i*infer.InputSize:(i+1)*infer.InputSize])
			if !slices.Equal(one, batch[i*k:(i+1)*k]) {
				runtime.GOMAXPROCS(prev)
				t.Fatalf("GOMAXPROCS %d: image %d alone %v, in the batch %v", procs, i, one, batch[i*k:(i+1)*k])
			}
		}
		pair := m.Probabilities(nil, x[2*infer.InputSize:4*infer.InputSize])
		runtime.GOMAXPROCS(prev)
		if !slices.Equal(pair, batch[2*k:4*k]) {
			t.Fatalf("GOMAXPROCS %d: images 2-3 as a pair differ from the batch", procs)
		}
	}
}

// TestConcurrentPredict runs one model from many goroutines (run it with
// -race): every result equals the sequential one.
func TestConcurrentPredict(t *testing.T) {
	path, _ := saveTiny(t, 6)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	rng := newRng(7)
	imgs := make([]image.Image, 6)
	for i := range imgs {
		w, h := 20+rng.IntN(40), 20+rng.IntN(40)
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for j := range img.Pix {
			img.Pix[j] = uint8(rng.IntN(256))
		}
		imgs[i] = img
	}
	want := m.Predict(imgs, 3)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 4 {
				lo := (g + r) % len(imgs)
				got := m.Predict(imgs[lo:], 3)
				if !reflect.DeepEqual(got, want[lo:]) {
					errs <- fmt.Sprintf("goroutine %d round %d: %v, want %v", g, r, got, want[lo:])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestPreprocessMatchesLoader(t *testing.T) {
	path, _ := saveTiny(t, 8)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	rng := newRng(9)
	split := &cifar10.Split{Images: make([]uint8, 2*cifar10.ImageSize), Labels: []uint8{3, 4}}
	for i := range split.Images {
		split.Images[i] = uint8(rng.IntN(256))
	}
	l := cifar10.NewLoader(split, cifar10.LoaderConfig{BatchSize: 2, Mean: tinySpec.Mean, Std: tinySpec.Std})
	defer l.Close()
	b, ok := l.Next()
	if !ok {
		t.Fatal("no batch")
	}
	got := make([]float32, infer.InputSize)
	for i := range 2 {
		img := split.Image(i)
		rec := append([]byte{split.Labels[i]}, img...)
		for _, in := range [][]byte{img, rec} {
			clear(got)
			if err := m.PreprocessRaw(got, in); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, b.X[i*infer.InputSize:(i+1)*infer.InputSize]) {
				t.Fatalf("image %d (%d bytes): preprocessing differs from the training loader", i, len(in))
			}
		}
		// The same pixels as a 32×32 image.
		rgba := image.NewNRGBA(image.Rect(0, 0, 32, 32))
		for p := range 1024 {
			rgba.Pix[4*p], rgba.Pix[4*p+1], rgba.Pix[4*p+2], rgba.Pix[4*p+3] = img[p], img[1024+p], img[2048+p], 255
		}
		m.Preprocess(got, rgba)
		if !slices.Equal(got, b.X[i*infer.InputSize:(i+1)*infer.InputSize]) {
			t.Fatalf("image %d: Preprocess of the 32×32 image differs from the loader", i)
		}
	}
	for _, n := range []int{0, 3071, 3074, 6144} {
		if err := m.PreprocessRaw(got, make([]byte, n)); err == nil {
			t.Errorf("%d bytes: no error", n)
		}
	}
}

func TestTopK(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	probs := []float32{0.1, 0.3, 0.1, 0.4, 0.1}
	for _, c := range []struct {
		k    int
		want []int
	}{{1, []int{3}}, {3, []int{3, 1, 0}}, {5, []int{3, 1, 0, 2, 4}}, {9, []int{3, 1, 0, 2, 4}}, {0, []int{3}}, {-2, []int{3}}} {
		got := infer.TopK(probs, c.k, names)
		var idx []int
		for _, g := range got {
			idx = append(idx, g.Index)
			if g.Name != names[g.Index] || g.Prob != probs[g.Index] {
				t.Fatalf("k=%d: %+v", c.k, g)
			}
		}
		if !slices.Equal(idx, c.want) {
			t.Errorf("k=%d: classes %v, want %v", c.k, idx, c.want)
		}
	}
}

// TestSpecMetadataRoundTrip checks the metadata encoding on its own.
func TestSpecMetadataRoundTrip(t *testing.T) {
	meta := tinySpec.Metadata()
	if meta[models.KeyWidth] != "0.25" || meta[models.KeyNumClasses] != "7" || meta[models.KeyMean] != "[0.5,0.4,0.3]" {
		t.Fatalf("metadata %v", meta)
	}
	got, err := models.SpecFromMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tinySpec) {
		t.Fatalf("round trip gives %+v, want %+v", got, tinySpec)
	}
	if m := (models.Spec{}).Metadata(); len(m) != 0 {
		t.Fatalf("empty spec gives %v", m)
	}
	// Per-layer widths of a compacted network.
	ws := tinySpec
	ws.Shortcut = "A"
	ws.Widths = &models.Widths{Stem: 3, Stages: [][]models.BlockWidths{{{Inner: 2, Out: 3}}, {{Inner: 1, Out: 5, Pad: []int{0, -1, 4}}}, {{Inner: 7, Out: 6}}}}
	meta = ws.Metadata()
	if got, err := models.SpecFromMetadata(meta); err != nil || !reflect.DeepEqual(got, ws) {
		t.Fatalf("widths round trip gives %+v (%v), want %+v", got, err, ws)
	}
	net, err := ws.Build()
	if err != nil {
		t.Fatal(err)
	}
	if w, err := models.WidthsOf(net); err != nil || !reflect.DeepEqual(w.Stages[1], ws.Widths.Stages[1]) || w.Stem != 3 {
		t.Fatalf("built widths %+v (%v)", w, err)
	}
	for _, bad := range []map[string]string{{models.KeyWidth: "wide"}, {models.KeyNumClasses: "ten"}, {models.KeyClasses: "a,b"}, {models.KeyStd: "{}"}, {models.KeyWidths: "[1]"}} {
		if _, err := models.SpecFromMetadata(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestPredictWhileTraining serves a model and a snapshot of a model in
// training from eight goroutines while another goroutine trains that
// model with an arena (run it with -race): the training goroutine records
// its graph and the predictions equal those of a quiet process, bit for
// bit.
func TestPredictWhileTraining(t *testing.T) {
	servedPath, _ := saveTiny(t, 10)
	served, err := infer.Load(servedPath, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	trainPath, training := saveTiny(t, 11) // training starts from this file
	snapshot, err := infer.Load(trainPath, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	x := randomInputs(newRng(12), 3)
	want := [][]float32{served.Probabilities(nil, x), snapshot.Probabilities(nil, x)}

	done := make(chan struct{})
	trained := make(chan error, 1)
	go func() {
		defer close(done)
		trained <- trainSteps(training, 4)
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := []*infer.Model{served, snapshot}[g%2]
			for {
				if got := m.Probabilities(nil, x); !slices.Equal(got, want[g%2]) {
					errs <- fmt.Sprintf("goroutine %d: probabilities changed while the other model trained", g)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err := <-trained; err != nil {
		t.Fatal(err)
	}
}

// trainSteps runs plain SGD steps of net on random data in a context with
// an arena, and checks that every step recorded its graph (the parameters
// receive gradients).
func trainSteps(net nn.Module, steps int) error {
	rng := newRng(13)
	net.SetTraining(true)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for step := range steps {
		ctx.Arena.Reset()
		x := autograd.FromSlice(randomInputs(rng, 4), 4, 3, 32, 32).In(ctx)
		labels := []int{0, 1, 2, 3}
		loss := autograd.CrossEntropy(net.Forward(x), labels)
		loss.Backward()
		for _, p := range net.Params() {
			if len(p.T.Grad) != len(p.T.Data) {
				return fmt.Errorf("step %d: %s has no gradient", step, p.Name)
			}
			for i, g := range p.T.Grad {
				p.T.Data[i] -= 0.01 * g
			}
			p.T.ZeroGrad()
		}
	}
	return nil
}

// TestSteadyStateAllocations checks that repeated calls reuse the pooled
// arena: after the first call, a call allocates a small fraction of the
// activations' memory.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	path, _ := saveTiny(t, 14)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	x := randomInputs(newRng(15), 8)
	dst := make([]float32, 8*m.NumClasses())
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	prev := runtime.GOMAXPROCS(1) // no other goroutine allocates meanwhile
	defer runtime.GOMAXPROCS(prev)
	first := allocated(func() { m.Probabilities(dst, x) })
	steady := allocated(func() {
		for range 10 {
			m.Probabilities(dst, x)
		}
	}) / 10
	t.Logf("first call %d bytes, then %d bytes per call", first, steady)
	if steady*8 > first {
		t.Fatalf("a steady-state call allocates %d bytes, the first %d: the arena is not reused", steady, first)
	}
}

// TestNoAllocationsOneWorker checks that a ResNet-20 (both shortcut kinds,
// dense and with 90 % exact zeros, which runs sparse) allocates nothing per
// call once warm, on one worker: the plan's activations, the head's
// buffers and the kernels' scratch are reused, and no loop makes a closure
// for the worker pool.
func TestNoAllocationsOneWorker(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	for _, shortcut := range []string{"A", "B"} {
		for _, zeros := range []float64{0, 0.9} {
			spec := models.Spec{Model: "resnet20", Shortcut: shortcut}
			net, err := spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			nntest.ZeroWeights(net, newRng(17), zeros)
			m, err := infer.New(net, spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range []int{1, 3} {
				x := randomInputs(newRng(16), batch)
				dst := m.Logits(nil, x)
				if allocs := testing.AllocsPerRun(5, func() { dst = m.Logits(dst, x) }); allocs != 0 {
					t.Errorf("shortcut %s, %g zeros, batch %d: %v allocations per call (%s)", shortcut, zeros, batch, allocs, m)
				}
			}
		}
	}
}

// TestLoadHostileMetadata loads model files whose metadata asks for
// networks far larger than their tensors (issue 26, F5) or normalisation
// constants whose reciprocals overflow (F4): each must fail quickly with
// an error naming the key, never allocate the network.
func TestLoadHostileMetadata(t *testing.T) {
	path, _ := saveTiny(t, 3)
	for _, c := range []struct {
		key, value, want string
	}{
		{models.KeyWidth, "10000", "width 10000: want more than 0 and at most 16"},
		{models.KeyWidth, "16", "width 16, num_classes 7: the network needs 18888448 weights, the file holds 5340 values"},
		{models.KeyModel, "resnet600000002", `model "resnet600000002"`},
		{models.KeyModel, "resnet1202", "model resnet1202, width 0.25, num_classes 7: the network needs"},
		{models.KeyNumClasses, "500000000", "num_classes 500000000: more than the maximum 100000"},
		{models.KeyNumClasses, "90000", "num_classes 90000: the network needs"},
		{models.KeyWidths, `{"stem":100000,"stages":[[{"inner":4,"out":4}],[{"inner":8,"out":8}],[{"inner":16,"out":16}]]}`, "stem = 100000: more than the maximum 8192"},
		{models.KeyStd, "[1e-45,0.2,0.2]", "std[0] = 1e-45: want a finite, normal, nonzero value"},
		{models.KeyStd, "[0.2,0,0.2]", "std[1] = 0"},
		{models.KeyMean, "[0.5,0.5]", "mean: 2 values, want 3"},
	} {
		f, err := safetensors.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.key == models.KeyNumClasses {
			delete(f.Metadata, models.KeyClasses)
		}
		f.Metadata[c.key] = c.value
		bad := filepath.Join(t.TempDir(), "bad.safetensors")
		if err := safetensors.WriteFileAtomic(bad, f); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = infer.Load(bad, models.Spec{})
		t.Logf("%s=%.20s: %v", c.key, c.value, time.Since(start))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s=%s: error %v, want one naming the file and %q", c.key, c.value, err, c.want)
		}
	}
}

// TestSparseByDefault checks that Load with MinZeros gives the layers of
// a network with mostly exact zeros the sparse path, says so, computes
// what the dense path computes within float32 rounding, and that Dense
// and MinZeros above 1 turn it off; and that the default, the measured
// choice, is one of the candidates and runs what it reports (TestChoose).
func TestSparseByDefault(t *testing.T) {
	net, err := tinySpec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := newRng(21)
	for _, p := range net.Params() {
		for i := range p.T.Data {
			p.T.Data[i] = float32(rng.NormFloat64() * 0.3)
			if p.T.Rank() >= 2 && rng.Float64() < 0.97 {
				p.T.Data[i] = 0
			}
		}
	}
	randomize(net, rng)
	path := filepath.Join(t.TempDir(), "sparse.safetensors")
	if err := checkpoint.SaveModel(path, net, tinySpec.Metadata()); err != nil {
		t.Fatal(err)
	}
	sparse, err := infer.Load(path, models.Spec{}, infer.MinZeros(0.9))
	if err != nil {
		t.Fatal(err)
	}
	rep := sparse.Sparsity()
	if n := len(rep.SparseLayers()); n == 0 || n != len(rep.Layers) {
		t.Fatalf("%d of %d layers sparse at about 97%% zeros, want all:\n%s", n, len(rep.Layers), rep)
	}
	if s := sparse.String(); !strings.Contains(s, fmt.Sprintf("%d of %d layers sparse", len(rep.Layers), len(rep.Layers))) {
		t.Errorf("String %q does not count the sparse layers", s)
	}
	x := randomInputs(newRng(22), 3)
	got := sparse.Probabilities(nil, x)
	measured, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	checkChoice(t, measured, x, got)
	for name, opt := range map[string]infer.Option{"Dense": infer.Dense(), "MinZeros(1.1)": infer.MinZeros(1.1)} {
		dense, err := infer.Load(path, models.Spec{}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(dense.Sparsity().SparseLayers()); n != 0 {
			t.Fatalf("%s: %d layers sparse, want none", name, n)
		}
		want := dense.Probabilities(nil, x)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
				t.Fatalf("%s: probability %d: sparse %v, dense %v", name, i, got[i], want[i])
			}
		}
	}
}

// checkChoice checks a model loaded with the measured choice of sparse
// layers (infer.New): its report is one of the candidates (the layers at
// or above a fraction of zeros sparse, and that fraction recorded), every
// convolution Algorithms calls sparse at batch 1 is reported sparse and
// every one reported sparse runs sparse where the network is compiled, and
// its probabilities on x are want's within float32 rounding.
func checkChoice(t *testing.T, m *infer.Model, x, want []float32) {
	t.Helper()
	rep := m.Sparsity()
	for _, l := range rep.Layers {
		if l.Sparse != (l.Numel > 0 && l.ZeroFraction() >= rep.MinZeros) {
			t.Fatalf("measured choice: layer %s (%.3f zeros) sparse %v with MinZeros %g", l.Name, l.ZeroFraction(), l.Sparse, rep.MinZeros)
		}
	}
	if algs := m.Algorithms(1); algs != nil {
		// Option A's selections are convolutions of the plan, never
		// sparse, and not layers of the report.
		runs, reported := 0, 0
		for _, a := range algs {
			if a == "sparse" {
				runs++
			}
		}
		for _, l := range rep.Layers {
			if l.Kind == "Conv2d" && l.Sparse {
				reported++
			}
		}
		if runs != reported {
			t.Fatalf("measured choice: %d convolutions run sparse, %d reported sparse (%v)", runs, reported, algs)
		}
	}
	got := m.Probabilities(nil, x)
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
			t.Fatalf("measured choice: probability %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestLogits checks that Logits returns what the saved network computes in
// evaluation mode and that Probabilities is its softmax.
func TestLogits(t *testing.T) {
	path, net := saveTiny(t, 11)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	x := randomInputs(newRng(12), n)
	logits := m.Logits(make([]float32, 1), x)
	net.SetTraining(false)
	want := net.Forward(autograd.FromSlice(slices.Clone(x), n, 3, infer.Side, infer.Side)).Data
	k := m.NumClasses()
	if len(logits) != n*k {
		t.Fatalf("Logits returned %d values, want %d", len(logits), n*k)
	}
	probs := m.Probabilities(nil, x)
	for i := range n {
		row := logits[i*k : (i+1)*k]
		mx := slices.Max(row)
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v - mx))
		}
		for j, v := range row {
			if d := math.Abs(float64(v - want[i*k+j])); d > 1e-4*(1+math.Abs(float64(want[i*k+j]))) {
				t.Errorf("image %d class %d: logit %g, eval-mode network %g", i, j, v, want[i*k+j])
			}
			if p := math.Exp(float64(v-mx)) / sum; math.Abs(p-float64(probs[i*k+j])) > 1e-6 {
				t.Errorf("image %d class %d: softmax of the logits %g, Probabilities %g", i, j, p, probs[i*k+j])
			}
		}
	}
}

// TestStringNamesAlgorithms: Model.String counts every convolution's
// algorithm (the serve log and the model cards quote it).
func TestStringNamesAlgorithms(t *testing.T) {
	spec := models.Spec{Model: "resnet8", Width: 0.25, NumClasses: 10}
	net, err := spec.New(rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		t.Fatal(err)
	}
	s := m.String()
	algs := m.Algorithms(1)
	count := map[string]int{}
	for _, a := range algs {
		count[a]++
	}
	for a, n := range count {
		if !strings.Contains(s, fmt.Sprintf("%d %s", n, a)) {
			t.Errorf("String %q does not count the %d %s convolutions of %v", s, n, a, algs)
		}
	}
	if !strings.Contains(s, "0 of 8 layers sparse") {
		t.Errorf("String %q", s)
	}
}
