package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
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
	out := jsonl(recs)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
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
	if len(cs) != 4 || len(cs[2].Series) != 4 {
		t.Fatalf("curves: %d charts", len(cs))
	}
}

func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{{0, "0:00"}, {59.6, "1:00"}, {3599, "59:59"}, {3600 * 26, "26:00:00"}, {-1, "?"}} {
		if got := formatDuration(c.s); got != c.want {
			t.Errorf("formatDuration(%v) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	clock := time.Unix(0, 0)
	p := newProgress(&b, "lines", 2)
	p.now = func() time.Time { return clock }
	p.begin(1, 3, 5, 0, 10)
	for i := 1; i <= 5; i++ {
		clock = clock.Add(time.Second)
		p.update(i, 1.5, 0.25, 8*i)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	// Batches 2, 4 and the last one.
	if len(lines) != 3 {
		t.Fatalf("lines mode printed %q", b.String())
	}
	if want := "epoch 1/3 batch 2/5 loss 1.5000 acc 25.00% 8 img/s ETA 0:03 (run 0:13)"; lines[0] != want {
		t.Errorf("line %q, want %q", lines[0], want)
	}

	b.Reset()
	p = newProgress(&b, "bar", 0)
	p.now = func() time.Time { return clock }
	p.begin(2, 3, 4, 2, 0) // resumed after 2 batches
	clock = clock.Add(time.Second)
	p.update(3, 1, 0.5, 8)
	clock = clock.Add(time.Second)
	p.update(4, 1, 0.5, 16)
	out := b.String()
	if !strings.HasPrefix(out, "\repoch 2/3 [") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\r") != 2 {
		t.Errorf("bar output %q", out)
	}
	if !strings.Contains(out, "4/4") || !strings.Contains(out, "ETA 0:00") {
		t.Errorf("bar output %q", out)
	}

	b.Reset()
	p = newProgress(&b, "none", 0)
	p.begin(1, 1, 1, 0, 0)
	p.update(1, 1, 1, 1)
	if b.Len() != 0 {
		t.Errorf("none mode printed %q", b.String())
	}
	if newProgress(&b, "auto", 0).mode != "lines" {
		t.Error("auto on a buffer is not lines")
	}
}
