// Package pretrained holds CIFAR-10 networks trained with this engine and
// shipped inside it: the model files of the full-data runs of
// docs/cifar-full.md, embedded with go:embed, each with a model card.
//
// A model is opened by name:
//
//	m, err := pretrained.Open(pretrained.Default)
//	probs := m.Probabilities(nil, x)
//
// Names lists the models; Card returns a model's card (Markdown: the
// training command, the commit, the test accuracy and fraction of exact
// zeros measured by `cifar -eval-only` on the 10,000 test images, and the
// file size), and Bytes the model file itself, a compressed safetensors
// file (docs/deploy-format.md) whose metadata describes its network.
package pretrained

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// Default is the model that cmd/serve serves when no model is named.
const Default = "resnet20-sparse"

// Extensions of a model's two files in the embedded tree.
const (
	modelExt = ".safetensors"
	cardExt  = ".md"
)

//go:embed models
var files embed.FS

// ErrUnknown is returned (wrapped) for a name that is not a shipped model.
var ErrUnknown = errors.New("no such shipped model")

// Names returns the names of the shipped models in sorted order.
func Names() []string {
	entries, err := fs.ReadDir(files, "models")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), modelExt); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Has reports whether name is a shipped model.
func Has(name string) bool { return slices.Contains(Names(), name) }

func read(name, ext string) ([]byte, error) {
	if !Has(name) {
		return nil, fmt.Errorf("pretrained: %w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return files.ReadFile("models/" + name + ext)
}

// Bytes returns the model file of the shipped model name (a fresh copy).
func Bytes(name string) ([]byte, error) {
	b, err := read(name, modelExt)
	return slices.Clone(b), err
}

// Card returns the model card of the shipped model name.
func Card(name string) (string, error) {
	b, err := read(name, cardExt)
	return string(b), err
}

// File returns the shipped model name as a parsed safetensors file, its
// checksum verified.
func File(name string) (*safetensors.File, error) {
	b, err := read(name, modelExt)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("pretrained: %s: %w", name, err)
	}
	return f, nil
}

// Open returns the shipped model name ready for inference, with infer's
// options (infer.Dense, infer.MinZeros); as infer.Load, layers whose
// weights are mostly exact zeros run sparse by default where that is
// measured to be faster (see infer.New).
func Open(name string, opts ...infer.Option) (*infer.Model, error) {
	f, err := File(name)
	if err != nil {
		return nil, err
	}
	m, err := infer.FromFile(f, models.Spec{}, opts...)
	if err != nil {
		return nil, fmt.Errorf("pretrained: %s: %w", name, err)
	}
	return m, nil
}
