package checkpoint

import (
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

var update = flag.Bool("update", false, "rewrite the Go-written fixture under testdata/checkpoint")

// fixtureDir holds the output of testdata/gen_checkpoint.py and the
// Go-written fixture checked by testdata/check_go_checkpoint.py.
var fixtureDir = filepath.Join("..", "..", "testdata", "checkpoint")

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// tiny returns a small ResNet with option-B shortcuts (so it has conv,
// batch-norm and linear tensors and counters in nested containers).
func tiny(t testing.TB, seed uint64) nn.Module {
	t.Helper()
	m, err := models.New("resnet8", 10, newRng(seed), models.WithWidth(0.25), models.WithShortcut(models.ShortcutB))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// images returns n random images.
func images(rng *rand.Rand, n int) *autograd.Tensor { return autograd.RandN(rng, n, 3, 32, 32) }

// trainForward runs train-mode forwards so that the batch-norm statistics
// and counters move away from their initial values.
func trainForward(m nn.Module, rng *rand.Rand, steps int) {
	m.SetTraining(true)
	noGrad := &autograd.Context{NoGrad: true}
	for range steps {
		m.Forward(images(rng, 4).In(noGrad))
	}
}

func evalLogits(m nn.Module, x *autograd.Tensor) []float32 {
	m.SetTraining(false)
	return slices.Clone(m.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(&autograd.Context{NoGrad: true})).Data)
}

func sameState(t *testing.T, a, b nn.Module) {
	t.Helper()
	sa, sb := nn.StateDict(a), nn.StateDict(b)
	if len(sa) != len(sb) {
		t.Fatalf("state dicts have %d and %d entries", len(sa), len(sb))
	}
	for i := range sa {
		if sa[i].Name != sb[i].Name || !slices.Equal(sa[i].T.Data, sb[i].T.Data) {
			t.Fatalf("state entry %d: %s differs from %s", i, sa[i].Name, sb[i].Name)
		}
	}
}

func TestModelRoundTrip(t *testing.T) {
	a := tiny(t, 1)
	trainForward(a, newRng(2), 3)
	path := filepath.Join(t.TempDir(), ModelFileName)
	meta := map[string]string{"model": "resnet8", "note": "round trip"}
	if err := SaveModel(path, a, meta); err != nil {
		t.Fatal(err)
	}

	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nbt := f.Tensors["bn1.num_batches_tracked"]
	if nbt.DType != safetensors.I64 || len(nbt.Shape) != 0 {
		t.Fatalf("num_batches_tracked stored as %s%v, want I64[]", nbt.DType, nbt.Shape)
	}
	if v, _ := nbt.Int64(); v[0] != 3 {
		t.Fatalf("num_batches_tracked = %d, want 3", v[0])
	}
	if w := f.Tensors["layer2.0.shortcut.0.weight"]; w.DType != safetensors.F32 || !slices.Equal(w.Shape, []int{8, 4, 1, 1}) {
		t.Fatalf("shortcut weight stored as %s%v", w.DType, w.Shape)
	}
	if len(f.Tensors) != len(nn.StateDict(a)) {
		t.Fatalf("file has %d tensors, state dict %d", len(f.Tensors), len(nn.StateDict(a)))
	}

	b := tiny(t, 99) // different initial weights
	got, err := LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	if got["model"] != "resnet8" || got["note"] != "round trip" {
		t.Fatalf("metadata %v", got)
	}
	sameState(t, a, b)
	x := images(newRng(3), 2)
	if !slices.Equal(evalLogits(a, x), evalLogits(b, x)) {
		t.Fatal("loaded model computes different logits")
	}
}

// withTensor returns a copy of f with tensor name replaced (or removed
// when t is nil).
func withTensor(f *safetensors.File, name string, t *safetensors.Tensor) *safetensors.File {
	g := &safetensors.File{Tensors: map[string]safetensors.Tensor{}}
	for k, v := range f.Tensors {
		g.Tensors[k] = v
	}
	if t == nil {
		delete(g.Tensors, name)
	} else {
		g.Tensors[name] = *t
	}
	return g
}

func TestLoadErrorsLeaveModelUnchanged(t *testing.T) {
	src := tiny(t, 1)
	trainForward(src, newRng(2), 1)
	f := StateDict(src, "")
	w := f.Tensors["conv1.weight"]

	bad := func(tt safetensors.Tensor) *safetensors.Tensor { return &tt }
	f16, err := safetensors.FromFloat32As(safetensors.F16, []int{10}, make([]float32, 10))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		file *safetensors.File
		want string
	}{
		{"missing", withTensor(f, "linear.bias", nil), "1 missing keys (linear.bias)"},
		{"unexpected", withTensor(f, "extra.weight", bad(safetensors.FromFloat32([]int{1}, []float32{1}))), "1 unexpected keys (extra.weight)"},
		{"shape", withTensor(f, "conv1.weight", bad(safetensors.FromFloat32([]int{4, 3, 3, 2}, make([]float32, 72)))), `"conv1.weight": shape [4 3 3 2] in the file, the model has [4 3 3 3]`},
		{"int weight", withTensor(f, "linear.bias", bad(safetensors.FromInt64([]int{10}, make([]int64, 10)))), "dtype I64"},
		{"negative counter", withTensor(f, "bn1.num_batches_tracked", bad(safetensors.FromInt64(nil, []int64{-1}))), "negative"},
		{"fractional counter", withTensor(f, "bn1.num_batches_tracked", bad(safetensors.FromFloat64(nil, []float64{1.5}))), "not a whole number"},
		{"bad bytes", withTensor(f, "conv1.weight", bad(safetensors.Tensor{DType: safetensors.F32, Shape: w.Shape, Data: w.Data[:8]})), "conv1.weight"},
		{"f16 ok but last fails", withTensor(withTensor(f, "linear.bias", &f16), "linear.weight", nil), "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := tiny(t, 7)
			before := tiny(t, 7)
			err := LoadStateDict(c.file, dst, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			sameState(t, dst, before)
		})
	}
}

