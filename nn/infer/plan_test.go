package infer_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// evalLogitsSoftmax returns the softmax of net's logits computed by the
// training graph in evaluation mode (no preparation, no plan).
func evalLogitsSoftmax(net nn.Module, x []float32, n int) []float32 {
	net.SetTraining(false)
	ctx := &autograd.Context{NoGrad: true}
	logits := net.Forward(autograd.FromSlice(append([]float32(nil), x...), n, cifar10.Channels, infer.Side, infer.Side).In(ctx)).Data
	k := len(logits) / n
	out := make([]float32, len(logits))
	for i := range n {
		hi := math.Inf(-1)
		for _, v := range logits[i*k : (i+1)*k] {
			hi = math.Max(hi, float64(v))
		}
		s := 0.0
		for _, v := range logits[i*k : (i+1)*k] {
			s += math.Exp(float64(v) - hi)
		}
		for j, v := range logits[i*k : (i+1)*k] {
			out[i*k+j] = float32(math.Exp(float64(v)-hi) / s)
		}
	}
	return out
}

// TestPlanMatchesEval checks that the compiled network (batch norm folded,
// fused epilogues, packed filters, sparse layers) computes the training
// graph's evaluation-mode outputs within float32 rounding, on every
// architecture and shortcut kind, dense and with 95 % exact zeros, at
// batch 1 and 5, and bit-identically for 1 and 2 workers. The full-width
// dense ResNet-20s and VGG-16 run in the channel-blocked layout
// (directPlan) where package nchwc has its kernels, and again with them
// turned off, in the layout of the other plans.
func TestPlanMatchesEval(t *testing.T) {
	for _, tc := range []struct {
		spec  models.Spec
		zeros float64
	}{
		{models.Spec{Model: "resnet20", Width: 1, Shortcut: "A"}, 0},
		{models.Spec{Model: "resnet20", Width: 1, Shortcut: "B"}, 0},
		{models.Spec{Model: "vgg16", Width: 1}, 0},
		{models.Spec{Model: "resnet20", Width: 0.5, Shortcut: "A"}, 0},
		{models.Spec{Model: "resnet20", Width: 0.5, Shortcut: "B"}, 0},
		{models.Spec{Model: "resnet20", Width: 0.5, Shortcut: "B"}, 0.95},
		{models.Spec{Model: "resnet56", Width: 0.25, Shortcut: "A"}, 0.95},
		{models.Spec{Model: "resnet56", Width: 0.25, Shortcut: "B"}, 0},
		{models.Spec{Model: "resnet18", Width: 0.125}, 0},
		{models.Spec{Model: "resnet34", Width: 0.125}, 0.95},
		{models.Spec{Model: "vgg16", Width: 0.125}, 0},
		{models.Spec{Model: "vgg16", Width: 0.125}, 0.95},
		// per-layer widths of every kind of channel tail (1-8 channels:
		// the half kernels; 9-15: a whole block), option B shortcuts
		// between stages of different widths
		{models.Spec{Model: "resnet20", Width: 1, Shortcut: "B", Widths: oddWidths}, 0},
	} {
		names, _ := impl.List("nchwc")
		for _, kernels := range append([]string{"", impl.Generic}, names...) {
			if kernels != "" && tc.zeros > 0 {
				continue // the plans that do not use nchwc run with its kernels off too
			}
			checkPlanMatchesEval(t, tc.spec, tc.zeros, kernels)
		}
	}
}

// oddWidths are per-layer widths of a ResNet-20 with channel counts 1, 5,
// 7, 9, 17, 20, 33 and 63.
var oddWidths = &models.Widths{Stem: 7, Stages: [][]models.BlockWidths{
	{{Inner: 1, Out: 7}, {Inner: 9, Out: 7}, {Inner: 20, Out: 7}},
	{{Inner: 17, Out: 33}, {Inner: 63, Out: 33}, {Inner: 5, Out: 33}},
	{{Inner: 20, Out: 9}, {Inner: 33, Out: 9}, {Inner: 1, Out: 9}},
}}

