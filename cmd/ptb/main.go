// Command ptb trains the word-level LSTM language model of the ProxGen
// paper on the Penn Treebank and reports perplexities.
//
// Usage:
//
//	ptb -data DIR [flags]
//
// DIR holds the PTB files ptb.train.txt, ptb.valid.txt and ptb.test.txt in
// the format of Mikolov's RNNLM toolkit. The model is the paper's: word
// embeddings of 300, one LSTM layer of 300 units, dropout, and a linear
// decoder over the vocabulary (PyTorch word_language_model's RNNModel). It
// trains with truncated backpropagation through time (windows of 35 steps
// over 20 parallel streams, the state carried over and detached), gradient
// clipping to norm 0.25, and the step size divided by 1.2 after every epoch
// whose validation loss does not improve, as the paper does.
//
// Without ptb.train.txt (only ptb.valid.txt and ptb.test.txt are available
// here) the program trains on ptb.valid.txt and uses ptb.test.txt both to
// steer the step size and to report perplexity; it says so in its output.
// The vocabulary is then the training file's, so test words it lacks count
// as <unk>, and perplexities are not comparable with the paper's.
//
// Optimizers: adam and sgd (baselines), proxgen (the paper's ProxGen with
// the Adam preconditioner; with the default regularizer bin-l0 on the LSTM
// weights this is revised ProxQuant ℓ0) and proxquant (the original
// ProxQuant: binary ℓ1 prox in the Euclidean metric, weights clipped to
// [−1, 1]).
//
// Each epoch prints one line of metrics (a JSON line with -json); the run
// ends with a summary line whose "test_ppl" is the test perplexity after
// the last epoch. The run folder (-out) holds the checkpoint, which
// -resume continues exactly (also after kill -9), metrics.jsonl, the
// best model and summary.json, kept by package nn/train; -metrics and
// -save write copies. Ctrl-C saves a checkpoint and exits with status
// 130. Progress goes to standard error. Bad flags exit with status 2,
// failures (missing or malformed data, divergence) with status 1.
//
// Examples:
//
//	go run ./cmd/ptb -data /work/shared/data/ptb -epochs 3
//	go run ./cmd/ptb -data DIR -optimizer proxgen -reg bin-l0 -lambda 1e-4 -weights fp.safetensors
//	go run ./cmd/ptb -data DIR -epochs 1 -json -metrics run.jsonl -save lm.safetensors
//	go run ./cmd/ptb -out runs/ptb-adam-s1 -resume
//
// docs/ptb.md describes the flags and a real run. The program is package
// cmd/internal/ptbrun, which cmd/sweep also runs in-process.
package main

import (
	"fmt"
	"os"

	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/cmd/internal/ptbrun"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "ptb: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	// Signals stay caught until the process exits: however many come
	// during the checkpoint save, the program exits 130 after it.
	ctx := train.CatchInterrupts()
	os.Exit(ptbrun.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
