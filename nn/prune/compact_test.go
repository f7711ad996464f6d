package prune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// randomize gives every batch norm of m random statistics and affine
// parameters, so the constants of dead channels are not trivial.
func randomize(m nn.Module, rng *rand.Rand) {
	for _, p := range nn.StateDict(m) {
		switch {
		case p.Int64:
		case hasSuffix(p.Name, "running_var"):
			for i := range p.T.Data {
				p.T.Data[i] = 0.5 + rng.Float32()
			}
		case hasSuffix(p.Name, "running_mean"), p.T.Rank() == 1:
			for i := range p.T.Data {
				p.T.Data[i] = float32(rng.NormFloat64() * 0.3)
			}
		}
	}
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// zeroGroups zeroes random groups of m in the ways structured sparsity
// leaves them: filters with their batch norm (γ = β = 0), filters alone
// (the batch norm's constant decides), batch norms alone (γ = β = 0),
// input channels of a convolution, and whole residual-stream channels.
func zeroGroups(t *testing.T, m nn.Module, rng *rand.Rand) {
	g, err := newGraph(m, 32, 32)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range g.layers {
		if l.conv == nil {
			continue
		}
		cout := l.conv.Weight.Dim(0)
		for o := range cout {
			switch r := rng.Float64(); {
			case r < 0.25:
				zeroFilter(l.conv, l.bn, o, 0, 0)
			case r < 0.35:
				zeroFilter(l.conv, l.bn, o, l.bn.Weight.Data[o], l.bn.Bias.Data[o])
			case r < 0.4:
				l.bn.Weight.Data[o], l.bn.Bias.Data[o] = 0, 0
			}
		}
		if !l.in.space.input && rng.Float64() < 0.5 {
			w := l.conv.Weight
			cin := w.Dim(1)
			kk := w.Numel() / (cout * cin)
			i := rng.IntN(cin)
			for o := range cout {
				clear(w.Data[(o*cin+i)*kk : (o*cin+i+1)*kk])
			}
		}
	}
	// Whole residual-stream channels: every writer of the space.
	for _, s := range g.spaces {
		if s.input {
			continue
		}
		c := rng.IntN(s.c)
		for _, n := range s.nodes {
			for _, tm := range n.terms {
				if tm.kind == termConv {
					zeroFilter(tm.layer.conv, tm.layer.bn, c, 0, 0)
				}
			}
		}
	}
}

func randomInput(rng *rand.Rand, n int) *autograd.Tensor {
	x := autograd.New(n, 3, 32, 32)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64())
	}
	return x
}

func logits(m nn.Module, x *autograd.Tensor) []float32 {
	m.SetTraining(false)
	return m.Forward(x.In(&autograd.Context{NoGrad: true})).Data
}

// closeLogits reports the largest difference between a and b relative to
// the largest |a|.
func closeLogits(a, b []float32) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		s = math.Max(s, math.Abs(float64(a[i])))
	}
	return d / math.Max(s, 1)
}

// TestCompactExact compacts random networks with randomly zeroed groups:
// the logits stay the same, the compacted network has the parameters and
// FLOPs Count promised, nothing is left to remove, and its widths rebuild
// it through models.New.
func TestCompactExact(t *testing.T) {
	cases := []struct {
		name  string
		width float64
		opts  []models.Option
	}{
		{"resnet20", 0.5, nil},
		{"resnet20", 0.5, []models.Option{models.WithShortcut(models.ShortcutB)}},
		{"resnet18", 0.125, nil},
		{"vgg16", 0.125, nil},
	}
	for ci, tc := range cases {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s-%d-%d", tc.name, ci, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				m, err := models.New(tc.name, 10, rng, append(tc.opts, models.WithWidth(tc.width))...)
				if err != nil {
					t.Fatal(err)
				}
				randomize(m, rng)
				zeroGroups(t, m, rng)
				before, err := CountModel(m, 32, 32)
				if err != nil {
					t.Fatal(err)
				}
				if before.Channels >= before.ChannelsTotal {
					t.Fatalf("nothing to remove: %d of %d channels", before.Channels, before.ChannelsTotal)
				}
				x := randomInput(rng, 3)
				y := logits(m, x)
				c, w, err := Compact(m)
				if err != nil {
					t.Fatal(err)
				}
				yc := logits(c, x)
				d := closeLogits(y, yc)
				t.Logf("logits: max difference %.2g (relative to max(1, max |logit|))", d)
				if d > 1e-5 {
					t.Errorf("compacted logits differ by %.3g:\n%v\n%v", d, y, yc)
				}
				after, err := CountModel(c, 32, 32)
				if err != nil {
					t.Fatal(err)
				}
				if nn.NumParams(c) != before.Params || after.ParamsTotal != before.Params || after.FLOPsTotal != before.FLOPs || after.ChannelsTotal != before.Channels {
					t.Errorf("compacted: %d parameters (count %d), FLOPs %d (count %d), channels %d (count %d)",
						nn.NumParams(c), before.Params, after.FLOPsTotal, before.FLOPs, after.ChannelsTotal, before.Channels)
				}
				if after.Channels != after.ChannelsTotal {
					// Only the zero channels kept so that no space is empty
					// may remain.
					t.Logf("%d channels still removable (kept to leave no space empty)", after.ChannelsTotal-after.Channels)
				}
				opts := append(tc.opts, models.WithWidths(w), models.WithWidth(tc.width))
				r, err := models.New(tc.name, 10, rand.New(rand.NewPCG(9, 9)), opts...)
				if err != nil {
					t.Fatal(err)
				}
				sd, rd := nn.StateDict(c), nn.StateDict(r)
				if len(sd) != len(rd) {
					t.Fatalf("rebuilt network has %d tensors, the compacted one %d", len(rd), len(sd))
				}
				for i := range sd {
					if sd[i].Name != rd[i].Name || fmt.Sprint(sd[i].T.Shape()) != fmt.Sprint(rd[i].T.Shape()) {
						t.Fatalf("tensor %d: %s %v rebuilt as %s %v", i, sd[i].Name, sd[i].T.Shape(), rd[i].Name, rd[i].T.Shape())
					}
					copy(rd[i].T.Data, sd[i].T.Data)
				}
				if d := closeLogits(yc, logits(r, x)); d != 0 {
					t.Errorf("the network rebuilt from the widths computes other logits (%.3g)", d)
				}
			})
		}
	}
}

// TestCompactAllDead zeroes every channel of a block's inner space: one
// zero channel stays, and the logits do not change.
func TestCompactAllDead(t *testing.T) {
	m := newModel(t, "resnet20", models.WithWidth(0.25))
	randomize(m, rand.New(rand.NewPCG(1, 1)))
	conv, bn := graphNode(t, m, "layer2.1.conv1").Conv, graphNode(t, m, "layer2.1.bn1").Norm
	for o := range conv.Weight.Dim(0) {
		zeroFilter(conv, bn, o, 0, 0)
	}
	x := randomInput(rand.New(rand.NewPCG(2, 2)), 2)
	y := logits(m, x)
	c, w, err := Compact(m)
	if err != nil {
		t.Fatal(err)
	}
	if w.Stages[1][1].Inner != 1 {
		t.Errorf("inner width %d, want 1", w.Stages[1][1].Inner)
	}
	if d := closeLogits(y, logits(c, x)); d > 1e-5 {
		t.Errorf("logits differ by %.3g", d)
	}
}
