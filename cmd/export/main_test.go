package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	net, err := models.New("resnet20", 10, rand.New(rand.NewPCG(1, 1)), models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.safetensors")
	if err := checkpoint.SaveModel(model, net, models.Spec{Model: "resnet20", Width: 0.25}.Metadata()); err != nil {
		t.Fatal(err)
	}
	lm := filepath.Join(dir, "lm.safetensors")
	if err := checkpoint.SaveModel(lm, models.NewLanguageModel(4, 3, 2, 1, 0, rand.New(rand.NewPCG(1, 1))), nil); err != nil {
		t.Fatal(err)
	}
	train := filepath.Join(dir, "train.txt")
	if err := os.WriteFile(train, []byte("a b\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.onnx")
	cases := []struct {
		args   []string
		code   int
		output string
	}{
		{[]string{"-model", model, "-out", out}, exitOK, "resnet20 width 0.25 shortcut A, 10 classes"},
		{[]string{"-model", model, "-out", out, "-fold-bn"}, exitOK, "resnet20 width 0.25"},
		// A shipped model by its name, as cmd/serve takes it (issue 35).
		{[]string{"-model", "resnet20-sparse", "-out", out}, exitOK, "resnet20"},
		{[]string{"-model", lm, "-out", out, "-vocab", train}, exitOK, "LSTM language model: vocabulary 4"},
		{[]string{"-model", lm, "-out", out, "-vocab", filepath.Join(dir, "none.txt")}, exitError, "-vocab"},
		{[]string{"-model", model, "-out", out, "-arch", "vgg16"}, exitError, "export: onnx: "},
		{[]string{"-model", filepath.Join(dir, "none"), "-out", out}, exitError, "export: onnx: "},
		{[]string{"-model", model}, exitUsage, "-model and -out are required"},
		{[]string{"-model", model, "-out", out, "extra"}, exitUsage, "unexpected argument"},
		{[]string{"-nope"}, exitUsage, "flag provided but not defined"},
	}
	for _, tc := range cases {
		os.Remove(out)
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.output) {
			t.Errorf("%q: exit %d, output %q %q; want %d and %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.output)
		}
		st, err := os.Stat(out)
		if (code == exitOK) != (err == nil && st.Size() > 0) {
			t.Errorf("%q: exit %d, output file: %v", tc.args, code, err)
		}
	}
}
