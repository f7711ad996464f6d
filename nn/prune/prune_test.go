package prune

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

func newModel(t *testing.T, name string, opts ...models.Option) nn.Module {
	t.Helper()
	m, err := models.New(name, 10, rand.New(rand.NewPCG(1, 2)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCountDense checks the counts of the dense networks against
// nn.NumParams and the multiply-adds the literature reports: 40.55M for
// ResNet-20, 125.49M for ResNet-56 (Li et al. 2017: 1.25E8), 313.2M for
// VGG-16 (3.13E8) and 0.56G for kuangliu's ResNet-18.
func TestCountDense(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flops int64
	}{{"resnet20", 40551040}, {"resnet56", 125485696}, {"vgg16", 313201664}, {"resnet18", 555422720}} {
		m := newModel(t, tc.name)
		c, err := CountModel(m, 32, 32)
		if err != nil {
			t.Fatal(err)
		}
		if c.Params != nn.NumParams(m) || c.ParamsTotal != c.Params {
			t.Errorf("%s: params %d of %d, NumParams %d", tc.name, c.Params, c.ParamsTotal, nn.NumParams(m))
		}
		if c.FLOPs != tc.flops || c.FLOPsTotal != tc.flops {
			t.Errorf("%s: FLOPs %d of %d, want %d", tc.name, c.FLOPs, c.FLOPsTotal, tc.flops)
		}
		if c.Channels != c.ChannelsTotal {
			t.Errorf("%s: %d of %d channels kept in a dense network", tc.name, c.Channels, c.ChannelsTotal)
		}
	}
}

func TestAnalyzeRejects(t *testing.T) {
	lm := models.NewLanguageModel(10, 4, 4, 1, 0, rand.New(rand.NewPCG(1, 1)))
	if _, err := Analyze(lm, 32, 32); err == nil {
		t.Error("Analyze accepted a language model")
	}
	if _, err := Analyze(newModel(t, "resnet20"), 0, 32); err == nil {
		t.Error("Analyze accepted a 0×32 input")
	}
}

// zeroFilter zeroes filter c of conv and sets the batch norm after it to
// gamma, beta.
func zeroFilter(conv *nn.Conv2d, bn *nn.BatchNorm2d, c int, gamma, beta float32) {
	n := conv.Weight.Numel() / conv.Weight.Dim(0)
	clear(conv.Weight.Data[c*n : (c+1)*n])
	if conv.Bias != nil {
		conv.Bias.Data[c] = 0
	}
	bn.Weight.Data[c], bn.Bias.Data[c] = gamma, beta
}

func layerCount(t *testing.T, c Count, name string) LayerCount {
	t.Helper()
	i := slices.IndexFunc(c.Layers, func(l LayerCount) bool { return l.Name == name })
	if i < 0 {
		t.Fatalf("no layer %s", name)
	}
	return c.Layers[i]
}

// graphNode returns the node called name of m's layer graph.
func graphNode(t *testing.T, m nn.Module, name string) *models.Node {
	t.Helper()
	g, err := models.NewGraph(m, []int{3, 32, 32})
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Nodes {
		if g.Nodes[i].Name == name {
			return &g.Nodes[i]
		}
	}
	t.Fatalf("no node %s in the graph", name)
	return nil
}

// TestRemovableInternal checks the rules for a channel inside a block: a
// zero filter whose batch norm gives a constant ≤ 0 before the ReLU goes,
// a positive constant stays, γ = β = 0 suffices with any filter, and a
// channel that no kept filter reads goes.
func TestRemovableInternal(t *testing.T) {
	m := newModel(t, "resnet20", models.WithWidth(0.5))
	conv1, bn1 := graphNode(t, m, "layer1.0.conv1").Conv, graphNode(t, m, "layer1.0.bn1").Norm
	zeroFilter(conv1, bn1, 0, 1, -0.5) // constant −0.5: dead after ReLU
	zeroFilter(conv1, bn1, 1, 1, 0.5)  // constant 0.5: alive
	bn1.RunningMean.Data[2] = 3        // γ·(0 − 3)/√(1+ε) + β < 0
	zeroFilter(conv1, bn1, 2, 1, 2)
	bn := graphNode(t, m, "layer1.1.bn1").Norm
	bn.Weight.Data[3], bn.Bias.Data[3] = 0, 0 // nonzero filter, γ = β = 0
	// Channel 4 of block 2's inner space: no filter of conv2 reads it.
	w := graphNode(t, m, "layer1.2.conv2").Conv.Weight
	cin, kk := w.Dim(1), 9
	for o := range w.Dim(0) {
		clear(w.Data[(o*cin+4)*kk : (o*cin+5)*kk])
	}
	c, err := CountModel(m, 32, 32)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in, out int
	}{
		{"layer1.0.conv1", 8, 6}, {"layer1.0.conv2", 6, 8},
		{"layer1.1.conv1", 8, 7}, {"layer1.1.conv2", 7, 8},
		{"layer1.2.conv1", 8, 7}, {"layer1.2.conv2", 7, 8},
	} {
		l := layerCount(t, c, tc.name)
		if l.In != tc.in || l.Out != tc.out {
			t.Errorf("%s: in %d out %d, want %d, %d", tc.name, l.In, l.Out, tc.in, tc.out)
		}
		if wantF := int64(tc.in * tc.out * 9 * 32 * 32); l.FLOPs != wantF {
			t.Errorf("%s: %d FLOPs, want %d", tc.name, l.FLOPs, wantF)
		}
	}
	if c.ChannelsTotal-c.Channels != 4 {
		t.Errorf("%d channels removed, want 4", c.ChannelsTotal-c.Channels)
	}
}

// TestRemovableStream checks a residual-stream channel: it goes only when
// the stem and every block of the stage write zero to it, and with
// option A the channel it is copied to in the next stage stays unless its
// own writers are zero too.
func TestRemovableStream(t *testing.T) {
	for _, kind := range []models.ShortcutKind{models.ShortcutA, models.ShortcutB} {
		m := newModel(t, "resnet20", models.WithWidth(0.5), models.WithShortcut(kind))
		const c, blocks = 5, 3
		zeroFilter(graphNode(t, m, "conv1").Conv, graphNode(t, m, "bn1").Norm, c, 0, 0)
		for i := range blocks {
			p := fmt.Sprintf("layer1.%d.", i)
			zeroFilter(graphNode(t, m, p+"conv2").Conv, graphNode(t, m, p+"bn2").Norm, c, 0, 0)
			count, err := CountModel(m, 32, 32)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if i == blocks-1 {
				want = 1
			}
			if got := count.ChannelsTotal - count.Channels; got != want {
				t.Errorf("%v: after zeroing %d blocks' filter: %d channels removed, want %d", kind, i+1, got, want)
			}
		}
		if kind != models.ShortcutA {
			continue
		}
		// Stage 2: channel Lo+c receives the (now zero) stage-1 channel.
		d := graphNode(t, m, "layer2.0.shortcut").Lo + c
		for i := range blocks {
			p := fmt.Sprintf("layer2.%d.", i)
			zeroFilter(graphNode(t, m, p+"conv2").Conv, graphNode(t, m, p+"bn2").Norm, d, 0, 0)
		}
		count, _ := CountModel(m, 32, 32)
		if got := count.ChannelsTotal - count.Channels; got != 2 {
			t.Errorf("A: %d channels removed after zeroing stage 2's channel %d, want 2", got, d)
		}
		if l := layerCount(t, count, "layer3.0.conv1"); l.In != l.InTotal-1 {
			t.Errorf("layer3.0.conv1 reads %d of %d channels, want one fewer", l.In, l.InTotal)
		}
	}
}

// TestFiltersFraction prunes half the block-internal channels of a
// ResNet and checks the mask, the zeroed tensors and the counts.
func TestFiltersFraction(t *testing.T) {
	m := newModel(t, "resnet20", models.WithWidth(0.5))
	before, _ := CountModel(m, 32, 32)
	mask, err := Filters(m, Options{Fraction: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if mask.Len() != 4*3+8*3+16*3 {
		t.Errorf("pruned %d filters", mask.Len())
	}
	filters := mask.Filters()
	if len(filters) != 9 {
		t.Errorf("pruned filters of %d layers, want the 9 first convolutions of the blocks: %v", len(filters), filters)
	}
	conv, bn := graphNode(t, m, "layer2.1.conv1").Conv, graphNode(t, m, "layer2.1.bn1").Norm
	idx := filters["layer2.1.conv1"]
	if len(idx) != 8 {
		t.Fatalf("layer2.1.conv1: pruned %v, want 8 of 16", idx)
	}
	// The pruned filters were the smallest.
	w := conv.Weight
	n := w.Numel() / w.Dim(0)
	norm := func(o int) (s float64) {
		for _, v := range w.Data[o*n : (o+1)*n] {
			s += float64(v) * float64(v)
		}
		return s
	}
	for _, o := range idx {
		if norm(o) != 0 || bn.Weight.Data[o] != 0 || bn.Bias.Data[o] != 0 {
			t.Errorf("layer2.1: channel %d not zeroed", o)
		}
	}
	after, _ := CountModel(m, 32, 32)
	if after.Channels != before.Channels-mask.Len() {
		t.Errorf("%d channels left of %d after pruning %d", after.Channels, before.Channels, mask.Len())
	}
	// Apply puts zeroed entries back to zero after an update.
	bn.Bias.Data[idx[0]] = 1
	w.Data[idx[1]*n] = 1
	mask.Apply()
	if bn.Bias.Data[idx[0]] != 0 || w.Data[idx[1]*n] != 0 {
		t.Error("Apply left pruned entries non-zero")
	}
}

// TestFiltersMultiple prunes each channel space down to a multiple of 8
// live channels: the smallest filters go, spaces already at a multiple
// or with fewer than 8 live channels keep theirs.
func TestFiltersMultiple(t *testing.T) {
	m := newModel(t, "resnet20")
	zero := func(layer string, n int) {
		w := graphNode(t, m, layer).Conv.Weight
		k := w.Numel() / w.Dim(0)
		clear(w.Data[:n*k]) // the first n filters
	}
	zero("layer1.1.conv1", 3)  // 13 live of 16: down to 8
	zero("layer1.2.conv1", 11) // 5 live: kept
	zero("layer2.0.conv1", 6)  // 26 live of 32: down to 24
	w := graphNode(t, m, "layer1.1.conv1").Conv.Weight
	k := w.Numel() / w.Dim(0)
	norms := make([]float64, w.Dim(0))
	for o := range norms {
		for _, v := range w.Data[o*k : (o+1)*k] {
			norms[o] += float64(v) * float64(v)
		}
	}
	mask, err := Filters(m, Options{Multiple: 8, Residual: true})
	if err != nil {
		t.Fatal(err)
	}
	got := mask.Filters()
	want := map[string]int{"layer1.1.conv1": 8, "layer1.2.conv1": 11, "layer2.0.conv1": 8}
	for name, n := range want {
		if len(got[name]) != n {
			t.Errorf("%s: pruned %d filters %v, want %d", name, len(got[name]), got[name], n)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s pruned (%v): its space had a multiple of 8 live channels", name, got[name])
		}
	}
	// layer1.1.conv1: the 3 zero filters and the 5 smallest live ones.
	pruned := map[int]bool{}
	for _, o := range got["layer1.1.conv1"] {
		pruned[o] = true
	}
	for o := range norms {
		for p := range norms {
			if pruned[o] && !pruned[p] && norms[o] > norms[p] {
				t.Fatalf("layer1.1.conv1: pruned filter %d (norm² %g) kept %d (%g)", o, norms[o], p, norms[p])
			}
		}
	}
	c, _ := CountModel(m, 32, 32)
	// The trunks (the stem writes layer1's), then the blocks' inner spaces.
	if want := 16 + 32 + 64 + (16 + 8 + 5) + (24 + 32 + 32) + 3*64; c.Channels != want {
		t.Errorf("%d channels left, want %d", c.Channels, want)
	}
	if _, err := Filters(m, Options{Multiple: -1}); err == nil {
		t.Error("a negative multiple accepted")
	}
}

// TestFiltersFLOPs prunes to a FLOPs target, with and without the
// residual streams.
func TestFiltersFLOPs(t *testing.T) {
	for _, residual := range []bool{false, true} {
		for _, name := range []string{"resnet20", "vgg16"} {
			m := newModel(t, name, models.WithWidth(0.25))
			before, _ := CountModel(m, 32, 32)
			mask, err := Filters(m, Options{KeepFLOPs: 0.6, Residual: residual})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := CountModel(m, 32, 32)
			r := float64(after.FLOPs) / float64(before.FLOPs)
			if r > 0.6 || r < 0.45 {
				t.Errorf("%s residual=%v: %.3f of the FLOPs left, want at most 0.6 and near it", name, residual, r)
			}
			if after.Channels != before.Channels-countUnits(t, mask, m) {
				t.Errorf("%s: %d channels left of %d", name, after.Channels, before.Channels)
			}
		}
	}
	m := newModel(t, "resnet20", models.WithWidth(0.25))
	if _, err := Filters(m, Options{KeepFLOPs: 0.01}); err == nil {
		t.Error("an unreachable FLOPs target passed")
	}
	for _, opt := range []Options{{Fraction: 1}, {Fraction: -0.1}, {KeepFLOPs: 2}} {
		if _, err := Filters(m, opt); err == nil {
			t.Errorf("%+v passed", opt)
		}
	}
}

// countUnits returns the number of channels the mask kills: filters of
// one unit share their channel index and space.
func countUnits(t *testing.T, mask *Mask, m nn.Module) int {
	t.Helper()
	g, err := Analyze(m, 32, 32)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[[2]int]bool{}
	for _, f := range mask.filters {
		for _, l := range g.layers {
			if l.name == f.l.name {
				dead[[2]int{l.out.space.id, f.c}] = true
			}
		}
	}
	return len(dead)
}

// TestPrunedLogits checks that pruning the residual streams too leaves
// channels that are exactly zero: the logits do not depend on anything
// the removed channels' readers do with them.
func TestPrunedLogits(t *testing.T) {
	m := newModel(t, "resnet20", models.WithWidth(0.25))
	if _, err := Filters(m, Options{Fraction: 0.5, Residual: true}); err != nil {
		t.Fatal(err)
	}
	m.SetTraining(false)
	rng := rand.New(rand.NewPCG(3, 4))
	x := autograd.New(2, 3, 32, 32)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64())
	}
	ctx := &autograd.Context{NoGrad: true}
	y0 := slices.Clone(m.Forward(x.In(ctx)).Data)
	g, _ := Analyze(m, 32, 32)
	// Change every reader's weights on removed input channels.
	for _, l := range g.layers {
		keep := l.in.space.keep
		if l.conv == nil || l.in.space.input {
			continue
		}
		w := l.conv.Weight
		cin := w.Dim(1)
		kk := w.Numel() / (w.Dim(0) * cin)
		for o := range w.Dim(0) {
			for i := range cin {
				if !keep[i] {
					for j := range kk {
						w.Data[(o*cin+i)*kk+j] = float32(rng.NormFloat64())
					}
				}
			}
		}
	}
	y1 := m.Forward(x.In(ctx)).Data
	if !slices.Equal(y0, y1) {
		t.Errorf("logits changed when readers of removed channels changed:\n%v\n%v", y0, y1)
	}
}

func TestNewMask(t *testing.T) {
	m := newModel(t, "vgg16", models.WithWidth(0.125))
	mask, err := Filters(m, Options{Fraction: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, "vgg16", models.WithWidth(0.125))
	mask2, err := NewMask(m2, mask.Filters())
	if err != nil {
		t.Fatal(err)
	}
	mask2.Apply()
	for i, p := range m.Params() {
		q := m2.Params()[i]
		if !slices.Equal(p.T.Data, q.T.Data) {
			t.Errorf("%s differs after applying the restored mask", p.Name)
		}
	}
	for _, bad := range []map[string][]int{{"features.1": {0}}, {"features.0": {8}}, {"features.0": {-1}}} {
		if _, err := NewMask(m2, bad); err == nil {
			t.Errorf("NewMask accepted %v", bad)
		}
	}
}