// checkPlanMatchesEval is TestPlanMatchesEval for one network, with
// package nchwc's kernels turned off if kernels is impl.Generic.
func checkPlanMatchesEval(t *testing.T, spec models.Spec, zeros float64, kernels string) {
	t.Helper()
	name := fmt.Sprintf("%s_w%g_%s_z%g%s", spec.Model, spec.Width, spec.Shortcut, zeros, kernels)
	if spec.Widths != nil {
		name = strings.Replace(name, "_w1_", "_widths_", 1)
	}
	t.Run(name, func(t *testing.T) {
		if kernels != "" {
			if !impl.Select("nchwc", kernels) {
				t.Skipf("this CPU has no %s", kernels)
			}
			defer impl.Reset("nchwc")
		}
		net, err := spec.Build()
		if err != nil {
			t.Fatal(err)
		}
		rng := newRng(31)
		randomize(net, rng)
		nntest.ZeroWeights(net, rng, zeros)
		const n = 5
		x := randomInputs(newRng(32), n)
		want := evalLogitsSoftmax(net, x, n)
		var opts []infer.Option
		if zeros > 0 {
			// The plans with sparse layers (the default choice, measured,
			// is checked below).
			opts = append(opts, infer.MinZeros(0.9))
			nt, err := spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			rng := newRng(31) // the weights of net
			randomize(nt, rng)
			nntest.ZeroWeights(nt, rng, zeros)
			measured, err := infer.New(nt, spec)
			if err != nil {
				t.Fatal(err)
			}
			checkChoice(t, measured, x, want)
		}
		m, err := infer.New(net, spec, opts...)
		if err != nil {
			t.Fatal(err)
		}
		algs := m.Algorithms(1)
		if algs == nil {
			t.Fatal("the network is not compiled")
		}
		if direct := zeros == 0 && nchwc.Fast(); (algs[0] == "direct") != direct {
			t.Fatalf("the stem runs %q; the channel-blocked layout expected: %v", algs[0], direct)
		}
		if zeros > 0 && len(m.Sparsity().SparseLayers()) == 0 {
			t.Fatal("no sparse layer at 95% zeros")
		}
		got := m.Probabilities(nil, x)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
				t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], want[i])
			}
		}
		one := checkWorkers(t, m, x, got)
		for i, v := range one {
			if d := math.Abs(float64(v - got[i])); d > 2e-5 {
				t.Fatalf("batch 1: probability %d: %v, in a batch of %d: %v", i, v, n, got[i])
			}
		}
	})
}

// checkWorkers checks that m gives got for x and the first image of x
// the probabilities of the same bits with one worker as with the pool's,
// and returns the first image's.
func checkWorkers(t *testing.T, m *infer.Model, x, got []float32) []float32 {
	t.Helper()
	one := m.Probabilities(nil, x[:infer.InputSize])
	prev := parallel.SetWorkers(1)
	serial := m.Probabilities(nil, x)
	oneSerial := m.Probabilities(nil, x[:infer.InputSize])
	parallel.SetWorkers(prev)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(serial[i]) {
			t.Fatalf("probability %d: %v with %d workers, %v with 1", i, got[i], prev, serial[i])
		}
	}
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(oneSerial[i]) {
			t.Fatalf("batch 1: probability %d: %v with %d workers, %v with 1", i, one[i], prev, oneSerial[i])
		}
	}
	return one
}

