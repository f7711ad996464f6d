package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module path; imports below it are checked.
const module = "github.com/proxgen/proxgen"

// rules is the layer table of docs/architecture.md. "a, b < c, d;" means
// that c and d may import a and b and everything that a and b may import.
// Names in capitals are groups (pseudo-packages) that stand for what was
// put below them; NONE is the standard library only. Every package of the
// module appears exactly once on a right-hand side. Test files are not
// checked: tests may reach across layers (a layer's test may train a
// model or read a dataset).
const rules = `
# Internals: the standard library only, apart from the kernel registry.
NONE
< internal/cpu, internal/atomicfile, internal/cli, internal/dirs,
  internal/procstat, internal/neonenc, internal/cifarinfo, internal/readme,
  internal/layers, internal/parallel, internal/regfile, internal/jsonschema;
internal/cpu < internal/impl;
internal/cpu, internal/impl, internal/parallel < INTERNALS;

# Kernels: never autograd, models or anything above.
INTERNALS < autograd/blas, autograd/internal/kernels;
autograd/internal/kernels < autograd/nchwc; # the sparse row kernels
autograd/blas, autograd/internal/kernels, autograd/nchwc < autograd/conv; # the convolution engine, its plans and sparse weights
autograd/blas, autograd/internal/kernels, autograd/nchwc, autograd/conv < KERNELS;

# Autograd: tensors and differentiable ops over the kernels.
KERNELS < autograd < autograd/gradcheck;

# Data: readers of the official layouts; no autograd, no models.
internal/cifarinfo, internal/dirs < datasets, datasets/cifar10, datasets/ptb < DATA;

# Models and files: layers, the paper's networks, model files. Never
# optim or datasets.
internal/atomicfile, internal/regfile < nn/checkpoint/safetensors;
autograd, internal/cifarinfo < nn < nn/internal/nntest;
nn, nn/checkpoint/safetensors < nn/checkpoint;
nn/checkpoint < nn/models;
nn/models < MODELS;

# Inference, export and pruning: never optim or datasets.
MODELS, KERNELS < nn/infer < nn/pretrained, nn/onnx;
MODELS < nn/prune;
nn/infer, nn/pretrained, nn/onnx, nn/prune < INFERENCE;

# Optimizers: update rules over autograd tensors; never models or data.
NONE < optim/schedule;
INTERNALS < optim/internal/proxk < optim/prox;
INTERNALS < optim/internal/opttest; # helpers for optim's tests
autograd, optim/schedule, optim/prox < optim < OPTIM;

# Training and serving libraries.
MODELS, OPTIM, internal/dirs < nn/train;
nn/train, internal/cli < nn/train/traintest; # helpers for the programs' tests
INFERENCE, internal/regfile < nn/infer/serve;
nn/train, nn/infer/serve, INFERENCE < LIBRARY;

# The application: what the programs share. Nothing but programs imports it.
KERNELS, internal/cli < cmd/internal/compute;
LIBRARY, DATA, internal/cli, internal/procstat, cmd/internal/compute
< cmd/internal/experiment
< cmd/internal/cifarrun, cmd/internal/ptbrun
< cmd/internal/sweep;
LIBRARY, internal/procstat < cmd/internal/benchrun; # the harnesses of cmd/bench
cmd/internal/sweep, cmd/internal/benchrun < APP;

# Programs: main packages; nothing imports them.
APP < cmd/bench, cmd/cifar, cmd/export, cmd/lasso, cmd/ptb, cmd/serve, cmd/sweep;
`

// parseRules returns, for every package and group named in src, the set
// of module packages it may import.
func parseRules(src string) (map[string]map[string]bool, error) {
	allowed := map[string]map[string]bool{"NONE": {}}
	var stmts []string
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		stmts = append(stmts, line)
	}
	for _, stmt := range strings.Split(strings.Join(stmts, " "), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		var below []string
		for i, part := range strings.Split(stmt, "<") {
			var names []string
			for _, n := range strings.Split(part, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				return nil, fmt.Errorf("rule %q: empty list", strings.TrimSpace(stmt))
			}
			if i == 0 {
				for _, n := range names {
					if allowed[n] == nil {
						return nil, fmt.Errorf("rule %q: %s is used before it is defined", strings.TrimSpace(stmt), n)
					}
				}
				below = names
				continue
			}
			for _, n := range names {
				if allowed[n] != nil {
					return nil, fmt.Errorf("rule %q: %s is defined twice", strings.TrimSpace(stmt), n)
				}
				set := map[string]bool{}
				for _, b := range below {
					if !isGroup(b) {
						set[b] = true
					}
					for p := range allowed[b] {
						set[p] = true
					}
				}
				allowed[n] = set
			}
			below = names
		}
	}
	return allowed, nil
}

