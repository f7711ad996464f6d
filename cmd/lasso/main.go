// Command lasso runs the support-recovery experiment of the ProxGen paper's
// appendix A: a Lasso problem
//
//	minimise (1/2n)‖y − Xθ‖² + λ‖θ‖₁
//
// with X ~ N(0, 1) of size n×p, a true θ* with s entries ±1 at random
// positions and y = Xθ* + ε, ε ~ N(0, noise²), solved with full-batch
// gradients by ProxGen (Adam preconditioner, ℓ1 prox) or by Prox-SGD
// (Adam preconditioner), from a random or a zero initialisation.
//
// Usage:
//
//	lasso [-p 500] [-n 100] [-s 10] [-noise 0.05] [-seed 1]
//	      [-init random|zero] [-method proxgen|proxsgd] [-lambda 0.1]
//	      [-steps 5000] [-lr α] [-proxsgd official|scaled] [-json] [-svg FILE]
//
// Defaults (documented in docs/lasso.md): λ = 0.1; ProxGen uses
// Adam(0.9, 0.999, δ = 1e-8) with α = 0.01, divided by 10 at 50% and 75%
// of the steps; Prox-SGD uses the official schedules ε_t = ε0/sqrt(t+4)
// with ε0 = 0.06 and ρ_t = 0.9/sqrt(t+4); 5000 steps; the random start is
// N(0, 1) per coordinate. -proxsgd scaled selects the variant whose
// subproblem scales the gradient but not the regularizer by ε_t, under
// which the paper's zero-start figure comes out (see docs/lasso.md).
//
// Without -json it prints a readable summary. With -json the last line of
// standard output is a JSON object with "theta" (the estimate),
// "theta_true" (both of length p), the settings and support metrics,
// including whether the estimate has the support of the exact Lasso
// minimiser (computed by coordinate descent). With -svg FILE it also
// draws the paper's figure: true and estimated coefficients of both
// methods from both initialisations.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/internal/cli"
)

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "lasso: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "lasso:", err)
	}
	// Bad flags exit 2, other failures 1.
	os.Exit(cli.ExitCode(err))
}

