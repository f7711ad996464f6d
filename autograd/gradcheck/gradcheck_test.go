package gradcheck_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

func TestCheckAcceptsCorrectGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := autograd.RandN(rng, 4, 3).RequireGrad()
	f := func() *autograd.Tensor { return autograd.Tanh(autograd.Mul(x, x)) }
	if err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
		t.Fatal(err)
	}
	if x.Grad != nil {
		t.Error("Check left a gradient on its input")
	}
}

// TestCheckDetectsWrongGradient feeds Check a function whose backward pass
// misses a path (through a detached copy), so the analytic gradient is half
// the true one; Check must report it.
func TestCheckDetectsWrongGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := autograd.RandN(rng, 5).RequireGrad()
	f := func() *autograd.Tensor { return autograd.Mul(x, x.Detach()) }
	err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{})
	if err == nil || !strings.Contains(err.Error(), "analytic") {
		t.Fatalf("Check = %v, want a mismatch report", err)
	}
}

func TestCheckRejectsNonLeafInput(t *testing.T) {
	x := autograd.New(2).RequireGrad()
	y := autograd.Scale(x, 2)
	if err := gradcheck.Check(func() *autograd.Tensor { return y }, []*autograd.Tensor{y}, gradcheck.Options{}); err == nil {
		t.Fatal("Check accepted an op result as input")
	}
}