// isGroup reports whether name is a group rather than a package.
func isGroup(name string) bool { return name == strings.ToUpper(name) }

// check returns one message per import that the rules do not allow and
// per package that has no rule; imports maps each module package
// (relative to the module) to the module packages its non-test files
// import.
func check(allowed map[string]map[string]bool, imports map[string][]string) []string {
	var bad []string
	for _, pkg := range slices.Sorted(func(yield func(string) bool) {
		for p := range imports {
			if !yield(p) {
				return
			}
		}
	}) {
		ok, known := allowed[pkg]
		if !known {
			bad = append(bad, fmt.Sprintf("package %s has no rule in internal/layers (add it to the layer table)", pkg))
			continue
		}
		for _, imp := range imports[pkg] {
			if !ok[imp] {
				bad = append(bad, fmt.Sprintf("%s imports %s, which its layer does not allow", pkg, imp))
			}
		}
	}
	return bad
}

// moduleImports reads the import clauses of every non-test Go file under
// root, whatever its build constraints, and returns the module packages
// each package imports.
func moduleImports(root string) (map[string][]string, error) {
	imports := map[string][]string{}
	err := walkGoFiles(root, parser.ImportsOnly|parser.ParseComments, func(rel string, _ *token.FileSet, f *ast.File) error {
		if isIgnored(f.Comments) {
			return nil // a generator or script run with go run
		}
		pkg := path.Dir(rel)
		if _, seen := imports[pkg]; !seen {
			imports[pkg] = nil
		}
		for _, spec := range f.Imports {
			ip, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if ip == module || strings.HasPrefix(ip, module+"/") {
				ip = strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
				if !slices.Contains(imports[pkg], ip) {
					imports[pkg] = append(imports[pkg], ip)
				}
			}
		}
		return nil
	})
	return imports, err
}

// walkGoFiles parses every non-test Go file under root with mode (other
// modules, testdata and hidden folders left out) and calls fn with its
// slash-separated path relative to root.
func walkGoFiles(root string, mode parser.Mode, fn func(rel string, fset *token.FileSet, f *ast.File) error) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
				return filepath.SkipDir // another module (generators)
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, mode)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), fset, f)
	})
}

// isIgnored reports whether a file's comments hold the build constraint
// "ignore".
func isIgnored(groups []*ast.CommentGroup) bool {
	for _, g := range groups {
		for _, c := range g.List {
			if c.Text == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	allowed, err := parseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	imports, err := moduleImports("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < 40 {
		t.Fatalf("found only %d packages under the module root", len(imports))
	}
	for _, msg := range check(allowed, imports) {
		t.Error(msg)
	}
	for name := range allowed {
		if _, ok := imports[name]; !ok && !isGroup(name) {
			t.Errorf("the layer table names %s, which is not a package of the module", name)
		}
	}
}

// TestImportRulesCatchViolations plants violations in a copy of the
// module's import graph and checks that each is reported.
func TestImportRulesCatchViolations(t *testing.T) {
	allowed, err := parseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"nn", "optim"},                       // layers never import optim
		{"nn/models", "datasets/cifar10"},     // models never import datasets
		{"nn/infer", "optim"},                 // inference never imports optim
		{"nn/onnx", "datasets/ptb"},           // export never imports datasets
		{"nn/prune", "optim"},                 // pruning never imports optim
		{"nn/checkpoint", "optim/schedule"},   // model files never import optim
		{"autograd/blas", "autograd"},         // kernels never import autograd
		{"autograd/conv", "autograd"},         // nor does the convolution engine
		{"autograd/nchwc", "nn"},              // nor anything above
		{"nn/train", "cmd/internal/cifarrun"}, // nothing imports the application
		{"cmd/internal/sweep", "cmd/cifar"},   // nor a program
		{"optim", "nn"},                       // optimizers never import models
		{"optim/prox", "optim"},               // regularizers never import the update rules
		{"optim/prox", "autograd"},            // nor tensors
	} {
		imports := map[string][]string{c.from: {c.to}}
		got := check(allowed, imports)
		if len(got) != 1 || !strings.Contains(got[0], c.from+" imports "+c.to) {
			t.Errorf("%s importing %s: check reported %q", c.from, c.to, got)
		}
	}
	if got := check(allowed, map[string][]string{"nn/newpkg": nil}); len(got) != 1 || !strings.Contains(got[0], "no rule") {
		t.Errorf("a package without a rule: check reported %q", got)
	}
	for _, bad := range []string{"a < b; a < c;", "x < nn;", "NONE < a; NONE < a;", "NONE < , ;"} {
		if _, err := parseRules(bad); err == nil {
			t.Errorf("parseRules(%q) accepted", bad)
		}
	}
}
