package cifarrun

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/nn/train"
)

func TestCountCorrect(t *testing.T) {
	logits := autograd.FromSlice([]float32{
		1, 3, 2, // argmax 1
		5, 5, 0, // tie: first maximum, 0
		-1, -2, -0.5, // argmax 2
	}, 3, 3)
	if got := countCorrect(logits, []int{1, 1, 2}); got != 2 {
		t.Fatalf("countCorrect = %d, want 2", got)
	}
}

func TestEpochRecordJSON(t *testing.T) {
	bin := 0.75
	recs := []EpochRecord{
		{Epoch: 1, Loss: 2, TestAcc: 0.5, Layers: []experiment.LayerStats{{Name: "conv1.weight", Numel: 4, Zero: 0.25}}},
		{Epoch: 2, Loss: 1.5, Binary: &bin},
	}
	var lines []string
	for i := range recs {
		b, err := train.MarshalJSON(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := json.Marshal(&recs[i])
		if !bytes.Equal(b, plain) {
			t.Errorf("train.MarshalJSON\n%s\nencoding/json\n%s", b, plain)
		}
		lines = append(lines, string(b))
	}
	// A diverged epoch still encodes, with null for the non-finite values.
	nan := EpochRecord{Epoch: 3, Loss: math.NaN(), TestLoss: math.Inf(1)}
	b, err := train.MarshalJSON(&nan)
	if err != nil || !bytes.Contains(b, []byte(`"loss":null`)) || !bytes.Contains(b, []byte(`"test_loss":null`)) {
		t.Errorf("non-finite record: %s, %v", b, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"epoch", "loss", "train_acc", "test_acc", "zero_ratio", "small_ratio", "lr", "lambda", "seconds", "img_per_s", "layers"} {
		if _, ok := m[k]; !ok {
			t.Errorf("line 1 lacks %q: %s", k, lines[0])
		}
	}
	if _, ok := m["binary_ratio"]; ok {
		t.Error("non-binary record has binary_ratio")
	}
	if !bytes.Contains([]byte(lines[1]), []byte(`"binary_ratio":0.75`)) {
		t.Errorf("line 2: %s", lines[1])
	}
	cs := curves(recs, "t", true)
	if len(cs) != 5 || len(cs[2].Series) != 4 || len(cs[3].Series) != 3 {
		t.Fatalf("curves: %d charts", len(cs))
	}
	if cs[4].Title != "step size" || !cs[4].LogY {
		t.Errorf("the step-size chart %q is not in log scale", cs[4].Title)
	}
}