// TestPlanCompacted checks the compiled network of compacted model files
// (testdata/compact: per-layer widths, option-A channel maps; the shipped
// resnet20-compact: option B, widths 5 to 30; the shipped resnet20-block,
// compacted and with zero 16-channel filter vectors) against the
// evaluation graph under every nchwc implementation: the channel-blocked
// layout (nchwc's tail blocks; for the block file, the kernels that skip
// zero filter vectors) where it has fast kernels, bit for bit the same
// with 1 and 2 workers.
func TestPlanCompacted(t *testing.T) {
	names, _ := impl.List("nchwc")
	for _, path := range []string{
		filepath.Join("..", "..", "testdata", "compact", "resnet20_A.compact.safetensors"),
		filepath.Join("..", "pretrained", "models", "resnet20-compact.safetensors"),
		filepath.Join("..", "pretrained", "models", "resnet20-block.safetensors"),
	} {
		for _, kernels := range append([]string{impl.Generic}, names...) {
			t.Run(filepath.Base(path)+"/"+kernels, func(t *testing.T) {
				if !impl.Select("nchwc", kernels) {
					t.Skipf("this CPU has no %s", kernels)
				}
				defer impl.Reset("nchwc")
				m, err := infer.Load(path, models.Spec{}, infer.Dense())
				if err != nil {
					t.Fatal(err)
				}
				algs := m.Algorithms(1)
				if (algs[0] == "direct") != nchwc.Fast() {
					t.Fatalf("the stem runs %q with nchwc.Fast() %v", algs[0], nchwc.Fast())
				}
				if nchwc.Fast() && strings.Contains(path, "block") && !slices.Contains(algs, "direct-skip") {
					t.Fatalf("%s runs %v", filepath.Base(path), algs)
				}
				f, err := safetensors.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				net, err := m.Spec().Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := checkpoint.LoadWeights(f, net); err != nil {
					t.Fatal(err)
				}
				x := randomInputs(newRng(33), 3)
				want := evalLogitsSoftmax(net, x, 3)
				got := m.Probabilities(nil, x)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
						t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], want[i])
					}
				}
				checkWorkers(t, m, x, got)
			})
		}
	}
}

// TestPlanOfGraph checks that New compiles any network whose layer graph
// (models.NewGraph) has a shape the plans run, whatever its Go type: a
// hand-made Sequential of the VGG shape, against the evaluation graph.
func TestPlanOfGraph(t *testing.T) {
	rng := newRng(35)
	net := nn.NewSequential(
		nn.NewConv2d(3, 16, 3, nn.ConvOpts{Padding: 1}, rng), nn.NewBatchNorm2d(16), nn.ReLU{},
		nn.MaxPool2d{Kernel: 2, Stride: 2},
		nn.NewConv2d(16, 16, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng), nn.ReLU{},
		nn.MaxPool2d{Kernel: 4, Stride: 4},
		nn.Flatten{}, nn.NewLinear(16*4*4, 7, true, rng))
	randomize(net, rng)
	x := randomInputs(newRng(36), 3)
	want := evalLogitsSoftmax(net, x, 3)
	m, err := infer.New(net, models.Spec{NumClasses: 7})
	if err != nil {
		t.Fatal(err)
	}
	if algs := m.Algorithms(1); len(algs) != 2 {
		t.Fatalf("algorithms %v, want the two convolutions compiled", algs)
	}
	got := m.Probabilities(nil, x)
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
			t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], want[i])
		}
	}
}

