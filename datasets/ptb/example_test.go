package ptb_test

import (
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/datasets/ptb"
)

// Example writes a three-file corpus in the Penn Treebank format (one
// sentence per line, rare words already replaced by <unk>) to a temporary
// folder, loads it, and cuts the training tokens into BPTT windows the way
// PyTorch's word_language_model example does.
func Example() {
	dir, err := os.MkdirTemp("", "ptb-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"ptb.train.txt": " the cat sat on the mat \n the dog sat on the <unk> \n",
		"ptb.valid.txt": " the cat sat \n",
		"ptb.test.txt":  " the dog sat on the cat \n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	c, err := ptb.LoadCorpus(filepath.Join(dir, "ptb.train.txt"), filepath.Join(dir, "ptb.valid.txt"), filepath.Join(dir, "ptb.test.txt"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("vocabulary:", c.Vocab.Words())
	fmt.Println("tokens:", len(c.Train), len(c.Valid), len(c.Test))
	fmt.Println("test:", c.Vocab.Decode(c.Test))

	// Two parallel streams of 7 steps; windows of at most 4 steps.
	d := ptb.Batchify(c.Train, 2)
	fmt.Println("streams:", d.B, "steps:", d.T, "windows:", ptb.NumWindows(d, 4))
	for i := 0; i < d.T-1; i += 4 {
		input, target, n := ptb.GetBatch(d, i, 4)
		fmt.Printf("window at %d, %d steps: input %v, target %v\n", i, n, input, target)
	}
	fmt.Printf("perplexity of a uniform model: %.1f\n", ptb.Perplexity(float64(len(c.Test))*math.Log(float64(c.Vocab.Len())), len(c.Test)))
	// Output:
	// vocabulary: [the cat sat on mat <eos> dog <unk>]
	// tokens: 14 4 7
	// test: the dog sat on the cat <eos>
	// streams: 2 steps: 7 windows: 2
	// window at 0, 4 steps: input [0 0 1 6 2 2 3 3], target [1 6 2 2 3 3 0 0]
	// window at 4, 2 steps: input [0 0 4 7], target [4 7 5 5]
	// perplexity of a uniform model: 8.0
}
