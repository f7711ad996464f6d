package onnx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/prune"
)

// The tests below run every exported network through ONNX Runtime (the
// Node binding, installed by scripts/ort/install) and compare its outputs
// with this engine's. They skip, saying why, only when Node or npm is
// missing or the install fails (no network).

// ortTolerance is the largest difference allowed between ONNX Runtime's
// and this engine's outputs, relative to the largest output magnitude.
const ortTolerance = 1e-4

// ortDir returns the folder holding onnxruntime-node, installing it with
// scripts/ort/install when needed, or skips the test. With the environment
// variable PROXGEN_ORT_REQUIRED set (.ci/run sets it once its install
// step succeeded) the test fails instead of skipping.
func ortDir(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("PROXGEN_ORT_REQUIRED") != "" {
		skip = t.Fatalf
	}
	if _, err := exec.LookPath("node"); err != nil {
		skip("skipped: node is not installed, so ONNX Runtime (onnxruntime-node) cannot run")
	}
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "ort", "install")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		skip("skipped: scripts/ort/install could not install onnxruntime-node (%v): %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// ortTensor is a tensor of the runner's JSON.
type ortTensor struct {
	Type string    `json:"type,omitempty"`
	Dims []int     `json:"dims"`
	Data []float64 `json:"data"`
}

// ortJob is one model run by scripts/ort/run.js.
type ortJob struct {
	Model  string               `json:"model"`
	Inputs map[string]ortTensor `json:"inputs"`
}

// runORT runs the jobs in one Node process and returns each job's outputs.
func runORT(t *testing.T, dir string, jobs []ortJob) []map[string]ortTensor {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	runner := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "ort", "run.js")
	in, err := json.Marshal(map[string]any{"jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", runner, dir)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ONNX Runtime failed (%v): %s", err, stderr.String())
	}
	var res struct {
		Results []struct {
			Outputs map[string]ortTensor `json:"outputs"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("reading ONNX Runtime's results: %v", err)
	}
	if len(res.Results) != len(jobs) {
		t.Fatalf("ONNX Runtime returned %d results for %d models", len(res.Results), len(jobs))
	}
	outs := make([]map[string]ortTensor, len(jobs))
	for i, r := range res.Results {
		outs[i] = r.Outputs
	}
	return outs
}

// randomizeNorms gives every batch normalisation of m non-trivial
// parameters and running statistics, so that exporting them wrongly
// shows in the outputs.
func randomizeNorms(m nn.Module, rng *rand.Rand) {
	for _, p := range nn.StateDict(m) {
		switch {
		case strings.HasSuffix(p.Name, "running_mean"):
			for i := range p.T.Data {
				p.T.Data[i] = float32(rng.NormFloat64() * 0.3)
			}
		case strings.HasSuffix(p.Name, "running_var"):
			for i := range p.T.Data {
				p.T.Data[i] = float32(0.5 + 1.5*rng.Float64())
			}
		}
	}
	for _, cn := range nn.ConvNorms(m) {
		for i := range cn.Gamma.T.Data {
			cn.Gamma.T.Data[i] = float32(0.5 + rng.Float64())
			cn.Beta.T.Data[i] = float32(rng.NormFloat64() * 0.2)
		}
	}
}

// exportCase is a network to export.
type exportCase struct {
	name  string
	build func(rng *rand.Rand) (nn.Module, error)
}

func newModel(name string, opts ...models.Option) func(*rand.Rand) (nn.Module, error) {
	return func(rng *rand.Rand) (nn.Module, error) { return models.New(name, 10, rng, opts...) }
}

// compacted returns a builder of the network name with the filters of
// a fraction of its channels (residual streams included) zeroed and
// removed by prune.Compact: per-layer widths and, for option A, shortcut
// channel maps.
func compacted(name string, opts ...models.Option) func(*rand.Rand) (nn.Module, error) {
	return func(rng *rand.Rand) (nn.Module, error) {
		m, err := models.New(name, 10, rng, opts...)
		if err != nil {
			return nil, err
		}
		randomizeNorms(m, rng)
		mask, err := prune.Filters(m, prune.Options{Fraction: 0.4, Residual: true})
		if err != nil {
			return nil, err
		}
		mask.Apply()
		c, _, err := prune.Compact(m)
		return c, err
	}
}

var imageCases = []exportCase{
	{"resnet20 (option A)", newModel("resnet20", models.WithWidth(0.5))},
	{"resnet20 (option B)", newModel("resnet20", models.WithWidth(0.5), models.WithShortcut(models.ShortcutB))},
	{"resnet18", newModel("resnet18", models.WithWidth(1.0/16))},
	{"resnet34", newModel("resnet34", models.WithWidth(1.0/16))},
	{"vgg16", newModel("vgg16", models.WithWidth(1.0/16))},
	{"resnet20 (option A) compacted", compacted("resnet20", models.WithWidth(0.5))},
	{"resnet20 (option B) compacted", compacted("resnet20", models.WithWidth(0.5), models.WithShortcut(models.ShortcutB))},
	{"resnet18 compacted", compacted("resnet18", models.WithWidth(1.0/16))},
	{"vgg16 compacted", compacted("vgg16", models.WithWidth(1.0/16))},
}

// comparison is one row of the ONNX Runtime comparison.
type comparison struct {
	name             string
	maxAbs, maxRel   float64 // largest difference, absolute and relative to the largest |output|
	scale            float64 // the largest |output| of this engine
	bytes, numParams int
}

// compare returns the largest absolute difference of got and want and it
// divided by the largest |want|.
func compare(got []float64, want []float32) (maxAbs, scale float64) {
	for i, w := range want {
		maxAbs = max(maxAbs, math.Abs(got[i]-float64(w)))
		scale = max(scale, math.Abs(float64(w)))
	}
	return maxAbs, scale
}

func TestImageClassifiersMatchONNXRuntime(t *testing.T) {
	dir := ortDir(t)
	tmp := t.TempDir()
	const batch = 3
	var jobs []ortJob
	var want [][]float32
	var rows []comparison
	var shapes [][]int
	for i, tc := range imageCases {
		rng := rand.New(rand.NewPCG(23, uint64(i)))
		m, err := tc.build(rng)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		randomizeNorms(m, rng)
		m.SetTraining(false)
		x := autograd.RandN(rng, batch, 3, 32, 32)
		y := m.Forward(x.In(&autograd.Context{NoGrad: true}))
		for _, fold := range []bool{false, true} {
			name := tc.name
			if fold {
				name += ", batch norm folded"
			}
			b, err := Marshal(m, Options{FoldBatchNorm: fold, Metadata: map[string]string{"model": tc.name}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			path := filepath.Join(tmp, fmt.Sprintf("%d-%v.onnx", i, fold))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, ortJob{Model: path, Inputs: map[string]ortTensor{
				InputName: {Type: "float32", Dims: x.Shape(), Data: float64s(x.Data)}}})
			want = append(want, y.Data)
			shapes = append(shapes, y.Shape())
			rows = append(rows, comparison{name: name, bytes: len(b), numParams: nn.NumParams(m)})
		}
	}
	outs := runORT(t, dir, jobs)
	for i, out := range outs {
		got, ok := out[LogitsName]
		if !ok || !slices.Equal(got.Dims, shapes[i]) {
			t.Errorf("%s: ONNX Runtime output %v, want logits of shape %v", rows[i].name, out, shapes[i])
			continue
		}
		r := &rows[i]
		r.maxAbs, r.scale = compare(got.Data, want[i])
		r.maxRel = r.maxAbs / r.scale
		if !(r.maxRel <= ortTolerance) {
			t.Errorf("%s: ONNX Runtime's logits differ by %.3g (%.3g of the largest logit %.3g)", r.name, r.maxAbs, r.maxRel, r.scale)
		}
	}
	logTable(t, rows)
}

func TestLanguageModelMatchesONNXRuntime(t *testing.T) {
	dir := ortDir(t)
	tmp := t.TempDir()
	var jobs []ortJob
	type result struct{ logits, h, c []float32 }
	var want []result
	var rows []comparison
	for i, size := range []struct{ vocab, emb, hidden, layers, steps, batch int }{
		{50, 16, 24, 1, 7, 3},
		{60, 12, 20, 2, 5, 4},
	} {
		rng := rand.New(rand.NewPCG(23, 100+uint64(i)))
		m := models.NewLanguageModel(size.vocab, size.emb, size.hidden, size.layers, 0.5, rng)
		m.SetTraining(false)
		ids := make([]int, size.steps*size.batch)
		idData := make([]float64, len(ids))
		for j := range ids {
			ids[j] = rng.IntN(size.vocab)
			idData[j] = float64(ids[j])
		}
		h0 := autograd.RandN(rng, size.layers, size.batch, size.hidden)
		c0 := autograd.RandN(rng, size.layers, size.batch, size.hidden)
		state := nn.LSTMState{}
		per := size.batch * size.hidden
		for l := range size.layers {
			state.H = append(state.H, autograd.FromSlice(h0.Data[l*per:(l+1)*per], size.batch, size.hidden))
			state.C = append(state.C, autograd.FromSlice(c0.Data[l*per:(l+1)*per], size.batch, size.hidden))
		}
		logits, final := m.Run(&autograd.Context{NoGrad: true}, ids, size.steps, size.batch, state)
		r := result{logits: logits.Data}
		for l := range size.layers {
			r.h = append(r.h, final.H[l].Data...)
			r.c = append(r.c, final.C[l].Data...)
		}
		b, err := Marshal(m, Options{Metadata: map[string]string{"vocab": fmt.Sprint(size.vocab)}})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(tmp, fmt.Sprintf("lm%d.onnx", i))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, ortJob{Model: path, Inputs: map[string]ortTensor{
			IDsName: {Type: "int64", Dims: []int{size.steps, size.batch}, Data: idData},
			H0Name:  {Type: "float32", Dims: h0.Shape(), Data: float64s(h0.Data)},
			C0Name:  {Type: "float32", Dims: c0.Shape(), Data: float64s(c0.Data)},
		}})
		want = append(want, r)
		rows = append(rows, comparison{name: fmt.Sprintf("LSTM LM, %d layer(s), vocab %d, emb %d, hidden %d", size.layers, size.vocab, size.emb, size.hidden),
			bytes: len(b), numParams: nn.NumParams(m)})
	}
	outs := runORT(t, dir, jobs)
	for i, out := range outs {
		r := &rows[i]
		for _, o := range []struct {
			name string
			want []float32
		}{{LogitsName, want[i].logits}, {HNName, want[i].h}, {CNName, want[i].c}} {
			got, ok := out[o.name]
			if !ok || len(got.Data) != len(o.want) {
				t.Fatalf("%s: ONNX Runtime output %q missing or of %d values, want %d", r.name, o.name, len(got.Data), len(o.want))
			}
			d, s := compare(got.Data, o.want)
			if !(d/s <= ortTolerance) {
				t.Errorf("%s: ONNX Runtime's %s differ by %.3g (%.3g of the largest %.3g)", r.name, o.name, d, d/s, s)
			}
			if d/s >= r.maxRel {
				r.maxAbs, r.maxRel, r.scale = d, d/s, s
			}
		}
	}
	logTable(t, rows)
}

// logTable logs the comparison as the Markdown table of docs/onnx.md.
func logTable(t *testing.T, rows []comparison) {
	var b strings.Builder
	b.WriteString("\n| network | parameters | .onnx bytes | largest output | max abs difference | max relative difference |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %.3g | %.2g | %.2g |\n", r.name, r.numParams, r.bytes, r.scale, r.maxAbs, r.maxRel)
	}
	t.Log(b.String())
}

func float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
