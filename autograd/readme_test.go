package autograd_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeSnippet checks that the Go code block of the README's "Using
// the engine from Go" is the body of Example, so the README's code always
// compiles and its output is checked.
func TestReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Using the engine from Go\n")
	if !ok {
		t.Fatal(`README.md has no section "## Using the engine from Go"`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the README section has no ```go block")
	}
	snippet, _, ok := strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the README's ```go block is not closed")
	}

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\nfunc Example() {\n")
	if !ok {
		t.Fatal("example_test.go has no func Example")
	}
	body, _, ok = strings.Cut(body, "\t// Output:\n")
	if !ok {
		t.Fatal("Example has no // Output: comment")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if snippet != want.String() {
		t.Errorf("README snippet:\n%s\nExample body:\n%s", snippet, want.String())
	}
}
