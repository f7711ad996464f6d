package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyText returns sentences of a small grammar: a learnable language
// over 12 words (plus <unk>), one sentence per line.
func tinyText(seed uint64, lines int) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	subj := []string{"the cat", "a dog", "the bird", "<unk>"}
	verb := []string{"sees", "likes", "chases"}
	obj := []string{"the mouse", "a ball", "the tree"}
	var b strings.Builder
	for range lines {
		b.WriteString(subj[rng.IntN(len(subj))])
		b.WriteByte(' ')
		b.WriteString(verb[rng.IntN(len(verb))])
		b.WriteByte(' ')
		b.WriteString(obj[rng.IntN(len(obj))])
		if rng.IntN(3) == 0 {
			b.WriteString(" today")
		}
		b.WriteString(" \n")
	}
	return b.String()
}

// tinyData writes a PTB-style folder with ptb.valid.txt and ptb.test.txt
// (no training file, as in this project's data folder). The test text has
// one word the training text lacks.
func tinyData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ptb.valid.txt", tinyText(1, 300))
	write("ptb.test.txt", tinyText(2, 60)+"the cat sees the zebra\n")
	return dir
}

// quick are flags that make a run take a fraction of a second.
var quick = []string{"-emb", "12", "-hidden", "16", "-batch", "4", "-bptt", "8", "-eval-batch", "2", "-lr", "0.01", "-log-every", "0"}

// runPTB runs the program and returns its exit status and outputs.
func runPTB(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if !slices.Contains(args, "-out") && !slices.Contains(args, "-h") {
		args = append(args, "-out", filepath.Join(t.TempDir(), "run"))
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// parseJSONLines decodes the epoch records and the summary of a -json run.
func parseJSONLines(t *testing.T, out string) ([]epochRecord, summary) {
	t.Helper()
	var recs []epochRecord
	var sum summary
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, `"summary":true`) {
			if err := json.Unmarshal([]byte(line), &sum); err != nil {
				t.Fatalf("summary %q: %v", line, err)
			}
			continue
		}
		var r epochRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if !sum.Summary {
		t.Fatalf("no summary line in %q", out)
	}
	return recs, sum
}

func TestTrainTinyText(t *testing.T) {
	dir := tinyData(t)
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	args := append([]string{"-data", dir, "-epochs", "4", "-dropout", "0.1", "-json", "-metrics", metrics, "-threads", "2"}, quick...)
	code, out, errOut := runPTB(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "training on ptb.valid.txt") {
		t.Errorf("stderr does not say that it trains on ptb.valid.txt:\n%s", errOut)
	}
	recs, sum := parseJSONLines(t, out)
	if len(recs) != 4 || sum.Epochs != 4 {
		t.Fatalf("%d records, summary epochs %d; want 4", len(recs), sum.Epochs)
	}
	// 12 words, <unk> and <eos>: a uniform model has perplexity 14; the
	// grammar allows far less.
	if sum.Vocab != 14 || sum.TestOOV != 1 || sum.Note != noTrainNote || sum.Threads != 2 || sum.Optimizer != "adam" || sum.Reg != "none" {
		t.Errorf("summary vocab %d, test OOV %d, note %q, threads %d, optimizer %s, reg %s", sum.Vocab, sum.TestOOV, sum.Note, sum.Threads, sum.Optimizer, sum.Reg)
	}
	first, last := recs[0], recs[len(recs)-1]
	if !(last.TestPPL < first.TestPPL && last.TestPPL < 8 && last.TrainPPL < 8) {
		t.Errorf("perplexity did not fall: test %v -> %v, train %v -> %v", first.TestPPL, last.TestPPL, first.TrainPPL, last.TrainPPL)
	}
	if sum.TestPPL != last.TestPPL || math.Abs(sum.TestLoss-math.Log(sum.TestPPL)) > 1e-9 {
		t.Errorf("summary test ppl %v (loss %v), last epoch %v", sum.TestPPL, sum.TestLoss, last.TestPPL)
	}
	for i, r := range recs {
		if r.Epoch != i+1 || r.ValidPPL != nil || r.Tokens <= 0 || r.Steps <= 0 || r.LR <= 0 || r.Lambda != 0 || r.GradNorm <= 0 {
			t.Errorf("record %d: %+v", i, r)
		}
		if i > 0 && r.LR != recs[i-1].NextLR {
			t.Errorf("epoch %d uses lr %v, the previous epoch announced %v", r.Epoch, r.LR, recs[i-1].NextLR)
		}
	}
	// The metrics file holds the same records.
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 4 || !strings.HasPrefix(out, strings.Join(lines, "\n")) {
		t.Errorf("metrics file:\n%s\nstdout:\n%s", b, out)
	}
	// Without -json, text lines and a final sentence.
	code, out, errOut = runPTB(t, append([]string{"-data", dir, "-epochs", "1"}, quick...)...)
	if code != exitOK || !strings.Contains(out, "epoch   1 | train ppl") || !strings.Contains(out, "test perplexity") {
		t.Errorf("text output (exit %d):\n%s\n%s", code, out, errOut)
	}
}

// TestTrainDeterministic checks that a run gives bit-identical results
// for the same seed, whatever the number of threads, and different ones
// for another seed.
func TestTrainDeterministic(t *testing.T) {
	dir := tinyData(t)
	result := func(extra ...string) []float64 {
		args := append(append([]string{"-data", dir, "-epochs", "2", "-json", "-dropout", "0.3"}, quick...), extra...)
		code, out, errOut := runPTB(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		recs, _ := parseJSONLines(t, out)
		var v []float64
		for _, r := range recs {
			v = append(v, r.TrainLoss, r.TestLoss, r.GradNorm)
		}
		return v
	}
	a := result("-threads", "1")
	b := result("-threads", "2")
	c := result("-threads", "2", "-seed", "9")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("1 and 2 threads differ: %v vs %v", a, b)
		}
	}
	if a[0] == c[0] {
		t.Errorf("seeds 1 and 9 give the same training loss %v", a[0])
	}
}

