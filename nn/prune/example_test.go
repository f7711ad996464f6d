package prune_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/prune"
)

// Example prunes half of the filters inside the residual blocks of a
// ResNet-20 by magnitude, counts what remains of the network and compacts
// it into a smaller dense network that computes the same function.
func Example() {
	m, err := models.New("resnet20", 10, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		log.Fatal(err)
	}
	mask, err := prune.Filters(m, prune.Options{Fraction: 0.5})
	if err != nil {
		log.Fatal(err)
	}
	mask.Apply() // zero the chosen filters with their batch norm's γ and β
	count, err := prune.CountModel(m, 32, 32)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d filters zeroed; %d of %d channels, %.1f%% of the parameters and %.1f%% of the FLOPs remain\n",
		mask.Len(), count.Channels, count.ChannelsTotal, 100*count.ParamsRatio(), 100*count.FLOPsRatio())
	small, widths, err := prune.Compact(m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("compacted: %d parameters (%d counted); the first block's inner convolution has %d of 16 filters\n",
		nn.NumParams(small), count.Params, widths.Stages[0][0].Inner)
	// Output:
	// 168 filters zeroed; 280 of 448 channels, 50.3% of the parameters and 50.5% of the FLOPs remain
	// compacted: 135754 parameters (135754 counted); the first block's inner convolution has 8 of 16 filters
}
