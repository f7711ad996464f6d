package autograd_test

import (
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

func TestEmbeddingValues(t *testing.T) {
	w := autograd.FromSlice([]float32{0, 1, 10, 11, 20, 21}, 3, 2)
	y := autograd.Embedding(nil, w, []int{2, 0, 2})
	if got, want := y.Data, []float32{20, 21, 0, 1, 20, 21}; !equal(got, want) {
		t.Errorf("Embedding = %v, want %v", got, want)
	}
	if got := y.Shape(); !equal(got, []int{3, 2}) {
		t.Errorf("shape = %v, want [3 2]", got)
	}
	if got := autograd.Embedding(nil, w, nil).Shape(); !equal(got, []int{0, 2}) {
		t.Errorf("empty shape = %v, want [0 2]", got)
	}
}

func TestEmbeddingGradients(t *testing.T) {
	rng := newRNG(30)
	w := param(rng, 6, 4)
	ids := []int{3, 1, 3, 5, 3, 0, 1}
	f := func() *autograd.Tensor { return autograd.Embedding(nil, w, ids) }
	if err := gradcheck.Check(f, []*autograd.Tensor{w}, gradcheck.Options{}); err != nil {
		t.Fatal(err)
	}
	// Repeated ids accumulate; unused rows get zero.
	w.Grad = nil
	g := make([]float32, len(ids)*4)
	for i := range g {
		g[i] = float32(i)
	}
	autograd.Embedding(nil, w, ids).BackwardWith(g)
	want := make([]float32, 6*4)
	for i, id := range ids {
		for j := 0; j < 4; j++ {
			want[id*4+j] += g[i*4+j]
		}
	}
	if !equal(w.Grad, want) {
		t.Errorf("grad = %v, want %v", w.Grad, want)
	}
}

// TestEmbeddingLargeBackward covers the column-parallel scatter-add with a
// width that spans several chunks.
func TestEmbeddingLargeBackward(t *testing.T) {
	rng := newRNG(31)
	w := param(rng, 50, 300)
	ids := randLabels(rng, 700, 50)
	g := autograd.RandN(rng, 700, 300).Data
	autograd.Embedding(nil, w, ids).BackwardWith(g)
	want := make([]float32, 50*300)
	for i, id := range ids {
		for j := 0; j < 300; j++ {
			want[id*300+j] += g[i*300+j]
		}
	}
	if !equal(w.Grad, want) {
		t.Error("scatter-add differs from the serial reference")
	}
}

func TestEmbeddingPanics(t *testing.T) {
	w := autograd.New(4, 3)
	mustPanic(t, func() { autograd.Embedding(nil, w, []int{0, 4}) }, "autograd.Embedding", "id 4", "index 1", "[4 3]")
	mustPanic(t, func() { autograd.Embedding(nil, w, []int{-1}) }, "autograd.Embedding", "id -1")
	mustPanic(t, func() { autograd.Embedding(nil, autograd.New(12), []int{0}) }, "autograd.Embedding", "[12]")
}

func TestEmbeddingMatchesPyTorch(t *testing.T) {
	fx := loadOpsFixture(t, "embedding")
	w := fx.param("weight")
	y := autograd.Embedding(nil, w, fx.ints("ids"))
	y.BackwardWith(fx.tensor("p").Data)
	fx.check("out", y.Data, y.Shape(), 0, 0)
	fx.check("gweight", w.Grad, w.Shape(), 1e-6, 1e-6)
}
