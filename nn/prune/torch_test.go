package prune

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// loadNet builds the network a model file's metadata describes and loads
// the file into it strictly.
func loadNet(t *testing.T, path string) (nn.Module, models.Spec) {
	t.Helper()
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := models.SpecFromMetadata(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.LoadWeights(f, net); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return net, spec
}

// TestTorchCompactFixtures checks compaction against PyTorch
// (testdata/gen_compact.py): for ResNet-20 with option-A and option-B
// shortcuts and VGG-16 with zeroed groups of every kind, the Go logits of
// the dense network, of the network compacted in memory and of the
// committed compacted file (rebuilt from its metadata) equal the logits
// PyTorch computed for the dense and for the reduced architecture, and Go
// compacts the dense file into exactly the committed compacted file.
func TestTorchCompactFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "compact")
	for _, name := range []string{"resnet20_A", "resnet20_B", "vgg16"} {
		t.Run(name, func(t *testing.T) {
			io, err := safetensors.ReadFile(filepath.Join(dir, name+".io.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			tensor := func(key string) *autograd.Tensor {
				v, err := io.Tensors[key].Float32()
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				return autograd.FromSlice(v, io.Tensors[key].Shape...)
			}
			x, want, wantCompact := tensor("x"), tensor("logits"), tensor("logits_compact")

			dense, _ := loadNet(t, filepath.Join(dir, name+".dense.safetensors"))
			stored, spec := loadNet(t, filepath.Join(dir, name+".compact.safetensors"))
			compact, widths, err := Compact(dense)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what string
				net  nn.Module
				want *autograd.Tensor
			}{
				{"dense", dense, want},
				{"compacted in memory", compact, wantCompact},
				{"compacted file", stored, wantCompact},
				{"compacted file vs dense PyTorch", stored, want},
			} {
				got := logits(c.net, x)
				d := closeLogits(c.want.Data, got)
				t.Logf("%s: max |Go − PyTorch| / max(1, max |logit|) = %.2g", c.what, d)
				if d > 1e-5 {
					t.Errorf("%s: logits differ from PyTorch's by %.3g (relative to the largest)\ngo    %v\ntorch %v", c.what, d, got, c.want.Data)
				}
			}
			if !reflect.DeepEqual(widths, spec.Widths) {
				t.Errorf("widths %+v, the file has %+v", widths, spec.Widths)
			}
			a, b := checkpoint.StateDict(compact, ""), checkpoint.StateDict(stored, "")
			for _, k := range a.Names() {
				if !bytes.Equal(a.Tensors[k].Data, b.Tensors[k].Data) {
					t.Errorf("%s differs from the committed compacted file", k)
				}
			}
			if nn.NumParams(stored) >= nn.NumParams(dense) {
				t.Errorf("compacted: %d parameters of %d", nn.NumParams(stored), nn.NumParams(dense))
			}
			if _, err := infer.Load(filepath.Join(dir, name+".compact.safetensors"), models.Spec{}); err != nil {
				t.Errorf("infer.Load: %v", err)
			}
		})
	}
}
