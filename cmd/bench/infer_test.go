package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func runInferForTest(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runInfer(append([]string{"-warmup", "1", "-steps", "2", "-threads", "1"}, args...), &out, &errOut)
	return out.String(), err
}

// TestInferFlags checks that the flags reach benchrun.Infer, and the JSON
// line and the table that come out.
func TestInferFlags(t *testing.T) {
	out, err := runInferForTest(t, "-model", "resnet20", "-width", "0.25", "-batch", "3", "-zeros", "0.97", "-min-zeros", "0.85", "-json")
	if err != nil {
		t.Fatal(err)
	}
	m := lastJSON(t, out)
	checkEcho(t, m, map[string]any{"impl": "go", "model": "resnet20", "batch": 3.0, "steps": 2.0, "warmup": 1.0,
		"threads": 1.0, "dense": false, "min_zeros": 0.85, "sparse_layers": 20.0})
	if z := num(t, m, "weights_zero_ratio"); z < 0.92 || z > 1 {
		t.Errorf("weights_zero_ratio = %v, want about 0.97", z)
	}
	out, err = runInferForTest(t, "-model", "vgg16", "-width", "0.0625", "-batch", "1", "-zeros", "0.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"images/s", "layers sparse"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestInferWeightsMetadata checks that -weights builds the network the
// file's metadata describes without -model, -width or -shortcut (a
// compacted resnet20, testdata/compact), and that explicit flags override
// it.
func TestInferWeightsMetadata(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "compact", "resnet20_A.compact.safetensors")
	out, err := runInferForTest(t, "-weights", path, "-batch", "2", "-json")
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, lastJSON(t, out), map[string]any{"model": "resnet20", "weights": path})
	if _, err := runInferForTest(t, "-weights", path, "-shortcut", "B"); err == nil || !strings.Contains(err.Error(), "option-A shortcut") {
		t.Errorf("-shortcut B over an option-A file: error %v, want one about the shortcut", err)
	}
	if _, err := runInferForTest(t, "-weights", path, "-model", "resnet8"); err == nil {
		t.Error("-model resnet8 over a resnet20 file succeeded")
	}
}

func TestInferBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-model", "lstm"}, {"-batch", "0"}, {"-steps", "0"}, {"-threads", "-1"}, {"-width", "0"},
		{"-zeros", "1.5"}, {"-min-zeros", "-1"}, {"-weights", filepath.Join(t.TempDir(), "missing.safetensors")},
		{"-nosuchflag"}, {"extra"},
	} {
		if _, err := runInferForTest(t, args...); err == nil {
			t.Errorf("runInfer(%q) succeeded, want an error", args)
		}
	}
}
