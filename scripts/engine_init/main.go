//go:build ignore

// This program writes the initial weights of a cmd/cifar run, so that
// scripts/cifar_torch.py --init FILE starts from exactly the network the
// engine starts from:
//
//	go run scripts/engine_init/main.go -model resnet20 -shortcut B -seed 1 -out init.safetensors
//
// It builds the network as cmd/cifar does for a new run without -weights
// (cmd/internal/cifarrun's newModel: models.Spec.New with the random
// stream rand.NewPCG(seed, 0x6d6f64656c)) and saves it, with its
// nn/models metadata, in the model-file layout, whose tensor names are
// PyTorch's state_dict keys. Starting cmd/cifar from the file (-weights)
// trains the same run as starting it from -seed.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
)

// modelStream is the second seed of cifarrun's newModel.
const modelStream = 0x6d6f64656c

func main() {
	spec := models.Spec{NumClasses: cifar10.NumClasses}
	fs := flag.NewFlagSet("engine_init", flag.ExitOnError)
	fs.StringVar(&spec.Model, "model", "resnet20", "network, as cmd/cifar -model")
	fs.StringVar(&spec.Shortcut, "shortcut", "A", "shortcut of resnet20..56, as cmd/cifar -shortcut")
	fs.Float64Var(&spec.Width, "width", 1, "channel-width multiplier, as cmd/cifar -width")
	seed := fs.Uint64("seed", 1, "seed, as cmd/cifar -seed")
	out := fs.String("out", "", "model file to write (required)")
	fs.Parse(os.Args[1:])
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/engine_init/main.go [-model M] [-shortcut A|B] [-width W] [-seed S] -out FILE")
		os.Exit(2)
	}
	m, err := spec.New(rand.New(rand.NewPCG(*seed, modelStream)))
	if err == nil {
		err = checkpoint.SaveModel(*out, m, spec.Metadata())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine_init:", err)
		os.Exit(1)
	}
}