// TestProxQuant checks the regularized optimizers: ProxGen with the binary
// ℓ0 regularizer moves LSTM weights to ±1, and ProxQuant with a hard
// quantisation epoch ends with every LSTM weight at ±1, clipped before.
func TestProxQuant(t *testing.T) {
	dir := tinyData(t)
	save := filepath.Join(t.TempDir(), "lm.safetensors")
	code, out, errOut := runPTB(t, append([]string{"-data", dir, "-epochs", "2", "-json", "-optimizer", "proxgen", "-lambda", "0.02", "-homotopy", "-save", save}, quick...)...)
	if code != exitOK {
		t.Fatalf("proxgen: exit %d: %s", code, errOut)
	}
	recs, sum := parseJSONLines(t, out)
	if sum.Reg != "bin-l0" || recs[0].Lambda != 0 || recs[1].Lambda != 0.02 {
		t.Errorf("reg %q, λ per epoch %v, %v; want bin-l0 with homotopy 0, 0.02", sum.Reg, recs[0].Lambda, recs[1].Lambda)
	}
	if !(recs[1].Binary > 0.01) || recs[1].Penalty <= 0 {
		t.Errorf("after 2 epochs of ProxGen bin-l0: %.4f of the LSTM weights at ±1, penalty %v", recs[1].Binary, recs[1].Penalty)
	}
	// The saved model initialises a ProxQuant run that binarises after
	// epoch 2 and keeps training the rest in epoch 3.
	code, out, errOut = runPTB(t, append([]string{"-data", dir, "-epochs", "3", "-json", "-optimizer", "proxquant", "-weights", save, "-hard-quant-epoch", "2"}, quick...)...)
	if code != exitOK {
		t.Fatalf("proxquant: exit %d: %s", code, errOut)
	}
	recs, sum = parseJSONLines(t, out)
	if sum.Reg != "bin-l1" || recs[0].Binary == 1 || recs[1].Binary != 1 || recs[2].Binary != 1 || recs[2].ZeroRatio != 0 {
		t.Errorf("proxquant: reg %q, binary ratio %v, %v, %v (zeros %v); want bin-l1, <1, 1, 1", sum.Reg, recs[0].Binary, recs[1].Binary, recs[2].Binary, recs[2].ZeroRatio)
	}
	if !(recs[2].TestPPL < 14) {
		t.Errorf("binarised model test perplexity %v", recs[2].TestPPL)
	}
}

