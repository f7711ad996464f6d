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
