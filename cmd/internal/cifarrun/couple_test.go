package cifarrun

import (
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/nn/models"
)

// TestCoupleBN checks that the filter group regularizers couple every
// convolution with its batch norm unless -no-couple-bn is given, and that
// other regularizers get no coupling.
func TestCoupleBN(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-reg", "gl21"}, 19},
		{[]string{"-reg", "gl0", "-optimizer", "proxsgd"}, 19},
		{[]string{"-reg", "gl21", "-no-couple-bn"}, 0},
		{[]string{"-reg", "gl21:in"}, 0},
		{[]string{"-reg", "gl1/2"}, 19},
		{[]string{"-reg", "l1"}, 0},
	} {
		c := mustParse(t, append([]string{"-model", "resnet20", "-width", "0.25"}, tc.args...)...)
		model, err := models.New(c.Model, 10, rand.New(rand.NewPCG(1, 2)), models.WithWidth(c.Width))
		if err != nil {
			t.Fatal(err)
		}
		m, err := newMethod(c, model, 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, g := range m.Opt.Groups() {
			got += len(g.Couplings)
		}
		if got != tc.want {
			t.Errorf("%v: %d couplings, want %d", tc.args, got, tc.want)
		}
	}
}

// TestRegCostPixels checks that -reg-cost pixels gives each regularized
// weight λ times its layer's output pixels over the largest layer's, one
// optimizer group per multiplier, with the couplings and the homotopy kept.
func TestRegCostPixels(t *testing.T) {
	c := mustParse(t, "-model", "resnet20", "-width", "0.25", "-shortcut", "B", "-optimizer", "proxgen-sgd", "-reg", "gl0:block",
		"-lambda", "2048", "-lambda-scale", "1", "-reg-cost", "pixels")
	model, err := models.New(c.Model, 10, rand.New(rand.NewPCG(1, 2)), models.WithWidth(c.Width), models.WithShortcut(models.ShortcutB))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMethod(c, model, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	lambda := make(map[string]float64)
	for _, g := range m.Regs {
		for _, name := range g.Names {
			if _, dup := lambda[name]; dup {
				t.Errorf("%s in two groups", name)
			}
			lambda[name] = g.Lambda
		}
	}
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"conv1.weight", 2048},
		{"layer1.2.conv2.weight", 2048},
		{"layer2.0.conv1.weight", 512}, // stride 2: 16×16 outputs
		{"layer2.0.shortcut.0.weight", 512},
		{"layer3.1.conv1.weight", 128},
		{"linear.weight", 2},
	} {
		if got := lambda[tc.name]; got != tc.want {
			t.Errorf("λ of %s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := len(lambda); n != len(m.Weights) {
		t.Errorf("%d weights in the groups, want %d", n, len(m.Weights))
	}
	if len(m.Regs) != 4 {
		t.Errorf("%d regularized groups, want 4 (one per multiplier)", len(m.Regs))
	}
	c.Homotopy = "on"
	if m, err = newMethod(c, model, 100, 1); err != nil {
		t.Fatal(err)
	}
	m.SetEpoch(3)
	for _, g := range m.Regs {
		if g.Names[0] == "linear.weight" && g.Lambda != 6 {
			t.Errorf("homotopy epoch 3: λ of the classifier = %v, want 6", g.Lambda)
		}
	}
	c = mustParse(t, "-model", "resnet20", "-width", "0.25", "-shortcut", "B", "-reg", "gl21", "-reg-cost", "pixels")
	if m, err = newMethod(c, model, 100, 1); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, g := range m.Opt.Groups() {
		got += len(g.Couplings)
	}
	if got != 21 {
		t.Errorf("-reg-cost pixels with gl21: %d couplings, want 21 (19 and the two shortcuts')", got)
	}
}
