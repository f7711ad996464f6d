package checkpoint_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
)

// sameWeights reports whether two models of one architecture hold equal
// tensors.
func sameWeights(a, b nn.Module) bool {
	pa, pb := nn.StateDict(a), nn.StateDict(b)
	for i := range pa {
		if !slices.Equal(pa[i].T.Data, pb[i].T.Data) {
			return false
		}
	}
	return len(pa) == len(pb)
}

// Example saves a ResNet-20 as a safetensors file with PyTorch's
// state_dict names (torch can load it with load_state_dict) and loads it
// into a second, differently initialised model.
func Example() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, checkpoint.ModelFileName)

	a, err := models.New("resnet20", 10, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		log.Fatal(err)
	}
	if err := checkpoint.SaveModel(path, a, map[string]string{"arch": "resnet20"}); err != nil {
		log.Fatal(err)
	}

	b, err := models.New("resnet20", 10, rand.New(rand.NewPCG(2, 2)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before loading, same weights:", sameWeights(a, b))
	meta, err := checkpoint.LoadModel(path, b)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after loading, same weights:", sameWeights(a, b), "arch:", meta["arch"])

	// A model of another architecture is refused, naming the problem.
	c, err := models.New("resnet32", 10, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		log.Fatal(err)
	}
	_, err = checkpoint.LoadModel(path, c)
	fmt.Println("loading into resnet32 fails:", err != nil)
	// Output:
	// before loading, same weights: false
	// after loading, same weights: true arch: resnet20
	// loading into resnet32 fails: true
}

// ExampleSaveTrainState saves a training run (model, optimizer state and
// metadata) after three updates and restores it into fresh objects, from
// where training continues exactly as it would have.
func ExampleSaveTrainState() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, checkpoint.TrainStateFileName)

	newRun := func() (*nn.Linear, *optim.ProxGen) {
		m := nn.NewLinear(4, 2, true, rand.New(rand.NewPCG(1, 1)))
		groups := []*optim.Group{{Params: []*autograd.Tensor{m.Weight, m.Bias}, Reg: optim.L1(), Lambda: 1e-3, LR: 0.01}}
		return m, optim.New(groups, optim.ProxGenAdam(0.9, 0.999, 1e-8))
	}
	x := autograd.RandN(rand.New(rand.NewPCG(5, 5)), 8, 4)
	step := func(m *nn.Linear, o optim.Optimizer) {
		o.ZeroGrad()
		autograd.CrossEntropy(m.Forward(x), []int{0, 1, 1, 0, 1, 0, 0, 1}).Backward()
		o.Step()
	}

	m, o := newRun()
	for range 3 {
		step(m, o)
	}
	err = checkpoint.SaveTrainState(path, &checkpoint.TrainState{Model: m, Optim: o.State(), Meta: map[string]string{"epoch": "1"}})
	if err != nil {
		log.Fatal(err)
	}
	step(m, o) // the original run goes on

	m2, o2 := newRun()
	st := checkpoint.TrainState{Model: m2}
	if err := checkpoint.LoadTrainState(path, &st); err != nil {
		log.Fatal(err)
	}
	if err := o2.LoadState(st.Optim); err != nil {
		log.Fatal(err)
	}
	step(m2, o2) // the resumed run takes the same step
	fmt.Println("resumed after update", o2.Steps()-1, "of epoch", st.Meta["epoch"], "and continued identically:", sameWeights(m, m2))
	// Output:
	// resumed after update 3 of epoch 1 and continued identically: true
}
