package autograd_test

import (
	"os"
	"strings"
	"testing"
)

// readmeBlocks returns the ```go code blocks of the README section that
// starts with header.
func readmeBlocks(t *testing.T, header string) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), header+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", header)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		var block string
		if _, section, ok = strings.Cut(section, "```go\n"); !ok {
			return blocks
		}
		if block, section, ok = strings.Cut(section, "```\n"); !ok {
			t.Fatalf("a ```go block of README section %q is not closed", header)
		}
		blocks = append(blocks, block)
	}
}

// exampleBody returns the body of the function name in the Go file path,
// up to its "// Output:" comment, with one level of indentation removed.
func exampleBody(t *testing.T, path, name string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\nfunc "+name+"() {\n")
	if !ok {
		t.Fatalf("%s has no func %s", path, name)
	}
	body, _, ok = strings.Cut(body, "\t// Output:\n")
	if !ok {
		t.Fatalf("%s in %s has no // Output: comment", name, path)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		b.WriteString(strings.TrimPrefix(line, "\t"))
	}
	return b.String()
}

// TestReadmeSnippet checks that the Go code blocks of the README's "Using
// the engine from Go" are Examples with checked output, so the README's
// code always compiles and does what it shows: the first block is the
// whole body of this package's Example, the second (training and
// evaluation with a Context) a part of Example_context in nn/models.
func TestReadmeSnippet(t *testing.T) {
	examples := []struct {
		path, name string
		whole      bool // the block is the whole body, not a part of it
	}{
		{"example_test.go", "Example", true},
		{"../nn/models/example_test.go", "Example_context", false},
	}
	blocks := readmeBlocks(t, "## Using the engine from Go")
	if len(blocks) != len(examples) {
		t.Fatalf("the README section has %d Go blocks, the test knows %d Examples", len(blocks), len(examples))
	}
	for i, ex := range examples {
		body := exampleBody(t, ex.path, ex.name)
		if ex.whole && blocks[i] != body || !strings.Contains(body, blocks[i]) {
			t.Errorf("README block %d:\n%s\nis not the body of %s in %s:\n%s", i+1, blocks[i], ex.name, ex.path, body)
		}
	}
}
