//go:build ignore

// This program writes nn/infer's class probabilities for the agreement
// check of scripts/ortbench/run:
//
//	go run scripts/ortbench/probs/main.go MODEL.safetensors IN.f32 OUT.f32
//
// IN.f32 holds preprocessed images (3×32×32 little-endian float32 each),
// OUT.f32 receives their softmax rows, the output of
// infer.Model.Probabilities for the model infer.Load builds from the file.
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probs:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: probs MODEL.safetensors IN.f32 OUT.f32")
	}
	m, err := infer.Load(args[0], models.Spec{})
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	if len(raw)%(4*infer.InputSize) != 0 {
		return fmt.Errorf("%s: %d bytes, not whole images of %d float32 values", args[1], len(raw), infer.InputSize)
	}
	x := make([]float32, len(raw)/4)
	if _, err := binary.Decode(raw, binary.LittleEndian, x); err != nil {
		return err
	}
	p := m.Probabilities(nil, x)
	out, err := binary.Append(nil, binary.LittleEndian, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "probs: %s: %s\n", args[0], m)
	return os.WriteFile(args[2], out, 0o644)
}
