package train_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/train"
)

// sameWeights reports whether two runs ended with identical weights.
func sameWeights(a, b *fitLine) bool {
	for i, p := range a.model.Params() {
		for j, v := range p.T.Data {
			if math.Float32bits(v) != math.Float32bits(b.model.Params()[i].T.Data[j]) {
				return false
			}
		}
	}
	return true
}

func TestDivergenceKeepsLastGood(t *testing.T) {
	for _, c := range []struct {
		name   string
		poison func(f *fitLine, step int) float64 // loss override
		want   string
	}{
		{"NaN loss", func(f *fitLine, step int) float64 {
			if step == 5 {
				return math.NaN()
			}
			return -1
		}, "loss NaN at epoch 2 step 1"},
		{"loss bound", func(f *fitLine, step int) float64 {
			if step == 6 {
				return 1e9
			}
			return -1
		}, "above 10000 times the first step's loss"},
		{"NaN weights", func(f *fitLine, step int) float64 {
			if step == 5 {
				f.model.Weight.Data[0] = float32(math.Inf(1)) // as a blown-up update would
			}
			return -1
		}, `tensor "weight" holds +Inf after the update at epoch 2 step 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newFitLine()
			l := f.loop(dir, nil, 0)
			l.SaveEvery = 1
			step, n := l.Step, 0
			l.Step = func(epoch, s int) (float64, int, error) {
				loss, k, err := step(epoch, s)
				n++
				if v := c.poison(f, n); v >= 0 || math.IsNaN(v) {
					loss = v
				}
				return loss, k, err
			}
			_, err := l.Run(context.Background())
			var d *train.DivergedError
			if !errors.As(err, &d) || !strings.Contains(err.Error(), c.want) || d.Checkpoint != filepath.Join(dir, train.CheckpointName) {
				t.Fatalf("error %v, want a DivergedError with %q", err, c.want)
			}
			// The last good checkpoint reads (it holds finite numbers
			// only) and resumes into a fresh model.
			ck, err := train.ReadCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			g := newFitLine()
			l2 := g.loop(dir, nil, 0)
			l2.Resume = ck
			if res, err := l2.Run(context.Background()); err != nil || !res.Complete {
				t.Fatalf("resuming the last good checkpoint: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, train.PrevCheckpointName)); err != nil {
				t.Errorf("no previous generation: %v", err)
			}
		})
	}
}

// TestInterruptedEvaluation cancels the context during an evaluation: the
// checkpoint is the state before it, and the resumed run repeats it and
// ends like an uninterrupted run.
func TestInterruptedEvaluation(t *testing.T) {
	full := newFitLine()
	if _, err := full.loop(t.TempDir(), nil, 0).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	part := newFitLine()
	ctx, cancel := context.WithCancel(context.Background())
	l := part.loop(dir, nil, 0)
	end := l.EndEpoch
	l.EndEpoch = func(ctx context.Context, epoch int, s train.EpochStats) (any, error) {
		if epoch == 1 {
			cancel()
			return nil, ctx.Err()
		}
		return end(ctx, epoch, s)
	}
	if _, err := l.Run(ctx); !errors.Is(err, train.ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
	ck, err := train.ReadCheckpoint(dir)
	if err != nil || ck.Epoch() != 1 || ck.Step() != 4 {
		t.Fatalf("checkpoint at epoch %d step %d (%v), want 1 and 4", ck.Epoch(), ck.Step(), err)
	}
	resumed := newFitLine()
	l = resumed.loop(dir, nil, 0)
	l.Resume = ck
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !sameWeights(full, resumed) {
		t.Fatal("the resumed run ends with other weights")
	}
}

// TestDerivedFiles checks that a run refuses a folder holding a run,
// removes stale temporary files, and that resuming a finished run
// rebuilds missing and stale derived files and reports completion.
func TestDerivedFiles(t *testing.T) {
	dir := t.TempDir()
	f := newFitLine()
	l := f.loop(dir, nil, 0)
	gen := 0
	l.Outputs = []train.Output{
		{Name: "model.safetensors", Data: func(*train.Info) ([]byte, error) { return train.ModelFile(f.model, map[string]string{"k": "v"}) }},
		{Name: "summary.txt", Final: true, Data: func(i *train.Info) ([]byte, error) {
			gen = i.Generation
			return []byte("done\n"), nil
		}},
		{Name: "later.txt", Data: func(i *train.Info) ([]byte, error) { return nil, nil }},
	}
	os.WriteFile(filepath.Join(dir, "later.txt"), []byte("stale"), 0o644)
	os.WriteFile(filepath.Join(dir, ".model.safetensors.tmp-123"), []byte("stale"), 0o644)
	os.WriteFile(filepath.Join(dir, ".other.tmp-1"), []byte("not ours"), 0o644)
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".model.safetensors.tmp-123")); err == nil {
		t.Error("stale temporary file kept")
	}
	if _, err := os.Stat(filepath.Join(dir, ".other.tmp-1")); err != nil {
		t.Error("a file of another program was removed")
	}
	if _, err := os.Stat(filepath.Join(dir, "later.txt")); err == nil {
		t.Error("an output without data was left in place")
	}
	ck, _ := train.ReadCheckpoint(dir)
	if ck.Generation() != gen || gen != 4 { // initial state, 3 epochs
		t.Errorf("checkpoint generation %d, summary written with %d", ck.Generation(), gen)
	}
	if _, err := f.loop(dir, nil, 0).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Errorf("second run in the folder: %v", err)
	}
	model, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	metrics, _ := os.ReadFile(filepath.Join(dir, train.MetricsName))
	os.Remove(filepath.Join(dir, "summary.txt"))
	os.WriteFile(filepath.Join(dir, train.MetricsName), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("old"), 0o644)

	g := newFitLine()
	l2 := g.loop(dir, nil, 0)
	l2.Outputs = l.Outputs
	f.model = g.model // the output closures read f.model
	l2.Resume = ck
	res, err := l2.Run(context.Background())
	if err != nil || !res.Already || !res.Complete || res.Steps != 0 {
		t.Fatalf("resuming a finished run: %+v, %v", res, err)
	}
	for name, want := range map[string][]byte{"model.safetensors": model, train.MetricsName: metrics, "summary.txt": []byte("done\n")} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(got, want) {
			t.Errorf("%s not rebuilt: %q", name, got)
		}
	}
	m := newFitLine()
	if _, err := checkpoint.LoadModel(filepath.Join(dir, "model.safetensors"), m.model); err != nil {
		t.Error(err)
	}
}

func TestFaultEnv(t *testing.T) {
	for _, v := range []string{"crash", "crash:x", "full:-1", "boom:3"} {
		t.Setenv(train.FaultEnv, v)
		if _, err := newFitLine().loop(t.TempDir(), nil, 0).Run(context.Background()); err == nil || !strings.Contains(err.Error(), train.FaultEnv) {
			t.Errorf("%s=%q: %v", train.FaultEnv, v, err)
		}
	}
	// A full disk fails the first write with the injected error and
	// leaves no temporary file.
	t.Setenv(train.FaultEnv, "full:10")
	dir := t.TempDir()
	if _, err := newFitLine().loop(dir, nil, 0).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("full:10: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) > 0 {
		t.Errorf("left %v", m)
	}
}

func TestMarshalJSON(t *testing.T) {
	type rec struct {
		A      float64            `json:"a"`
		B      float32            `json:"b,omitempty"`
		P      *float64           `json:"p,omitempty"`
		S      []float64          `json:"s"`
		M      map[string]float64 `json:"m"`
		Hidden int                `json:"-"`
		Name   string
		T      time.Duration `json:"t"`
	}
	inf := math.Inf(1)
	b, err := train.MarshalJSON(rec{A: math.NaN(), B: 0, P: &inf, S: []float64{1, math.Inf(-1)}, M: map[string]float64{"z": 1, "a": math.NaN()}, Name: "x", T: 3})
	want := `{"a":null,"p":null,"s":[1,null],"m":{"a":null,"z":1},"Name":"x","t":3}`
	if err != nil || string(b) != want {
		t.Errorf("got %s, %v\nwant %s", b, err, want)
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := train.NewProgress(&b, train.ProgressLines, 2, "img")
	p.Begin(1, 3, 5, 0, 10)
	for i := 1; i <= 5; i++ {
		p.Update(i, 1.5, "acc 25.00%", 8*i)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "epoch 1/3 step 2/5 loss 1.5000 acc 25.00% ") || !strings.Contains(lines[0], "img/s ETA") {
		t.Fatalf("lines mode printed %q", b.String())
	}
	b.Reset()
	p = train.NewProgress(&b, train.ProgressBar, 0, "tok")
	p.Begin(2, 3, 4, 2, 0)
	p.Update(3, 1, "", 8)
	p.Update(4, 1, "", 16)
	if out := b.String(); !strings.HasPrefix(out, "\repoch 2/3 [") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, "4/4") {
		t.Errorf("bar output %q", out)
	}
	b.Reset()
	p = train.NewProgress(&b, train.ProgressNone, 0, "x")
	p.Begin(1, 1, 1, 0, 0)
	p.Update(1, 1, "", 1)
	if b.Len() != 0 {
		t.Errorf("none mode printed %q", b.String())
	}
	if train.NewProgress(&b, train.ProgressAuto, 0, "x").Mode() != train.ProgressLines {
		t.Error("auto on a buffer is not lines")
	}
	for _, c := range []struct {
		s    float64
		want string
	}{{0, "0:00"}, {59.6, "1:00"}, {3599, "59:59"}, {3600 * 26, "26:00:00"}, {-1, "?"}, {math.Inf(1), "?"}} {
		if got := train.FormatDuration(c.s); got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.s, got, c.want)
		}
	}
}
