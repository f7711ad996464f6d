package main

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn/train"
)

func TestComputeWeightStats(t *testing.T) {
	a := autograd.FromSlice([]float32{0, 0, 5e-4, -5e-3, 1, -1, 0.5, 2}, 2, 4)
	b := autograd.FromSlice([]float32{0, 1, -0.0009, 0.3}, 1, 1, 2, 2)
	s := computeWeightStats([]namedTensor{{"a.weight", a}, {"b.weight", b}})
	if s.Numel != 12 {
		t.Fatalf("numel %d", s.Numel)
	}
	// zeros: 3 of 12; |w|<1e-3: 0, 0, 5e-4, 0, -9e-4 = 5; |w|<1e-2: those + -5e-3 = 6; ±1: 3.
	check := func(name string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("zero", s.Zero, 3.0/12)
	check("small", s.Small, 5.0/12)
	check("below 1e-2", s.Below1e2, 6.0/12)
	check("±1", s.PM1, 3.0/12)
	if len(s.Layers) != 2 || s.Layers[0].Name != "a.weight" || s.Layers[1].Numel != 4 {
		t.Fatalf("layers %+v", s.Layers)
	}
	check("a zero", s.Layers[0].Zero, 2.0/8)
	check("b small", s.Layers[1].Small, 2.0/4)
	check("b ±1", s.Layers[1].PM1, 1.0/4)
	if e := computeWeightStats(nil); e.Zero != 0 || e.Numel != 0 {
		t.Errorf("empty stats %+v", e)
	}
}

// TestFilterCounts: output filters (index 0) with a non-zero weight.
func TestFilterCounts(t *testing.T) {
	a := autograd.FromSlice([]float32{0, 0, 1, 0, 0, 0}, 3, 2)              // filter 1 only
	b := autograd.FromSlice([]float32{0, 0, 0, 0, -2, 0, 0, 0}, 2, 1, 2, 2) // filter 1 only
	bias := autograd.FromSlice([]float32{1, 2}, 2)                          // rank 1: no filters
	s := computeWeightStats([]namedTensor{{"a.weight", a}, {"b.weight", b}, {"b.bias", bias}})
	if s.Filters != 2 || s.FiltersTotal != 5 {
		t.Fatalf("filters %d of %d, want 2 of 5", s.Filters, s.FiltersTotal)
	}
	if l := s.Layers[0]; l.Filters != 1 || l.FiltersTotal != 3 {
		t.Fatalf("a: %d of %d, want 1 of 3", l.Filters, l.FiltersTotal)
	}
}

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
	recs := []epochRecord{
		{Epoch: 1, Loss: 2, TestAcc: 0.5, Layers: []layerStats{{Name: "conv1.weight", Numel: 4, Zero: 0.25}}},
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
	nan := epochRecord{Epoch: 3, Loss: math.NaN(), TestLoss: math.Inf(1)}
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
}
