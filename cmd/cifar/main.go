// Command cifar trains and evaluates CIFAR-10 classifiers with ProxGen and
// the baselines of the ProxGen paper.
//
// Usage:
//
//	cifar [flags]
//
// With no flags it trains ResNet-20 with ProxGen (Adam preconditioner,
// ℓ1/2 regularizer, λ = 0.1/N, step size 1e-3, batch 128) for 30 epochs on
// the CIFAR-10 data in the download cache, downloading them if needed, and
// writes its run folder (runs/resnet20-proxgen-l12-s1):
//
//	train_state.safetensors  model, optimizer and run state; -resume reads it
//	train_state.prev.safetensors  the checkpoint before it
//	model.safetensors        the model alone, loadable by PyTorch (strict)
//	best.safetensors         the model of the epoch with the best test accuracy (metadata "epoch")
//	metrics.jsonl            one JSON line of metrics per epoch
//	curves.svg               loss, accuracy, sparsity and step-size curves
//	summary.json             the final summary (at the end of the run)
//
// The run folder is kept by package nn/train: the checkpoint is one file,
// written atomically after the others at each epoch end, and -resume
// rebuilds the other files from it and continues bit-identically, also
// after kill -9 or a full disk; Ctrl-C saves the current step before
// exiting. Progress goes to
// standard error (a bar on a terminal, plain lines otherwise), one line per
// epoch and the summary to standard output (JSON lines with -json).
//
// Examples:
//
//	go run ./cmd/cifar -data /tmp/cifar10 -model resnet20 -epochs 1
//	go run ./cmd/cifar -data /tmp/cifar10 -train-subset 2048 -epochs 2
//	go run ./cmd/cifar -model vgg16 -optimizer proxgenw -reg l0 -lambda 0.5 -epochs 300
//	go run ./cmd/cifar -optimizer proxquant -weights fp.safetensors -epochs 300
//	go run ./cmd/cifar -out runs/x -resume
//	go run ./cmd/cifar -eval-only -weights runs/x/model.safetensors
//
// Run "cifar -h" for all flags; docs/cifar.md explains them, the λ
// scaling and the checkpoint layout. The program is package
// cmd/internal/cifarrun, which cmd/sweep also runs in-process.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/proxgen/proxgen/cmd/internal/cifarrun"
	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// gcPercent is the garbage collector's target (GOGC) unless the environment
// sets GOGC. The step arena and the data set are almost all of the live
// heap and a step allocates only a few MB besides, so collecting at 20 %
// growth instead of Go's default 100 % keeps the heap from doubling between
// collections (a ResNet-20 epoch at 1 thread reached 1.05 GB of heap with
// 0.53 GB live) for one collection every few dozen steps, each costing well
// under a millisecond of CPU (the buffers hold no pointers).
const gcPercent = 20

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "cifar: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Signals stay caught until the process exits: however many come
	// during the checkpoint save, the program exits 130 after it.
	ctx := train.CatchInterrupts()
	os.Exit(cifarrun.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