// TestWinogradPlan checks the channel-blocked plans that run Winograd on
// their 3×3 stride-1 convolutions (nchwc.Winograd, where it pays) against
// the same networks on the direct kernels alone: within float32 rounding,
// bit for bit the same under every nchwc implementation and for 1, 2, 3
// and 5 workers; and that the shipped dense ResNet-20 runs its 16 stride-1
// convolutions with it, as its String says.
func TestWinogradPlan(t *testing.T) {
	if !nchwc.Fast() {
		t.Skip("nchwc has no fast kernels on this machine")
	}
	names, ok := impl.List("nchwc")
	for _, spec := range []models.Spec{
		{Model: "resnet20", Width: 1, Shortcut: "B"},
		{Model: "resnet20", Width: 0.75, Shortcut: "A"}, // 12, 24 and 48 channels: tail blocks
		{Model: "vgg16", Width: 0.25},
	} {
		net, err := spec.Build()
		if err != nil {
			t.Fatal(err)
		}
		randomize(net, newRng(41))
		x := randomInputs(newRng(42), 3)
		var first []float32
		for i, kernels := range names {
			if !ok[i] {
				continue
			}
			t.Run(fmt.Sprintf("%s_w%g_%s/%s", spec.Model, spec.Width, spec.Shortcut, kernels), func(t *testing.T) {
				impl.Select("nchwc", kernels)
				defer impl.Reset("nchwc")
				m, err := infer.New(net, spec, infer.Dense())
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(m.Algorithms(1), "winograd") {
					t.Fatalf("algorithms %v: no winograd", m.Algorithms(1))
				}
				d, ok := infer.NewDirect(net, spec)
				if !ok {
					t.Fatal("no direct plan")
				}
				if slices.Contains(d.Algorithms(1), "winograd") {
					t.Fatalf("direct plan: algorithms %v", d.Algorithms(1))
				}
				got, want := m.Probabilities(nil, x), d.Probabilities(nil, x)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
						t.Fatalf("probability %d: Winograd %v, direct %v", i, got[i], want[i])
					}
				}
				checkWorkers(t, m, x, got)
				for _, w := range []int{3, 5} { // bands of tiles, some empty
					for _, split := range []int{0, 1, 2, 4} { // 0: all the workers
						ms, ok := infer.WithSplit(m, split)
						if !ok {
							t.Fatalf("%s: not on the direct plan", m)
						}
						prev := parallel.SetWorkers(w)
						one := ms.Probabilities(nil, x[:infer.InputSize])
						two := ms.Probabilities(nil, x[:2*infer.InputSize])
						parallel.SetWorkers(prev)
						if !slices.Equal(one, got[:len(one)]) || !slices.Equal(two, got[:len(two)]) {
							t.Fatalf("%d workers, split %d, one and two images: %v %v, batch on %d: %v", w, split, one, two, prev, got[:len(two)])
						}
					}
				}
				if first == nil {
					first = got
				} else if !slices.Equal(got, first) {
					t.Fatalf("probabilities %v under %s, %v under %s", got, kernels, first, names[0])
				}
			})
		}
	}
	m, err := infer.Load(filepath.Join("..", "pretrained", "models", "resnet20-dense.safetensors"), models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.String(); !strings.Contains(s, "5 direct, 16 winograd") {
		t.Fatalf("the dense ResNet-20: %s", s)
	}
}

