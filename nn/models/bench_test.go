package models_test

import (
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// benchCIFAR times one training step (forward, cross-entropy, backward) of
// the named model on a batch of CIFAR-sized images.
func benchCIFAR(b *testing.B, name string, batch int) {
	rng := newRng(1)
	m, err := models.New(name, 10, rng)
	if err != nil {
		b.Fatal(err)
	}
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x := autograd.RandN(rng, batch, 3, 32, 32).In(ctx)
	labels := make([]int, batch)
	for i := range labels {
		labels[i] = i % 10
	}
	b.ResetTimer()
	for range b.N {
		nn.ZeroGrad(m)
		autograd.CrossEntropy(m.Forward(x), labels).Backward()
		ctx.Arena.Reset()
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N*batch)*1e3, "ms/image")
}

func BenchmarkResNet20Step32(b *testing.B) { benchCIFAR(b, "resnet20", 32) }

func BenchmarkVGG16Step32(b *testing.B) { benchCIFAR(b, "vgg16", 32) }

// BenchmarkLanguageModelStep times one truncated-BPTT step of the paper's
// PTB model: 35 steps × 20 columns, vocabulary 10,000, 300 units.
func BenchmarkLanguageModelStep(b *testing.B) {
	const vocab, steps, batch = 10000, 35, 20
	rng := newRng(2)
	m := models.NewLanguageModel(vocab, 300, 300, 1, 0.5, rng)
	ids := make([]int, steps*batch)
	targets := make([]int, steps*batch)
	for i := range ids {
		ids[i], targets[i] = rng.IntN(vocab), rng.IntN(vocab)
	}
	state := m.RNN.ZeroState(nil, batch)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	b.ResetTimer()
	for range b.N {
		nn.ZeroGrad(m)
		logits, final := m.Run(ctx, ids, steps, batch, state)
		autograd.CrossEntropy(logits, targets).Backward()
		state = final.Detach()
		ctx.Arena.Reset()
	}
}
