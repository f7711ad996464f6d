package models_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
)

// The stress test's models: a ResNet-8 with batch normalisation at a
// quarter of the width (4, 8 and 16 channels) on 16×16 images.
const (
	stressClasses = 10
	stressBatch   = 4
	stressImage   = 16
)

func stressModel(seed uint64) nn.Module {
	m, err := models.New("resnet8", stressClasses, newRng(seed), models.WithWidth(0.25))
	if err != nil {
		panic(err)
	}
	return m
}

// stressImages returns a batch of images that depends only on seed.
func stressImages(seed uint64) []float32 {
	return autograd.RandN(newRng(seed), stressBatch, 3, stressImage, stressImage).Data
}

// stressRun is the record of one run of the stress computations: the loss
// of every training step, the final state of the trained model, and the
// logits of every inference pass of every server.
type stressRun struct {
	losses []float32
	state  [][]float32
	logits [][][]float32 // [server][pass]
}

// stressTrainer trains a model with Adam in a context of its own.
type stressTrainer struct {
	model nn.Module
	opt   optim.Optimizer
	ctx   *autograd.Context
}

func newStressTrainer() *stressTrainer {
	m := stressModel(1)
	m.SetTraining(true)
	all := &optim.Group{LR: 1e-2}
	for _, p := range m.Params() {
		all.Params = append(all.Params, p.T)
		all.Names = append(all.Names, p.Name)
	}
	return &stressTrainer{
		model: m,
		opt:   optim.New([]*optim.Group{all}, optim.AdamConfig(0.9, 0.999, 1e-8)),
		ctx:   &autograd.Context{Arena: autograd.NewArena()},
	}
}

// step runs training step s on the batch of seed 100+s and returns the loss.
func (tr *stressTrainer) step(s int) float32 {
	tr.ctx.Arena.Reset()
	tr.opt.ZeroGrad()
	x := autograd.FromSlice(stressImages(uint64(100+s)), stressBatch, 3, stressImage, stressImage).In(tr.ctx)
	labels := make([]int, stressBatch)
	for i := range labels {
		labels[i] = (s + 3*i) % stressClasses
	}
	loss := autograd.CrossEntropy(tr.model.Forward(x), labels)
	loss.Backward()
	tr.opt.Step()
	return loss.Item()
}

// snapshot returns a second instance of the model holding a deep copy of
// the trained model's state dict, in evaluation mode.
func (tr *stressTrainer) snapshot() nn.Module {
	snap := stressModel(99) // other initial weights, all overwritten
	src, dst := nn.StateDict(tr.model), nn.StateDict(snap)
	for i, p := range src {
		if dst[i].Name != p.Name {
			panic(fmt.Sprintf("state dicts differ: %s vs %s", dst[i].Name, p.Name))
		}
		copy(dst[i].T.Data, p.T.Data)
	}
	snap.SetTraining(false)
	return snap
}

// serve runs the inference passes of server g: passes forwards on the
// shared model serving and, once the snapshot is published, as many on
// the snapshot. Even servers use a NoGrad context with an arena of their
// own, odd servers no context at all (the graph is recorded and dropped).
func serve(t *testing.T, g, passes int, serving nn.Module, snapshot func() nn.Module) [][]float32 {
	var ctx *autograd.Context
	if g%2 == 0 {
		ctx = &autograd.Context{Arena: autograd.NewArena(), NoGrad: true}
	}
	var out [][]float32
	run := func(m nn.Module, seed uint64) {
		if ctx != nil {
			ctx.Arena.Reset()
		}
		x := autograd.FromSlice(stressImages(seed), stressBatch, 3, stressImage, stressImage).In(ctx)
		y := m.Forward(x)
		if y.RequiresGrad() != (ctx == nil) {
			t.Errorf("server %d: output requires a gradient: %v, context %+v", g, y.RequiresGrad(), ctx)
		}
		out = append(out, slices.Clone(y.Data))
	}
	for j := range passes {
		run(serving, uint64(1000+100*g+j))
	}
	snap := snapshot()
	for j := range passes {
		run(snap, uint64(2000+100*g+j))
	}
	return out
}

// TestTrainAndServeConcurrently trains a small ResNet with batch
// normalisation and Adam on one goroutine while eight goroutines run
// inference, with NoGrad contexts and without a context, on another model
// and on a snapshot of the model being trained. Every loss, the trained
// state and every inference output must be bit-identical to the same
// computations run one after the other. Run it with -race.
func TestTrainAndServeConcurrently(t *testing.T) {
	const servers = 8
	steps, snapAt, passes := 8, 3, 3
	if testing.Short() {
		steps, snapAt, passes = 4, 2, 2
	}
	serving := stressModel(2)
	serving.SetTraining(false)

	// Sequential reference.
	var want stressRun
	tr := newStressTrainer()
	var snap nn.Module
	for s := range steps {
		want.losses = append(want.losses, tr.step(s))
		if s+1 == snapAt {
			snap = tr.snapshot()
		}
	}
	for _, p := range nn.StateDict(tr.model) {
		want.state = append(want.state, slices.Clone(p.T.Data))
	}
	for g := range servers {
		want.logits = append(want.logits, serve(t, g, passes, serving, func() nn.Module { return snap }))
	}

	// The same computations at once.
	got := stressRun{logits: make([][][]float32, servers)}
	tr = newStressTrainer()
	published := make(chan struct{})
	var shared nn.Module
	var wg sync.WaitGroup
	wg.Add(1 + servers)
	go func() {
		defer wg.Done()
		for s := range steps {
			got.losses = append(got.losses, tr.step(s))
			if s+1 == snapAt {
				shared = tr.snapshot()
				close(published)
			}
		}
	}()
	for g := range servers {
		go func() {
			defer wg.Done()
			got.logits[g] = serve(t, g, passes, serving, func() nn.Module {
				<-published
				return shared
			})
		}()
	}
	wg.Wait()
	for _, p := range nn.StateDict(tr.model) {
		got.state = append(got.state, slices.Clone(p.T.Data))
	}

	if !slices.Equal(got.losses, want.losses) {
		t.Errorf("training losses %v, sequentially %v", got.losses, want.losses)
	}
	for i := range want.state {
		if !slices.Equal(got.state[i], want.state[i]) {
			t.Errorf("trained state tensor %d differs from the sequential run", i)
		}
	}
	for g := range servers {
		for j := range want.logits[g] {
			if !slices.Equal(got.logits[g][j], want.logits[g][j]) {
				t.Errorf("server %d pass %d: logits differ from the sequential run", g, j)
			}
		}
	}
	// The snapshot froze the model mid-training: training went on.
	if slices.Equal(want.state[0], nn.StateDict(snap)[0].T.Data) {
		t.Error("the snapshot equals the model trained to the end")
	}
}
