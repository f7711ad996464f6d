package prune

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
)

// TestCompactFileCompresses compacts a model file whose kept filters are
// mostly exact zeros: the written file is the deployable one (its sparse
// tensors compressed), and it loads into the network its metadata
// describes with the compacted network's logits.
func TestCompactFileCompresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	spec := models.Spec{Model: "resnet20", Width: 0.25, Shortcut: "B"}
	m, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, rng)
	zeroGroups(t, m, rng)
	for _, p := range m.Params() {
		if p.T.Rank() == 4 {
			for i := range p.T.Data {
				if rng.Float64() < 0.9 {
					p.T.Data[i] = 0
				}
			}
		}
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "small.safetensors")
	if err := checkpoint.SaveModel(src, m, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	res, err := CompactFile(dst, src, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	encoded := 0
	for k := range f.Metadata {
		if strings.HasPrefix(k, "encoding:") {
			encoded++
		}
	}
	if encoded == 0 {
		t.Errorf("no tensor of the compacted file is compressed (metadata %v)", f.Metadata)
	}
	c, _, err := Compact(m)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := models.SpecFromMetadata(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Widths == nil || res.Spec.Widths == nil {
		t.Fatalf("compacted file without widths: %+v", meta)
	}
	r, err := meta.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.LoadWeights(f, r); err != nil {
		t.Fatal(err)
	}
	x := randomInput(rng, 2)
	if d := closeLogits(logits(c, x), logits(r, x)); d != 0 {
		t.Errorf("the compacted file computes other logits than Compact's network (%.3g)", d)
	}
}
