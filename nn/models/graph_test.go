package models

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// graphTensors returns the state_dict names and tensors the nodes of g
// refer to.
func graphTensors(g *Graph) map[string]*autograd.Tensor {
	ts := map[string]*autograd.Tensor{}
	add := func(n *Node, m nn.Module) {
		for _, p := range nn.StateDict(m) {
			ts[n.Param(p.Name)] = p.T
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch n.Op {
		case OpConv:
			add(n, n.Conv)
		case OpBatchNorm:
			add(n, n.Norm)
		case OpLinear:
			add(n, n.Linear)
		case OpEmbedding:
			add(n, n.Embedding)
		case OpLSTM:
			add(n, n.LSTM)
		}
	}
	return ts
}

// TestGraphCoversStateDict checks, for every network New builds (both
// shortcuts, compacted widths) and the language model, that the graph's
// nodes name exactly the tensors of the state dict, read only earlier
// nodes, and end in the logits (nn/infer's TestPrepareMatchesForward runs
// the graphs).
func TestGraphCoversStateDict(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 0))
	type tc struct {
		name string
		m    nn.Module
	}
	var cases []tc
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"resnet20", []Option{WithWidth(0.25)}},
		{"resnet20", []Option{WithWidth(0.25), WithShortcut(ShortcutB)}},
		{"resnet32", []Option{WithWidth(0.25)}},
		{"resnet18", []Option{WithWidth(1.0 / 16)}},
		{"resnet34", []Option{WithWidth(1.0 / 16)}},
		{"vgg16", []Option{WithWidth(1.0 / 16)}},
	} {
		m, err := New(c.name, 7, rng, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{c.name, m})
	}
	w := &Widths{Stem: 3, Stages: [][]BlockWidths{
		{{Inner: 2, Out: 3}}, {{Inner: 5, Out: 4, Pad: []int{-1, 0, 3}}}, {{Inner: 6, Out: 7, Pad: []int{6, 1, 2, -1}}}}}
	compact, err := New("resnet8", 7, rng, WithWidths(w))
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, tc{"resnet8 compacted", compact}, tc{"lm", NewLanguageModel(11, 4, 5, 2, 0.5, rng)})
	for _, c := range cases {
		g, err := NewGraph(c.m, []int{3, 32, 32})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ts := graphTensors(g)
		sd := nn.StateDict(c.m)
		if len(ts) != len(sd) {
			t.Errorf("%s: the graph names %d tensors, the state dict has %d", c.name, len(ts), len(sd))
		}
		for _, p := range sd {
			if ts[p.Name] != p.T {
				t.Errorf("%s: %s is not the tensor of the graph's node", c.name, p.Name)
			}
		}
		names := map[string]bool{}
		for i, n := range g.Nodes {
			for _, in := range n.Inputs {
				if in != GraphInput && (in < 0 || in >= i) {
					t.Errorf("%s: node %d (%s) reads node %d", c.name, i, n.Name, in)
				}
			}
			if names[n.Name] {
				t.Errorf("%s: two nodes are called %q", c.name, n.Name)
			}
			names[n.Name] = true
		}
		last := g.Nodes[len(g.Nodes)-1]
		if want := []int{-1, 7}; c.name != "lm" && !slices.Equal(last.Shape, want) {
			t.Errorf("%s: output shape %v, want %v", c.name, last.Shape, want)
		}
	}
}

func TestGraphErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	_, err := NewGraph(nn.NewSequential(nn.NewConv2d(3, 4, 3, nn.ConvOpts{}, rng), nn.NewEmbedding(3, 2, rng)), []int{3, 8, 8})
	var u *UnsupportedError
	if !errors.As(err, &u) || u.Path != "1" {
		t.Errorf("an embedding in a Sequential: error %v, want an UnsupportedError at 1", err)
	}
	for _, c := range []struct {
		m    nn.Module
		in   []int
		want string
	}{
		{nn.NewSequential(nn.NewConv2d(4, 4, 3, nn.ConvOpts{}, rng)), []int{3, 8, 8}, "0: a 3x3 convolution of 4 channels"},
		{nn.NewSequential(nn.MaxPool2d{Kernel: 8, Stride: 8}), []int{3, 4, 4}, "too small"},
		{nn.NewSequential(), []int{3, 0, 4}, "input shape [3 0 4]"},
	} {
		if _, err := NewGraph(c.m, c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}
