package compute

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
)

func TestSetGEMM(t *testing.T) {
	before := blas.Default()
	for _, name := range blas.Kernels() {
		restore, err := setGEMM(" " + name + "\n")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := blas.KernelChoice(), "PROXGEN_GEMM="+name+"; "+name+": "; blas.Kernel() != name || !strings.HasPrefix(got, want) {
			t.Errorf("PROXGEN_GEMM=%s: kernel %s chosen as %q, want the prefix %q", name, blas.Kernel(), got, want)
		}
		restore()
		if blas.Default() != before {
			t.Fatalf("PROXGEN_GEMM=%s: restore left %q", name, blas.KernelChoice())
		}
	}
	for _, v := range []string{"", "  "} {
		restore, err := setGEMM(v)
		if err != nil || blas.Default() != before {
			t.Errorf("PROXGEN_GEMM=%q: error %v, engine %q", v, err, blas.KernelChoice())
		}
		restore()
	}
	_, err := setGEMM("bogus")
	var u *cli.UsageError
	if !errors.As(err, &u) || cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), `PROXGEN_GEMM="bogus"`) ||
		!strings.Contains(err.Error(), strings.Join(blas.Kernels(), ", ")) {
		t.Errorf("PROXGEN_GEMM=bogus: error %v, want a usage error naming the variable and the kernels", err)
	}
	if blas.Default() != before {
		t.Errorf("PROXGEN_GEMM=bogus changed the engine to %q", blas.KernelChoice())
	}
}

func TestSetThreads(t *testing.T) {
	procs, workers := runtime.GOMAXPROCS(0), parallel.Workers()
	n, restore := SetThreads(3)
	if n != 3 || runtime.GOMAXPROCS(0) != 3 || parallel.Workers() != 3 {
		t.Errorf("SetThreads(3) = %d: GOMAXPROCS %d, workers %d", n, runtime.GOMAXPROCS(0), parallel.Workers())
	}
	restore()
	if runtime.GOMAXPROCS(0) != procs || parallel.Workers() != workers {
		t.Errorf("restore left GOMAXPROCS %d, workers %d; want %d, %d", runtime.GOMAXPROCS(0), parallel.Workers(), procs, workers)
	}
	n, restore = SetThreads(0)
	if n != runtime.NumCPU() || parallel.Workers() != n {
		t.Errorf("SetThreads(0) = %d, workers %d; want %d", n, parallel.Workers(), runtime.NumCPU())
	}
	restore()
}
