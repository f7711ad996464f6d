package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// processSettings are the calls that change what the whole process
// computes with; the test-only switches of internal/impl are among them.
var processSettings = map[string][]string{
	"github.com/proxgen/proxgen/internal/parallel": {"SetWorkers"},
	"github.com/proxgen/proxgen/autograd/blas":     {"SetDefault"},
	"github.com/proxgen/proxgen/internal/impl":     {"Select", "Reset", "ForEach"},
	"runtime": {"GOMAXPROCS"}, // with an argument other than 0
}

// TestProcessSettingsOnlyInPrograms reads every non-test Go file of the
// module and requires that only programs (cmd/..., scripts/...) change the
// thread count, the GEMM engine of the process or an implementation of
// internal/impl: library code computes with what the program chose.
func TestProcessSettingsOnlyInPrograms(t *testing.T) {
	calls, err := settingCalls("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if !strings.HasPrefix(c, "cmd/") && !strings.HasPrefix(c, "scripts/") {
			t.Errorf("%s: library code changes a setting of the process", c)
		}
	}
	// The check sees the programs' calls, so it would see a library's.
	var found bool
	for _, c := range calls {
		found = found || strings.HasPrefix(c, "cmd/internal/compute/compute.go:") && strings.HasSuffix(c, "parallel.SetWorkers")
	}
	if !found {
		t.Errorf("no call of parallel.SetWorkers found in compute.go among %v", calls)
	}
}

// TestSettingCallsFindsPlanted plants a library that sets the thread count
// under another name and reads GOMAXPROCS, and requires settingCalls to
// report the first only.
func TestSettingCallsFindsPlanted(t *testing.T) {
	root := t.TempDir()
	src := `package x

import (
	"runtime"

	par "github.com/proxgen/proxgen/internal/parallel"
)

func f() int {
	par.SetWorkers(2)
	return runtime.GOMAXPROCS(0)
}
`
	if err := os.MkdirAll(filepath.Join(root, "nn", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "nn", "x", "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, err := settingCalls(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] != "nn/x/x.go:10: par.SetWorkers" {
		t.Errorf("settingCalls = %q, want the one call of par.SetWorkers", calls)
	}
}

// settingCalls returns "file:line: pkg.Func" for each call of a
// processSettings function in the non-test files under root, except in the
// packages that define them.
func settingCalls(root string) ([]string, error) {
	var calls []string
	err := walkGoFiles(root, parser.SkipObjectResolution, func(rel string, fset *token.FileSet, f *ast.File) error {
		local := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if _, ok := processSettings[path]; !ok {
				continue
			}
			n := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || local[x.Name] == "" {
				return true
			}
			for _, fn := range processSettings[local[x.Name]] {
				if sel.Sel.Name != fn {
					continue
				}
				if fn == "GOMAXPROCS" && len(call.Args) == 1 {
					if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == "0" {
						continue // a read
					}
				}
				calls = append(calls, rel+":"+strconv.Itoa(fset.Position(call.Pos()).Line)+": "+x.Name+"."+fn)
			}
			return true
		})
		return nil
	})
	return calls, err
}
