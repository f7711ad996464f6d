// Command export writes the network of a model file as an ONNX model, for
// ONNX Runtime, TensorRT, OpenVINO and the other runtimes that read ONNX:
// the front end of package nn/onnx.
//
// Usage:
//
//	export -model FILE -out FILE.onnx [flags]
//
// FILE is a model file or training checkpoint of cmd/cifar (its metadata name
// the network; a PyTorch state dict needs -arch), a compacted file of
// cmd/cifar -compact, or a model file of cmd/ptb (the LSTM language
// model, recognised by its tensors). The ONNX model carries the file's
// metadata (class names, mean and standard deviation, ...) as its
// metadata_props. docs/onnx.md describes the graphs' inputs and outputs.
//
// Examples:
//
//	go run ./cmd/export -model runs/resnet20-proxgen-l12-s1/model.safetensors -out resnet20.onnx
//	go run ./cmd/export -model torch.safetensors -arch resnet20 -fold-bn -out resnet20.onnx
//	go run ./cmd/export -model ptb-run/model.safetensors -vocab ptb.train.txt -out lm.onnx
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/proxgen/proxgen/datasets/ptb"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/onnx"
	"github.com/proxgen/proxgen/nn/pretrained"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit statuses of run.
const (
	exitOK    = 0
	exitError = 1 // reading the model or writing the ONNX file failed
	exitUsage = 2 // bad flags
)

type config struct {
	model, out, vocab string
	opt               onnx.FileOptions
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := cli.NewFlagSet("export", "export -model FILE -out FILE.onnx [flags]", "writes a model file (CIFAR classifier, compacted network or PTB language model) as an ONNX model (docs/onnx.md)", stderr)
	fs.StringVar(&c.model, "model", "", "model file (safetensors) to export, or a shipped model of nn/pretrained by its name (as cmd/serve takes it) (required)")
	fs.StringVar(&c.out, "out", "", "ONNX file to write (required)")
	fs.BoolVar(&c.opt.FoldBatchNorm, "fold-bn", false, "fold batch normalisation into the convolutions before it (default: BatchNormalization nodes)")
	fs.StringVar(&c.opt.Spec.Model, "arch", "", "network of the file (resnet20, vgg16, ...); default: the file's metadata (needed for PyTorch files)")
	fs.Float64Var(&c.opt.Spec.Width, "width", 0, "channel multiplier of the network; default: the file's metadata, else 1")
	fs.StringVar(&c.opt.Spec.Shortcut, "shortcut", "", "shortcut of resnet20..56, A or B; default: the file's metadata, else A")
	fs.IntVar(&c.opt.Spec.NumClasses, "classes", 0, "number of classes; default: the file's metadata, else 10")
	fs.StringVar(&c.vocab, "vocab", "", "language model: its training text file, whose words (by id) go into the ONNX metadata")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if c.model == "" || c.out == "" {
		return nil, errors.New("-model and -out are required")
	}
	return c, nil
}

// run is the whole program; it returns the exit status. Errors go to
// stderr.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "export: %v\n", err)
		return exitUsage
	}
	if c.vocab != "" {
		v, _, err := ptb.BuildVocab(c.vocab)
		if err != nil {
			fmt.Fprintf(stderr, "export: -vocab: %v\n", err)
			return exitError
		}
		c.opt.Words = v.Words()
	}
	src := c.model
	if _, statErr := os.Stat(src); statErr != nil && pretrained.Has(src) {
		// A shipped model: its embedded file, written where ExportFile
		// can read it.
		if src, err = shippedFile(src); err != nil {
			fmt.Fprintf(stderr, "export: %v\n", err)
			return exitError
		}
		defer os.Remove(src)
	}
	desc, err := onnx.ExportFile(c.out, src, c.opt)
	if err != nil {
		fmt.Fprintf(stderr, "export: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "wrote %s: %s\n", c.out, desc)
	return exitOK
}

// shippedFile writes the shipped model name to a temporary file and
// returns its path.
func shippedFile(name string) (string, error) {
	b, err := pretrained.Bytes(name)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "export-"+name+"-*.safetensors")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
