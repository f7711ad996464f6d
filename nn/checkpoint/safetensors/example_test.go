package safetensors_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	f := &safetensors.File{Metadata: map[string]string{"epoch": "3"}}
	f.Set("fc.weight", safetensors.FromFloat32([]int{2, 2}, []float32{1, 2, 3, 4}))
	f.Set("bn.num_batches_tracked", safetensors.FromInt64(nil, []int64{390}))
	if err := safetensors.WriteFileAtomic(path, f); err != nil {
		log.Fatal(err)
	}

	g, err := safetensors.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	w, shape, err := g.Float32("fc.weight")
	if err != nil {
		log.Fatal(err)
	}
	steps, err := g.Tensors["bn.num_batches_tracked"].Int64()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.Names(), g.Metadata["epoch"], shape, w, steps)
	// Output: [bn.num_batches_tracked fc.weight] 3 [2 2] [1 2 3 4] [390]
}
