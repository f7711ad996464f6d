package benchrun

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
)

func TestGemm(t *testing.T) {
	defer parallel.SetWorkers(parallel.SetWorkers(2))
	r, err := Gemm(blas.Default(), GemmConfig{M: 37, N: 29, K: 41, TransB: true, Reps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.M != 37 || r.N != 29 || r.K != 41 || r.Threads != 2 || !r.TransB || r.Reps != 3 || r.Kernel == "" || !strings.Contains(r.KernelChoice, r.Kernel+": ") {
		t.Errorf("result %+v does not echo the configuration", r)
	}
	if !(r.GFLOPS > 0) || !(r.Seconds > 0) || r.Seconds > r.MedianSeconds {
		t.Errorf("implausible timing %+v", r)
	}
}

func TestGemmKernel(t *testing.T) {
	eng, err := blas.NewEngine("generic")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Gemm(eng, GemmConfig{M: 8, N: 8, K: 8, TransA: true, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kernel != "generic" || !strings.HasPrefix(r.KernelChoice, `NewEngine("generic")`) || !r.TransA {
		t.Errorf("result %+v: want the generic engine, A transposed", r)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	checkTable(t, out.String(), "best_GF/s", `kernel generic, chosen as NewEngine("generic")`)
}

func TestGemmBadConfig(t *testing.T) {
	for _, c := range []GemmConfig{
		{M: 0, N: 1, K: 1, Reps: 1},
		{M: 1, N: 1, K: -3, Reps: 1},
		{M: 1, N: 1, K: 1, Reps: 0},
		{M: 1, N: 1, K: 1, Reps: 1, Warmup: -1},
		{M: 1, N: 1, K: 1, Reps: 1, WarmupTime: -1},
		{M: 1 << 16, N: 1 << 16, K: 1, Reps: 1},
	} {
		if _, err := Gemm(blas.Default(), c); err == nil {
			t.Errorf("Gemm(%+v) succeeded, want an error", c)
		}
	}
}