// TestLRDecay checks that the step size is divided by -lr-decay after an
// epoch whose validation loss did not improve, and kept otherwise.
func TestLRDecay(t *testing.T) {
	dir := tinyData(t)
	// A step size this large makes the loss go up and down.
	code, out, errOut := runPTB(t, append(quick, "-data", dir, "-epochs", "6", "-json", "-lr", "0.2", "-lr-decay", "2")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, _ := parseJSONLines(t, out)
	best, reduced := math.Inf(1), 0
	for _, r := range recs {
		want := r.LR
		if r.TestLoss < best {
			best = r.TestLoss
		} else {
			want /= 2
			reduced++
		}
		if math.Abs(r.NextLR-want) > 1e-12*want {
			t.Errorf("epoch %d: test loss %v (best %v), lr %v -> %v, want %v", r.Epoch, r.TestLoss, best, r.LR, r.NextLR, want)
		}
	}
	if reduced == 0 {
		t.Errorf("the loss improved in every epoch, so the reduction was not exercised: %s", out)
	}
}

// TestSchedule checks that -schedule replaces the plateau rule: a warm-up
// of one epoch from half the step size, then cosine annealing that ends
// at its floor after the last update.
func TestSchedule(t *testing.T) {
	dir := tinyData(t)
	code, out, errOut := runPTB(t, append(quick, "-data", dir, "-epochs", "3", "-json", "-schedule", "warmup:1:0.5+cosine:0.001")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, _ := parseJSONLines(t, out)
	if len(recs) != 3 {
		t.Fatalf("%d epoch records: %s", len(recs), out)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"first update", recs[0].LR, 0.005}, {"first update after the warm-up", recs[1].LR, 0.01}, {"after the last update", recs[2].NextLR, 0.001}} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("step size at the %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	dir := tinyData(t)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "-data is required"},
		{[]string{"-data", dir, "-dropout", "1"}, "-dropout"},
		{[]string{"-data", dir, "-epochs", "0"}, "-epochs"},
		{[]string{"-data", dir, "-hidden", "-3"}, "-hidden"},
		{[]string{"-data", dir, "-optimizer", "rmsprop"}, `-optimizer "rmsprop"`},
		{[]string{"-data", dir, "-lr", "-1"}, "-lr"},
		{[]string{"-data", dir, "-reg", "l1"}, "needs -optimizer proxgen"},
		{[]string{"-data", dir, "-optimizer", "proxgen", "-reg", "l7"}, "-reg"},
		{[]string{"-data", dir, "-optimizer", "proxgen", "-reg", "l1", "-hard-quant-epoch", "2"}, "binary regularizer"},
		{[]string{"-data", dir, "-reg-on", "all"}, "-reg-on"},
		{[]string{"-data", dir, "-lr-decay", "0.5"}, "-lr-decay"},
		{[]string{"-data", dir, "-lr-decay", "2", "-schedule", "cosine"}, "exclude each other"},
		{[]string{"-data", dir, "-schedule", "cosine:x"}, "floor"},
		{[]string{"-data", dir, "-epochs", "2", "-schedule", "warmup:2.5+cosine"}, "leaves nothing"},
		{[]string{"-data", dir, "-momentum", "0.9"}, "-momentum"},
		{[]string{"-data", dir, "extra"}, "unexpected argument"},
		{[]string{"-data", dir, "-nosuchflag"}, "nosuchflag"},
		{[]string{"-data", dir, "-epochs", "many"}, "-epochs"},
		// Issue 26, F5: a tiny model with a huge -bptt or -batch is
		// refused before anything is allocated.
		{[]string{"-data", dir, "-emb", "4", "-hidden", "4", "-bptt", "1000000000"}, "-bptt 1000000000: at most 4096"},
		{[]string{"-data", dir, "-emb", "4", "-hidden", "4", "-bptt", "4096", "-batch", "20"}, "at most 65536 tokens"},
		{[]string{"-data", dir, "-emb", "4", "-hidden", "4", "-batch", "1000000000"}, "-batch 1000000000, -eval-batch 10: at most 4096"},
	}
	for _, c := range cases {
		code, _, errOut := runPTB(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d mentioning %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
	if code, out, _ := runPTB(t, "-h"); code != exitOK || out != "" {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
}

func TestDataErrors(t *testing.T) {
	dir := tinyData(t)
	empty := t.TempDir()
	noTest := t.TempDir()
	if err := os.WriteFile(filepath.Join(noTest, "ptb.valid.txt"), []byte(tinyText(1, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	short := t.TempDir()
	for name, text := range map[string]string{"ptb.valid.txt": tinyText(1, 50), "ptb.test.txt": "the cat\n"} {
		if err := os.WriteFile(filepath.Join(short, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "ptb.test.txt")
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-data", filepath.Join(empty, "missing")}, "missing"},
		{[]string{"-data", file}, "not a folder"},
		{[]string{"-data", empty}, "ptb.test.txt"},
		{[]string{"-data", noTest}, "ptb.test.txt"},
		{[]string{"-data", short}, "too few"},
		{[]string{"-data", dir, "-train", filepath.Join(dir, "nope.txt")}, "nope.txt"},
		{[]string{"-data", dir, "-weights", bad}, "-weights"},
		{[]string{"-data", dir, "-metrics", filepath.Join(empty, "no", "dir", "m.jsonl")}, "-metrics"},
	}
	for _, c := range cases {
		code, _, errOut := runPTB(t, append(c.args, quick...)...)
		if code != exitError || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d mentioning %q", c.args, code, errOut, exitError, c.want)
		}
	}
}

// TestInterrupt cancels the context (Ctrl-C): the run saves a checkpoint
// after the current window and exits with 130; -resume finishes it with
// the results of an uninterrupted run.
func TestInterrupt(t *testing.T) {
	data := tinyData(t)
	args := func(out string) []string {
		return append([]string{"-data", data, "-out", out, "-epochs", "2", "-max-windows", "5", "-json"}, quick...)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	code, refOut, stderr := runPTB(t, args(ref)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := filepath.Join(t.TempDir(), "run")
	var stdout, errb bytes.Buffer
	if code := run(ctx, args(dir), &stdout, &errb); code != exitInterrupted || !strings.Contains(errb.String(), "after step 1/5") {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitInterrupted, errb.String())
	}
	code, out, stderr := runPTB(t, "-out", dir, "-resume", "-threads", "1", "-json")
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	a, sa := parseJSONLines(t, refOut)
	b, sb := parseJSONLines(t, out)
	if len(b) != 2 || a[1].TestLoss != b[1].TestLoss || a[1].TrainLoss != b[1].TrainLoss || sa.TestPPL != sb.TestPPL || sa.BestEpoch != sb.BestEpoch {
		t.Fatalf("resumed run differs: %+v %+v\n%+v %+v", a, sa, b, sb)
	}
	for _, f := range []string{"model.safetensors", "summary.json"} {
		x, _ := os.ReadFile(filepath.Join(ref, f))
		y, _ := os.ReadFile(filepath.Join(dir, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs from the uninterrupted run's", f)
		}
	}
}

// TestTrainWithAllSplits checks the standard layout: with ptb.train.txt
// present it trains on it, reports validation perplexity and adds no note.
func TestTrainWithAllSplits(t *testing.T) {
	dir := tinyData(t)
	if err := os.WriteFile(filepath.Join(dir, "ptb.train.txt"), []byte(tinyText(3, 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPTB(t, append([]string{"-data", dir, "-epochs", "2", "-json"}, quick...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, sum := parseJSONLines(t, out)
	if sum.Note != "" || filepath.Base(sum.Train) != "ptb.train.txt" || filepath.Base(sum.Valid) != "ptb.valid.txt" || strings.Contains(errOut, "note") {
		t.Errorf("summary train %q valid %q note %q; stderr %s", sum.Train, sum.Valid, sum.Note, errOut)
	}
	for _, r := range recs {
		if r.ValidPPL == nil || r.ValidLoss == nil || math.Abs(*r.ValidPPL-math.Exp(*r.ValidLoss)) > 1e-9**r.ValidPPL {
			t.Errorf("epoch %d: validation fields %v %v", r.Epoch, r.ValidLoss, r.ValidPPL)
		}
	}
	// Explicit files without -data; no validation file.
	code, out, errOut = runPTB(t, append([]string{"-train", filepath.Join(dir, "ptb.train.txt"), "-test", filepath.Join(dir, "ptb.test.txt"), "-epochs", "1", "-json"}, quick...)...)
	if code != exitOK {
		t.Fatalf("explicit files: exit %d: %s", code, errOut)
	}
	if recs, sum = parseJSONLines(t, out); recs[0].ValidPPL != nil || !strings.Contains(sum.Note, "no validation file") {
		t.Errorf("explicit files: valid %v, note %q", recs[0].ValidPPL, sum.Note)
	}
}