// result is the JSON output.
type result struct {
	P             int       `json:"p"`
	N             int       `json:"n"`
	S             int       `json:"s"`
	Noise         float64   `json:"noise"`
	Seed          uint64    `json:"seed"`
	Init          string    `json:"init"`
	Method        string    `json:"method"`
	ProxSGD       string    `json:"proxsgd_variant,omitempty"`
	Lambda        float64   `json:"lambda"`
	LR            float64   `json:"lr"`
	Steps         int       `json:"steps"`
	LambdaMax     float64   `json:"lambda_max"`
	Objective     float64   `json:"objective"`
	LassoObj      float64   `json:"lasso_objective"`
	LassoSupport  bool      `json:"lasso_exact_support"`
	MatchesLasso  bool      `json:"matches_lasso_support"`
	Metrics       metrics   `json:"metrics"`
	Theta         []float32 `json:"theta"`
	ThetaTrue     []float64 `json:"theta_true"`
	ThetaLassoRef []float64 `json:"theta_lasso"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("lasso", "lasso [flags]", "the Lasso support-recovery experiment of the ProxGen paper's appendix A: ProxGen against Prox-SGD (docs/lasso.md)", stderr)
	p := fs.Int("p", 500, "problem dimension")
	n := fs.Int("n", 100, "number of samples")
	s := fs.Int("s", 10, "number of non-zeros (±1) in the true parameter")
	noise := fs.Float64("noise", 0.05, "standard deviation of the response noise")
	seed := fs.Uint64("seed", 1, "random seed for the data and the random start")
	init := fs.String("init", "random", "initialisation: random (N(0, init-std²)) or zero")
	initStd := fs.Float64("init-std", 1, "standard deviation of the random start")
	method := fs.String("method", "proxgen", "solver: proxgen or proxsgd")
	variant := fs.String("proxsgd", "official", "Prox-SGD variant: official (Yang et al. 2020) or scaled (gradient term scaled by ε_t, see docs/lasso.md)")
	lambda := fs.Float64("lambda", 0.1, "ℓ1 strength λ")
	steps := fs.Int("steps", 5000, "number of full-batch updates")
	lr := fs.Float64("lr", 0, "step size: ProxGen's α (default 0.01) or Prox-SGD's ε0 (default 0.06)")
	asJSON := fs.Bool("json", false, "print a JSON object as the last line")
	svg := fs.String("svg", "", "also draw the figure for both methods and both initialisations to this SVG file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case *method != "proxgen" && *method != "proxsgd":
		return cli.Usagef("-method %q: want proxgen or proxsgd", *method)
	case *init != "random" && *init != "zero":
		return cli.Usagef("-init %q: want random or zero", *init)
	case *variant != "official" && *variant != "scaled":
		return cli.Usagef("-proxsgd %q: want official or scaled", *variant)
	}
	if *steps < 1 {
		return cli.Usagef("-steps %d: need at least 1", *steps)
	}
	if !(*lambda >= 0) {
		return cli.Usagef("-lambda %v: need >= 0", *lambda)
	}
	if !(*lr >= 0) || !(*initStd >= 0) {
		return cli.Usagef("-lr and -init-std must be >= 0")
	}
	pr, err := newProblem(*n, *p, *s, *noise, *seed)
	if err != nil {
		return &cli.UsageError{Err: err} // the problem's sizes are flags
	}
	base := settings{init: *init, variant: *variant, lambda: *lambda, lr: *lr, steps: *steps, seed: *seed, initStd: *initStd}
	one := base
	one.method = *method
	est, obj, err := solve(pr, withDefaultLR(one))
	if err != nil {
		return err
	}
	ref := cdLasso(pr, *lambda, 100000)
	refEst := make([]float32, len(ref))
	for i, v := range ref {
		refEst[i] = float32(v)
	}
	g := make([]float32, pr.p)
	refObj := pr.grad(g, refEst)
	for _, v := range ref {
		refObj += *lambda * abs(v)
	}
	res := result{
		P: *p, N: *n, S: *s, Noise: *noise, Seed: *seed, Init: *init, Method: *method,
		Lambda: *lambda, LR: withDefaultLR(one).lr, Steps: *steps,
		LambdaMax: pr.lambdaMax(), Objective: obj, LassoObj: refObj,
		LassoSupport: compare(refEst, pr.truth).ExactSupport,
		MatchesLasso: sameSupport(est, ref),
		Metrics:      compare(est, pr.truth),
		Theta:        est, ThetaTrue: pr.truth, ThetaLassoRef: ref,
	}
	if *method == "proxsgd" {
		res.ProxSGD = *variant
	}
	if *svg != "" {
		if err := drawFigure(*svg, pr, base); err != nil {
			return err
		}
	}
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	printSummary(stdout, res, *svg)
	return nil
}

// withDefaultLR fills in the method's default step size.
func withDefaultLR(st settings) settings {
	if st.lr == 0 {
		st.lr = 0.01
		if st.method == "proxsgd" {
			st.lr = 0.06
		}
	}
	return st
}

func printSummary(w io.Writer, r result, svg string) {
	m := r.Metrics
	name := r.Method
	if r.Method == "proxsgd" {
		name += " (" + r.ProxSGD + ")"
	}
	fmt.Fprintf(w, "Lasso p=%d n=%d s=%d noise=%g seed=%d  λ=%g (λ_max=%.4g)\n", r.P, r.N, r.S, r.Noise, r.Seed, r.Lambda, r.LambdaMax)
	fmt.Fprintf(w, "%s from %s start, %s, step size %g\n", name, r.Init, cli.Count(r.Steps, "step"), r.LR)
	fmt.Fprintf(w, "  objective            %.6f (exact Lasso minimum %.6f)\n", r.Objective, r.LassoObj)
	fmt.Fprintf(w, "  exact zeros          %d of %d (|θ| < 1e-3: %d)\n", m.Zeros, r.P, m.Below1e3)
	fmt.Fprintf(w, "  support              %d found, %d true, %d correct, %d false positives, %d missed\n", m.Support, m.TrueSupport, m.TruePositives, m.FalsePositives, m.FalseNegatives)
	fmt.Fprintf(w, "  exact true support   %v (signs %v); exact Lasso minimiser has it: %v; same support as it: %v\n", m.ExactSupport, m.SignsCorrect, r.LassoSupport, r.MatchesLasso)
	fmt.Fprintf(w, "  max |θ| off support  %.3g   ‖θ − θ*‖₂ %.4f\n", m.MaxAbsOffSupp, m.L2Error)
	if svg != "" {
		fmt.Fprintf(w, "figure written to %s\n", svg)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
