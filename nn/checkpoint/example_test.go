package checkpoint_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
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
