package pretrained_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/pretrained"
)

var update = flag.Bool("update", false, "rewrite testdata/logits.json with the training graph's logits of every shipped model")

const goldenFile = "testdata/logits.json"

// inputs returns four synthetic raw CIFAR-10 images (channel-major bytes,
// as in the dataset's records): noise, a colour gradient, a checkerboard
// and a constant grey. The real CIFAR-10 images are never committed.
func inputs() [][]byte {
	const side, plane = cifarinfo.Width, cifarinfo.Width * cifarinfo.Height
	imgs := make([][]byte, 4)
	for i := range imgs {
		imgs[i] = make([]byte, 3*plane)
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	for i := range imgs[0] {
		imgs[0][i] = byte(rng.IntN(256))
	}
	for c := range 3 {
		for y := range side {
			for x := range side {
				p := c*plane + y*side + x
				imgs[1][p] = byte((x*8*(c+1) + y*3) % 256)
				if (x/4+y/4)%2 == 0 {
					imgs[2][p] = byte(40 + 80*c)
				} else {
					imgs[2][p] = byte(230 - 60*c)
				}
				imgs[3][p] = 128
			}
		}
	}
	return imgs
}

// batch returns the inputs preprocessed by m.
func batch(t *testing.T, m *infer.Model) []float32 {
	var x []float32
	for _, img := range inputs() {
		dst := make([]float32, infer.InputSize)
		if err := m.PreprocessRaw(dst, img); err != nil {
			t.Fatal(err)
		}
		x = append(x, dst...)
	}
	return x
}

// trainingGraphLogits runs the network of the shipped model name as the
// training code builds it (no inference plan), in evaluation mode.
func trainingGraphLogits(t *testing.T, name string, x []float32) []float32 {
	f, err := pretrained.File(name)
	if err != nil {
		t.Fatal(err)
	}
	net, _, err := infer.Network(f, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	net.SetTraining(false)
	ctx := &autograd.Context{NoGrad: true}
	n := len(x) / infer.InputSize
	return net.Forward(autograd.FromSlice(slices.Clone(x), n, 3, infer.Side, infer.Side).In(ctx)).Data
}

// TestLogits checks that every shipped model loads and reproduces the
// committed logits, through nn/infer (sparse by default, and dense) and
// through the training graph.
func TestLogits(t *testing.T) {
	golden := map[string][]float32{}
	if !*update {
		b, err := os.ReadFile(goldenFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &golden); err != nil {
			t.Fatalf("%s: %v", goldenFile, err)
		}
	}
	names := pretrained.Names()
	if !slices.Contains(names, pretrained.Default) {
		t.Errorf("the default model %q is not among the shipped ones %v", pretrained.Default, names)
	}
	for _, name := range names {
		m, err := pretrained.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		x := batch(t, m)
		ref := trainingGraphLogits(t, name, x)
		if *update {
			golden[name] = ref
			continue
		}
		want, ok := golden[name]
		if !ok {
			t.Errorf("%s: no committed logits in %s (go test -update)", name, goldenFile)
			continue
		}
		dense, err := pretrained.Open(name, infer.Dense())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			how    string
			logits []float32
			tol    float64
		}{
			{"training graph", ref, 1e-5},
			{"nn/infer", m.Logits(nil, x), 2e-4},
			{"nn/infer dense", dense.Logits(nil, x), 2e-4},
		} {
			if d := maxRelDiff(c.logits, want); d > c.tol {
				t.Errorf("%s through the %s: logits differ from the committed ones by %.3g (tolerance %.0e)\n got %v\nwant %v", name, c.how, d, c.tol, c.logits, want)
			}
		}
	}
	if *update {
		b, err := json.MarshalIndent(golden, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// maxRelDiff returns max |a-b| / max(1, max |b|).
func maxRelDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, s float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		s = max(s, math.Abs(float64(b[i])))
	}
	return d / max(s, 1)
}

// TestCards checks every model card against its file: the size and the
// fraction of exact zeros it states, and that it gives the eval-only
// command for this file.
func TestCards(t *testing.T) {
	size := regexp.MustCompile(`\| file size \| ([0-9,]+) bytes`)
	zeros := regexp.MustCompile(`\| exact zeros \(convolution and linear weights\) \| ([0-9.]+) %`)
	for _, name := range pretrained.Names() {
		card, err := pretrained.Card(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pretrained.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pretrained.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if s := size.FindStringSubmatch(card); s == nil || s[1] != group(len(b)) {
			t.Errorf("%s: card states the file size %q, the file has %s bytes", name, s, group(len(b)))
		}
		want := fmt.Sprintf("%.2f", 100*m.Sparsity().ZeroRatio())
		if s := zeros.FindStringSubmatch(card); s == nil || s[1] != want {
			t.Errorf("%s: card states %q %% exact zeros, the file has %s %%", name, s, want)
		}
		if cmd := "-eval-only -weights nn/pretrained/models/" + name + ".safetensors"; !regexp.MustCompile(regexp.QuoteMeta(cmd)).MatchString(card) {
			t.Errorf("%s: the card does not give the eval-only command (%s)", name, cmd)
		}
	}
}

// group writes n with thousands separators.
func group(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestUnknown checks the error for a name that is not shipped.
func TestUnknown(t *testing.T) {
	if _, err := pretrained.Open("resnet20-none"); !errors.Is(err, pretrained.ErrUnknown) {
		t.Fatalf("unknown model: error %v, want ErrUnknown", err)
	}
	if pretrained.Has("resnet20-none") || pretrained.Has("") {
		t.Fatal("Has reports an unknown model")
	}
}
