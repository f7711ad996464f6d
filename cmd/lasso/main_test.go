package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallProblem returns a small instance whose exact Lasso minimiser (by
// coordinate descent) has the true support, so exact recovery is possible.
func smallProblem(t *testing.T, lambda float64) (*problem, uint64) {
	t.Helper()
	for seed := uint64(1); seed < 50; seed++ {
		pr, err := newProblem(60, 150, 5, 0.05, seed)
		if err != nil {
			t.Fatal(err)
		}
		ref := cdLasso(pr, lambda, 100000)
		est := make([]float32, len(ref))
		for i, v := range ref {
			est[i] = float32(v)
		}
		if compare(est, pr.truth).ExactSupport {
			return pr, seed
		}
	}
	t.Fatal("no seed with an exactly recovering Lasso minimiser")
	return nil, 0
}

func TestFindings(t *testing.T) {
	const lambda = 0.1
	pr, seed := smallProblem(t, lambda)
	ref := cdLasso(pr, lambda, 100000)
	refObj := 0.0
	{
		est := make([]float32, len(ref))
		for i, v := range ref {
			est[i] = float32(v)
			refObj += lambda * math.Abs(v)
		}
		refObj += pr.grad(make([]float32, pr.p), est)
	}
	run := func(method, variant, init string) ([]float32, float64, metrics) {
		st := withDefaultLR(settings{method: method, variant: variant, init: init, lambda: lambda, steps: 3000, seed: seed, initStd: 1})
		est, obj, err := solve(pr, st)
		if err != nil {
			t.Fatal(err)
		}
		return est, obj, compare(est, pr.truth)
	}
	for _, init := range []string{"random", "zero"} {
		est, obj, m := run("proxgen", "", init)
		if !m.ExactSupport || !m.SignsCorrect || !sameSupport(est, ref) {
			t.Errorf("ProxGen from %s start: %+v", init, m)
		}
		if obj > refObj*(1+1e-4) {
			t.Errorf("ProxGen from %s start: objective %g, Lasso minimum %g", init, obj, refObj)
		}
	}
	// Prox-SGD (official): from a random start no coordinate is exactly
	// zero; from zero it leaves zero wherever |v_t| > λ, just as ProxGen
	// does, and the left coordinates never return to exact zero.
	if _, _, m := run("proxsgd", "official", "random"); m.Zeros != 0 {
		t.Errorf("Prox-SGD from random start has %d exact zeros", m.Zeros)
	}
	if _, _, m := run("proxsgd", "official", "zero"); m.ExactSupport || m.FalsePositives == 0 || m.Zeros == 0 {
		t.Errorf("Prox-SGD from zero start: %+v", m)
	}
	// The scaled-gradient reading reproduces the paper's figures: no
	// exact zeros from a random start, all zeros from a zero start.
	if _, _, m := run("proxsgd", "scaled", "random"); m.Zeros != 0 {
		t.Errorf("scaled Prox-SGD from random start has %d exact zeros", m.Zeros)
	}
	if _, _, m := run("proxsgd", "scaled", "zero"); m.Zeros != pr.p {
		t.Errorf("scaled Prox-SGD from zero start: %d of %d zeros", m.Zeros, pr.p)
	}
}

func TestJSONAndSVG(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "fig.svg")
	var out, errb bytes.Buffer
	args := []string{"-p", "80", "-n", "40", "-s", "4", "-seed", "3", "-steps", "500", "-init", "zero", "-method", "proxgen", "-json", "-svg", svg}
	if err := run(args, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res struct {
		Theta     []float64 `json:"theta"`
		ThetaTrue []float64 `json:"theta_true"`
		Metrics   metrics   `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Theta) != 80 || len(res.ThetaTrue) != 80 {
		t.Fatalf("theta lengths %d %d", len(res.Theta), len(res.ThetaTrue))
	}
	nz := 0
	for _, v := range res.ThetaTrue {
		if v != 0 {
			nz++
			if math.Abs(v) != 1 {
				t.Fatalf("true coefficient %g", v)
			}
		}
	}
	if nz != 4 || res.Metrics.TrueSupport != 4 {
		t.Fatalf("true support %d", nz)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("ProxGen")) {
		t.Fatalf("figure: %v %q", err, b[:min(len(b), 80)])
	}
	out.Reset()
	if err := run([]string{"-p", "30", "-n", "20", "-s", "2", "-steps", "50"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "exact zeros") {
		t.Fatalf("summary: %s", out.String())
	}
	for _, bad := range [][]string{{"-init", "ones"}, {"-method", "sgd"}, {"-s", "900"}, {"-steps", "0"}, {"-proxsgd", "x", "-method", "proxsgd"}, {"extra"}} {
		if err := run(append([]string{"-p", "20", "-n", "10", "-s", "2", "-steps", "5"}, bad...), &out, &errb); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