// TestWinogradOnSkippedVectors checks the choice between the direct
// kernels skipping zero filter vectors and Winograd for a ResNet-20
// whose 3×3 stride-1 convolutions have zero 16-channel filter vectors
// (the same input channels and taps in every block of output channels,
// in fractions from none to most): each layer runs as the cost rule
// says (the dense ones too) (its nonzero vectors times 16 lanes per output pixel against
// WinoMACCost per product multiply-add plus WinoTransformCost per block
// and tile, in and out), both choices occur, and the plan computes what
// the evaluation graph computes, the same bits with any number of
// workers and for one image as in a batch.
func TestWinogradOnSkippedVectors(t *testing.T) {
	if !nchwc.Fast() {
		t.Skip("nchwc has no fast kernels on this machine")
	}
	spec := models.Spec{Model: "resnet20", Width: 1, Shortcut: "B"}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := newRng(51)
	randomize(net, rng)
	fractions := []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6}
	var want []string
	i := 0
	for _, p := range net.Params() {
		w := p.T
		if w.Rank() != 4 {
			continue
		}
		cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
		if k != 3 || p.Name == "conv1.weight" || p.Name == "layer2.0.conv1.weight" || p.Name == "layer3.0.conv1.weight" {
			want = append(want, "") // the stem, the strided and the 1×1 convolutions: not checked
			continue
		}
		// Zero a fraction of the (input channel, tap) positions in every
		// output channel.
		frac := fractions[i%len(fractions)]
		i++
		nz := 0
		for pos := range cin * 9 {
			if rng.Float64() < frac {
				for co := range cout {
					w.Data[co*cin*9+pos] = 0
				}
			} else {
				nz++
			}
		}
		hw := map[byte]int{'1': 32, '2': 16, '3': 8}[p.Name[5]]
		tiles := (hw + 1) / 2 * ((hw + 1) / 2)
		pcout := (cout + 15) / 16 * 16
		direct := float64(nz*pcout) * float64(hw*hw)
		wino := float64(16*cin*pcout*tiles)*infer.WinoMACCost + float64(tiles*((cin+15)/16+pcout/16))*infer.WinoTransformCost
		switch {
		case math.Abs(wino-direct) < 0.02*direct:
			want = append(want, "") // too close to call in float arithmetic
		case wino < direct:
			want = append(want, "winograd")
		default:
			want = append(want, "direct-skip")
		}
	}
	m, err := infer.New(net, spec, infer.Dense())
	if err != nil {
		t.Fatal(err)
	}
	algs := m.Algorithms(1)
	if len(algs) != len(want) {
		t.Fatalf("algorithms %v for %d convolutions", algs, len(want))
	}
	skipWino, skip := 0, 0
	for i, a := range algs {
		if want[i] != "" && a != want[i] {
			t.Errorf("convolution %d runs %s, the rule says %s (algorithms %v)", i, a, want[i], algs)
		}
		switch {
		case a == "direct-skip":
			skip++
		case a == "winograd" && want[i] == "winograd":
			skipWino++
		}
	}
	t.Logf("algorithms %v", algs)
	if skip == 0 || skipWino == 0 {
		t.Fatalf("algorithms %v: not both choices", algs)
	}
	const n = 3
	x := randomInputs(newRng(52), n)
	wantP := evalLogitsSoftmax(net, x, n)
	got := m.Probabilities(nil, x)
	for i := range wantP {
		if d := math.Abs(float64(got[i] - wantP[i])); d > 2e-5 {
			t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], wantP[i])
		}
	}
	one := checkWorkers(t, m, x, got)
	if !slices.Equal(one, got[:len(one)]) {
		t.Fatalf("one image: %v, in a batch: %v", one, got[:len(one)])
	}
}

// TestPlanReordersTrunks checks a ResNet whose blocks pass trunk channels
// through (zero filters in their second convolution, as compaction leaves
// them) on the channel-blocked plan: it moves those channels into the
// trunk's last block of 16 so that Winograd skips that block's products
// (one block in each of two layers, 8 of 24 and 16 of 48 channels
// scattered among the others), and computes what the evaluation graph
// computes, the same bits with any number of workers.
func TestPlanReordersTrunks(t *testing.T) {
	if !nchwc.Fast() {
		t.Skip("nchwc has no fast kernels on this machine")
	}
	spec := models.Spec{Model: "resnet20", Width: 0.75, Shortcut: "B"} // trunks of 12, 24 and 48 channels
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	randomize(net, newRng(61))
	zeroed := map[string][]int{
		"layer2.1.conv2.weight": {1, 3, 5, 7, 9, 11, 13, 15},
		"layer3.1.conv2.weight": {0, 2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 47},
	}
	for _, p := range net.Params() {
		chans, ok := zeroed[p.Name]
		if !ok {
			continue
		}
		n := len(p.T.Data) / p.T.Dim(0)
		for _, c := range chans {
			clear(p.T.Data[c*n : (c+1)*n])
		}
		delete(zeroed, p.Name)
	}
	if len(zeroed) != 0 {
		t.Fatalf("no layers %v", zeroed)
	}
	m, err := infer.New(net, spec, infer.Dense())
	if err != nil {
		t.Fatal(err)
	}
	if n := infer.SkippedBlocks(m); n != 2 {
		t.Fatalf("%d blocks of zero filters skipped, want 2 (algorithms %v)", n, m.Algorithms(1))
	}
	const n = 3
	x := randomInputs(newRng(62), n)
	want := evalLogitsSoftmax(net, x, n)
	got := m.Probabilities(nil, x)
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 2e-5 {
			t.Fatalf("probability %d: plan %v, evaluation graph %v", i, got[i], want[i])
		}
	}
	checkWorkers(t, m, x, got)
}
