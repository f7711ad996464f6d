package ptbrun

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestOverflowMetrics checks that a perplexity that overflows (loss above
// 709) is written as null, not an encoding error.
func TestOverflowMetrics(t *testing.T) {
	v := 800.0
	pv := math.Exp(v)
	rec := EpochRecord{Epoch: 1, TrainLoss: 750, TrainPPL: math.Exp(750), TestLoss: v, TestPPL: math.Exp(v), ValidLoss: &v, ValidPPL: &pv}
	var b bytes.Buffer
	if err := writeRecord(&b, &rec, true); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	for _, want := range []string{`"train_ppl":null`, `"test_ppl":null`, `"valid_ppl":null`, `"test_loss":800`} {
		if !strings.Contains(line, want) {
			t.Errorf("%s lacks %s", line, want)
		}
	}
	var back EpochRecord
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.TestLoss != 800 {
		t.Errorf("decoding %s: %v", line, err)
	}
	b.Reset()
	if err := writeRecord(&b, &rec, false); err != nil || !strings.Contains(b.String(), "+Inf") {
		t.Errorf("text line %q, %v", b.String(), err)
	}
}
