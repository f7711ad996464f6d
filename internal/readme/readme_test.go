package readme

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// root is the checkout's root folder, relative to this package.
const root = "../.."

// block is a fenced code block of the README.
type block struct {
	lang, text string
	line       int // line of the opening fence, from 1
}

func readmeBlocks(t *testing.T) []block {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var cur *block
	for i, line := range strings.Split(string(src), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("README.md: the block opened at line %d is not closed", cur.line)
	}
	return blocks
}

// modelPath is the model file the first command writes and the serving
// examples read: cmd/cifar's run folder for its default optimizer,
// regularizer and seed with -model resnet20.
const modelPath = "runs/resnet20-proxgen-l12-s1/model.safetensors"

// exampleImage is the picture the serving examples send.
const exampleImage = "docs/serve-example.png"

// TestGoBlocks builds every Go block of the README as the main package of
// a module outside the checkout that requires proxgen with a replace
// directive, as a user would, runs it in a folder holding what the README
// says it reads (a model file where the first command writes it, the
// example image), and compares its output with the text block that
// follows it, when there is one.
func TestGoBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	blocks := readmeBlocks(t)
	n := 0
	for i, b := range blocks {
		if b.lang != "go" {
			continue
		}
		n++
		if !strings.HasPrefix(b.text, "package main\n") || !strings.Contains(b.text, "\nfunc main() {\n") {
			t.Errorf("README.md:%d: the Go block is not a whole program (package main with func main)", b.line)
			continue
		}
		dir := t.TempDir()
		gomod := "module example.com/readme\n\ngo 1.24\n\nrequire github.com/proxgen/proxgen v0.0.0\n\nreplace github.com/proxgen/proxgen => " + abs + "\n"
		write(t, filepath.Join(dir, "go.mod"), []byte(gomod))
		write(t, filepath.Join(dir, "main.go"), []byte(b.text))
		if strings.Contains(b.text, modelPath) {
			writeModel(t, filepath.Join(dir, modelPath))
		}
		if strings.Contains(b.text, exampleImage) {
			img, err := os.ReadFile(filepath.Join(root, exampleImage))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, exampleImage), img)
		}
		cmd := exec.Command(goBin, "run", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("README.md:%d: go run: %v\n%s", b.line, err, stderr.String())
			continue
		}
		if i+1 < len(blocks) && blocks[i+1].lang == "text" {
			if got, want := stdout.String(), blocks[i+1].text; got != want {
				t.Errorf("README.md:%d: the program printed\n%s\nthe README shows (line %d)\n%s", b.line, got, blocks[i+1].line, want)
			}
		} else if stdout.Len() == 0 {
			t.Errorf("README.md:%d: the program printed nothing", b.line)
		}
	}
	if n < 3 {
		t.Errorf("%d Go blocks in README.md, want the three of the engine and serving sections", n)
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeModel writes an untrained ResNet-20 model file with the metadata
// cmd/cifar records.
func writeModel(t *testing.T, path string) {
	t.Helper()
	spec := models.Spec{Model: "resnet20"}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.SaveModel(path, net, m.Spec().Metadata()); err != nil {
		t.Fatal(err)
	}
}

// TestCommandsChain checks the README's shell commands as a sequence: the
// first command runs in a bare checkout (nothing outside it, no command
// substitution that can fail), every path under runs/ is the folder it
// writes, and every file sent with curl is in the repository.
func TestCommandsChain(t *testing.T) {
	var commands []string
	for _, b := range readmeBlocks(t) {
		if b.lang == "sh" {
			for _, line := range strings.Split(strings.TrimSpace(b.text), "\n") {
				commands = append(commands, line)
			}
		}
	}
	if len(commands) == 0 || !strings.HasPrefix(commands[0], "go run ./cmd/cifar ") {
		t.Fatalf("the README's first command is %q, want go run ./cmd/cifar", commands[0])
	}
	first, _, _ := strings.Cut(commands[0], "#")
	for _, bad := range []string{"../", "$(", "`", "-out", "-optimizer", "-reg", "-seed"} {
		if strings.Contains(first, bad) {
			t.Errorf("the first command %q contains %q: it must work in a bare checkout and write %s", first, bad, filepath.Dir(modelPath))
		}
	}
	if !strings.Contains(first, "-model resnet20") {
		t.Errorf("the first command %q does not train resnet20, whose run folder the serving examples read", first)
	}
	// cmd/cifar's documentation names the run folder of its defaults.
	doc, err := os.ReadFile(filepath.Join(root, "cmd/cifar/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "("+filepath.Dir(modelPath)+")") {
		t.Errorf("cmd/cifar does not document %s as its default run folder", filepath.Dir(modelPath))
	}
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`runs/[A-Za-z0-9._/-]+`).FindAllString(string(src), -1) {
		if m != modelPath && m != filepath.Dir(modelPath)+"/" {
			t.Errorf("README.md names %s; the first command writes %s", m, filepath.Dir(modelPath))
		}
	}
	sent := 0
	for _, c := range commands {
		if !strings.HasPrefix(c, "curl ") {
			continue
		}
		for _, m := range regexp.MustCompile(`@([^\s'"]+)`).FindAllStringSubmatch(c, -1) {
			sent++
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("%q sends %s, which is not in the repository: %v", c, m[1], err)
			}
		}
	}
	if sent == 0 {
		t.Error("no README command sends a file to the server")
	}
}

// TestStaticBinaries runs the README's build command with the output
// folder replaced by a temporary one and checks that every binary is
// static: no ELF interpreter and no shared library needed.
func TestStaticBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every program")
	}
	if runtime.GOOS != "linux" {
		t.Skip("checks ELF binaries")
	}
	var build string
	for _, b := range readmeBlocks(t) {
		for _, line := range strings.Split(b.text, "\n") {
			if b.lang == "sh" && strings.Contains(line, " go build ") {
				build = line
			}
		}
	}
	if build == "" {
		t.Fatal("README.md has no go build command")
	}
	build, _, _ = strings.Cut(build, "#")
	fields := strings.Fields(build)
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env, fields = append(env, fields[0]), fields[1:]
	}
	if len(fields) < 2 || fields[0] != "go" || fields[1] != "build" {
		t.Fatalf("README build command %q is not [VAR=value ...] go build ...", build)
	}
	out := t.TempDir() + "/"
	args := fields[2:]
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"build"}, args...)...)
	cmd.Dir = root
	// As a user's shell would: the README's variables over the
	// environment, whose CGO_ENABLED (if any) they replace.
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, b)
	}
	bins, _ := filepath.Glob(out + "*")
	if len(bins) < 5 {
		t.Fatalf("%s built %v, want the five programs", build, bins)
	}
	for _, bin := range bins {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has an ELF interpreter: it is dynamically linked", filepath.Base(bin))
			}
		}
		if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v", filepath.Base(bin), libs)
		}
		f.Close()
	}
}

// TestBuildLineListsEveryProgram: the README's build command names, in
// its comment, the binary of every program under cmd/ (issue 35: bin/sweep
// was missing).
func TestBuildLineListsEveryProgram(t *testing.T) {
	var build string
	for _, b := range readmeBlocks(t) {
		for _, line := range strings.Split(b.text, "\n") {
			if b.lang == "sh" && strings.Contains(line, " go build ") {
				build = line
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "internal" && !strings.Contains(build, "bin/"+e.Name()) {
			t.Errorf("the README's build line %q does not list bin/%s", build, e.Name())
		}
	}
}
