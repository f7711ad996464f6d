package onnx

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// checkerScript runs the ONNX checker with full shape inference on every
// file named on the command line.
const checkerScript = `
import sys, onnx
for path in sys.argv[1:]:
    onnx.checker.check_model(onnx.load(path), full_check=True)
print("checked", len(sys.argv) - 1)
`

// TestONNXChecker validates the exported models with the reference ONNX
// checker (strict shape inference included) where Python's onnx package
// is installed (Debian: python3-onnx); it is an extra check, so the test
// skips without it. ONNX Runtime's comparison is the one CI requires.
func TestONNXChecker(t *testing.T) {
	python := ""
	// A python3 earlier in PATH (pyenv, a virtualenv) may lack the
	// package that Debian's has.
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import onnx").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("skipped: python3 with the onnx package (Debian: python3-onnx) is not installed")
	}
	dir := t.TempDir()
	var paths []string
	write := func(name string, m nn.Module, opt Options) {
		b, err := Marshal(m, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("%d.onnx", len(paths)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for i, tc := range imageCases {
		m, err := tc.build(rand.New(rand.NewPCG(23, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		write(tc.name, m, Options{Metadata: map[string]string{"model": tc.name}})
		write(tc.name, m, Options{FoldBatchNorm: true})
	}
	write("lm", models.NewLanguageModel(20, 6, 8, 2, 0, rand.New(rand.NewPCG(1, 1))), Options{})
	out, err := exec.Command(python, append([]string{"-c", checkerScript}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("the ONNX checker rejects an exported model: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