func TestLoadPyTorchConventions(t *testing.T) {
	src := tiny(t, 1)
	trainForward(src, newRng(2), 2)
	plain := StateDict(src, "")

	// DataParallel prefix, F16/BF16/F64 weights, [1]-shaped and I32 counters,
	// as PyTorch files may have them.
	f := &safetensors.File{Tensors: map[string]safetensors.Tensor{}}
	dtypes := []safetensors.DType{safetensors.F32, safetensors.F64, safetensors.BF16, safetensors.F16}
	for i, name := range plain.Names() {
		tt := plain.Tensors[name]
		if strings.HasSuffix(name, "num_batches_tracked") {
			v, _ := tt.Int64()
			tt = safetensors.Tensor{DType: safetensors.I32, Shape: []int{1}, Data: []byte{byte(v[0]), 0, 0, 0}}
		} else if name != "conv1.weight" {
			v, _ := tt.Float32()
			var err error
			tt, err = safetensors.FromFloat32As(dtypes[i%len(dtypes)], tt.Shape, v)
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Set("module."+name, tt)
	}
	dst := tiny(t, 5)
	if err := LoadStateDict(f, dst, LoadOptions{}); err == nil {
		t.Fatal("prefixed keys loaded without Prefix")
	}
	if err := LoadStateDict(f, dst, LoadOptions{Prefix: "module."}); err != nil {
		t.Fatal(err)
	}
	ds, ss := nn.StateDict(dst), nn.StateDict(src)
	for i := range ds {
		for j, v := range ds[i].T.Data {
			want := ss[i].T.Data[j]
			if d := math.Abs(float64(v - want)); d > 1e-2*math.Abs(float64(want))+1e-6 {
				t.Fatalf("%s[%d] = %v, want %v (within half precision)", ds[i].Name, j, v, want)
			}
		}
	}

	// Non-strict: extra keys ignored, missing ones left alone.
	part := withTensor(withTensor(plain, "linear.bias", nil), "head.weight", &safetensors.Tensor{DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	dst = tiny(t, 5)
	keep := slices.Clone(dst.(*models.ResNet).Linear.Bias.Data)
	if err := LoadStateDict(part, dst, LoadOptions{NonStrict: true}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst.(*models.ResNet).Linear.Bias.Data, keep) {
		t.Fatal("non-strict load changed a tensor the file does not have")
	}
	if !slices.Equal(dst.(*models.ResNet).Conv1.Weight.Data, src.(*models.ResNet).Conv1.Weight.Data) {
		t.Fatal("non-strict load did not load conv1.weight")
	}
}

// TestPyTorchFixture loads the state dict PyTorch wrote in
// testdata/gen_checkpoint.py into the Go ResNet-20 and reproduces
// PyTorch's eval-mode logits.
func TestPyTorchFixture(t *testing.T) {
	m, err := models.New("resnet20", 10, newRng(1))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := LoadModel(filepath.Join(fixtureDir, "torch_resnet20.safetensors"), m)
	if err != nil {
		t.Fatal(err)
	}
	if meta["model"] != "resnet20" {
		t.Fatalf("metadata %v", meta)
	}
	bn := m.(*models.ResNet).BN1
	if bn.BatchesTracked() != 3 {
		t.Fatalf("num_batches_tracked = %d, want 3 (three PyTorch training steps)", bn.BatchesTracked())
	}
	io, err := safetensors.ReadFile(filepath.Join(fixtureDir, "torch_resnet20.io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	x, xs, err := io.Float32("x")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := io.Float32("logits")
	if err != nil {
		t.Fatal(err)
	}
	got := evalLogits(m, autograd.FromSlice(x, xs...))
	maxDiff, scale := 0.0, 0.0
	for i := range want {
		maxDiff = max(maxDiff, math.Abs(float64(got[i]-want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	t.Logf("max |logit diff| = %.3g (max |logit| %.3g)", maxDiff, scale)
	if maxDiff > 1e-4*max(1, scale) {
		t.Fatalf("logits differ from PyTorch's by %g", maxDiff)
	}
}

// goFixture describes the Go-written model file that
// testdata/check_go_checkpoint.py loads into PyTorch.
const goFixture = "go_resnet20_w0.25"

func goFixtureModel(t *testing.T) nn.Module {
	m, err := models.New("resnet20", 10, newRng(25), models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGoFixture checks the committed Go-written checkpoint against the
// current code: the file has exactly the names, dtypes and shapes that
// SaveModel writes for the model, and loading it reproduces the logits
// stored beside it. With -update it rewrites both files (after a few
// training-mode forwards, so the batch-norm buffers are non-trivial);
// then run /usr/bin/python3 testdata/check_go_checkpoint.py.
func TestGoFixture(t *testing.T) {
	path := filepath.Join(fixtureDir, goFixture+".safetensors")
	ioPath := filepath.Join(fixtureDir, goFixture+".io.safetensors")
	meta := map[string]string{"model": "resnet20", "width": "0.25", "shortcut": "A", "num_classes": "10",
		"generator": "go test ./nn/checkpoint -run TestGoFixture -update"}
	if *update {
		m := goFixtureModel(t)
		trainForward(m, newRng(26), 3)
		if err := SaveModel(path, m, meta); err != nil {
			t.Fatal(err)
		}
		x := images(newRng(27), 3)
		io := &safetensors.File{Metadata: map[string]string{"mode": "eval", "generator": meta["generator"]}}
		io.Set("x", safetensors.FromFloat32(x.Shape(), x.Data))
		io.Set("logits", safetensors.FromFloat32([]int{3, 10}, evalLogits(m, x)))
		if err := safetensors.WriteFileAtomic(ioPath, io); err != nil {
			t.Fatal(err)
		}
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := StateDict(goFixtureModel(t), "")
	if !slices.Equal(f.Names(), fresh.Names()) {
		t.Fatalf("fixture names %v\nwant %v", f.Names(), fresh.Names())
	}
	for _, n := range f.Names() {
		a, b := f.Tensors[n], fresh.Tensors[n]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
			t.Fatalf("%s: fixture %s%v, SaveModel writes %s%v", n, a.DType, a.Shape, b.DType, b.Shape)
		}
	}
	for k, v := range meta {
		if f.Metadata[k] != v {
			t.Fatalf("fixture metadata %q = %q, want %q", k, f.Metadata[k], v)
		}
	}
	m := goFixtureModel(t)
	if _, err := LoadModel(path, m); err != nil {
		t.Fatal(err)
	}
	io, err := safetensors.ReadFile(ioPath)
	if err != nil {
		t.Fatal(err)
	}
	x, xs, _ := io.Float32("x")
	want, _, _ := io.Float32("logits")
	got := evalLogits(m, autograd.FromSlice(x, xs...))
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-4*max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("logit %d = %v, fixture has %v", i, got[i], want[i])
		}
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

// TestLoadWeightsConventions: LoadWeights finds the model tensors of a
// plain state dict, a DataParallel one ("module.") and a file that keeps
// them under ModelPrefix (training-state files and nn/train checkpoints,
// with or without a format this package knows), and reports a missing
// tensor.
func TestLoadWeightsConventions(t *testing.T) {
	src := tiny(t, 1)
	trainForward(src, newRng(2), 2)
	plain := StateDict(src, "")
	prefixed := func(prefix string, meta map[string]string) *safetensors.File {
		f := &safetensors.File{Tensors: map[string]safetensors.Tensor{}, Metadata: meta}
		for _, name := range plain.Names() {
			f.Set(prefix+name, plain.Tensors[name])
		}
		f.Set("optim/step", safetensors.Tensor{DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
		return f
	}
	for name, f := range map[string]*safetensors.File{
		"plain":        plain,
		"dataparallel": withTensor(prefixed("module.", nil), "optim/step", nil),
		"train state":  prefixed(ModelPrefix, map[string]string{FormatKey: "proxgen-train-state-v1"}),
		"run":          prefixed(ModelPrefix, map[string]string{FormatKey: "proxgen-run-v1"}),
	} {
		dst := tiny(t, 5)
		if err := LoadWeights(f, dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameState(t, src, dst)
	}
	if err := LoadWeights(withTensor(plain, "linear.bias", nil), tiny(t, 5)); err == nil {
		t.Fatal("a file without linear.bias loaded")
	}
}
