package ptb

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Small texts in the real format: a leading space, words separated by
// single spaces, a trailing space before the newline.
const (
	trainText = " the cat sat on the mat \n a <unk> dog sat \n\n the N cats \n"
	validText = " the dog sat on a zebra \n the cat"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildVocab(t *testing.T) {
	v, ids, err := BuildVocab(writeFile(t, "ptb.train.txt", trainText))
	if err != nil {
		t.Fatal(err)
	}
	// First occurrence order, <eos> after the first line's words; the empty
	// line contributes a lone <eos>.
	wantWords := []string{"the", "cat", "sat", "on", "mat", EOS, "a", Unk, "dog", "N", "cats"}
	if !slices.Equal(v.Words(), wantWords) {
		t.Fatalf("words %q, want %q", v.Words(), wantWords)
	}
	wantIDs := []int{0, 1, 2, 3, 0, 4, 5, 6, 7, 8, 2, 5, 5, 0, 9, 10, 5}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("ids %v, want %v", ids, wantIDs)
	}
	if id, ok := v.ID("dog"); !ok || id != 8 || v.Word(8) != "dog" {
		t.Fatalf("ID(dog) = %d, %v", id, ok)
	}
	if _, ok := v.ID("zebra"); ok {
		t.Fatal("zebra should not be in the vocabulary")
	}
	if got := v.Decode(ids[:6]); got != "the cat sat on the mat" {
		t.Fatalf("Decode = %q", got)
	}
}

func TestEncodeMapsUnknownWords(t *testing.T) {
	v, _, err := BuildVocab(writeFile(t, "ptb.train.txt", trainText))
	if err != nil {
		t.Fatal(err)
	}
	n := v.Len()
	ids, err := v.EncodeFile(writeFile(t, "ptb.valid.txt", validText))
	if err != nil {
		t.Fatal(err)
	}
	// "zebra" becomes <unk>; the last line has no newline but still ends
	// with <eos>.
	want := []int{0, 8, 2, 3, 6, 7, 5, 0, 1, 5}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	if v.Len() != n {
		t.Fatal("EncodeFile changed the vocabulary")
	}
}

func TestEncodeWithoutUnk(t *testing.T) {
	v := NewVocab()
	if _, err := v.AddReader(strings.NewReader("the cat\n"), "train"); err != nil {
		t.Fatal(err)
	}
	// Known words only: fine without <unk>.
	if _, err := v.EncodeReader(strings.NewReader("cat the\n"), "ok"); err != nil {
		t.Fatal(err)
	}
	_, err := v.EncodeReader(strings.NewReader("the cat\nthe dog sat\n"), "ptb.test.txt")
	if err == nil {
		t.Fatal("unknown word without <unk> accepted")
	}
	for _, want := range []string{"ptb.test.txt:2", `"dog"`, "no <unk>"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReadErrors(t *testing.T) {
	_, _, err := BuildVocab(filepath.Join(t.TempDir(), "missing.txt"))
	if err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("missing file: error %v", err)
	}
	bad := writeFile(t, "bad.txt", "fine line\nstill fine\nbroken \xff\xfe byte\n")
	_, _, err = BuildVocab(bad)
	if err == nil || !strings.Contains(err.Error(), "bad.txt:3: invalid UTF-8") {
		t.Fatalf("invalid UTF-8: error %v", err)
	}
	long := writeFile(t, "long.txt", "ok\n"+strings.Repeat("x", maxLine+10)+"\n")
	_, _, err = BuildVocab(long)
	if err == nil || !strings.Contains(err.Error(), "long.txt:2: line longer") {
		t.Fatalf("long line: error %v", err)
	}
}

func TestWhitespaceAndLineEndings(t *testing.T) {
	v := NewVocab()
	ids, err := v.AddReader(strings.NewReader("a\tb  c\r\n\r\nd"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Decode(ids); got != "a b c <eos> <eos> d <eos>" {
		t.Fatalf("tokens %q", got)
	}
	ids, err = v.AddReader(strings.NewReader(""), "empty")
	if err != nil || len(ids) != 0 {
		t.Fatalf("empty text gave %v, %v", ids, err)
	}
}

func TestLoadCorpus(t *testing.T) {
	train := writeFile(t, "ptb.train.txt", trainText)
	valid := writeFile(t, "ptb.valid.txt", validText)
	c, err := LoadCorpus(train, valid, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Train) != 17 || len(c.Valid) != 10 || c.Test != nil || c.Vocab.Len() != 11 {
		t.Fatalf("corpus sizes %d %d %v, vocab %d", len(c.Train), len(c.Valid), c.Test, c.Vocab.Len())
	}
	if _, err := LoadCorpus(train, "", filepath.Join(t.TempDir(), "nope.txt")); err == nil ||
		!strings.Contains(err.Error(), "nope.txt") {
		t.Fatalf("missing test file: error %v", err)
	}
}

func TestBatchify(t *testing.T) {
	ids := make([]int, 26)
	for i := range ids {
		ids[i] = 100 + i
	}
	d := Batchify(ids, 4) // 6 steps, 2 dropped
	if d.T != 6 || d.B != 4 || len(d.IDs) != 24 {
		t.Fatalf("Batchify gave T=%d B=%d len %d", d.T, d.B, len(d.IDs))
	}
	// Stream b holds ids[b*6 : b*6+6]: data[t][b] = ids[b*T + t].
	for tt := range 6 {
		for b := range 4 {
			if d.At(tt, b) != 100+b*6+tt {
				t.Fatalf("data[%d][%d] = %d, want %d", tt, b, d.At(tt, b), 100+b*6+tt)
			}
		}
	}
	if want := []int{100, 106, 112, 118, 101, 107, 113, 119}; !slices.Equal(d.IDs[:8], want) {
		t.Fatalf("first rows %v, want %v", d.IDs[:8], want)
	}
	if e := Batchify(ids[:3], 4); e.T != 0 || len(e.IDs) != 0 {
		t.Fatal("too few tokens should give an empty result")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Batchify with batch 0 did not panic")
		}
	}()
	Batchify(ids, 0)
}

func TestGetBatch(t *testing.T) {
	ids := make([]int, 30)
	for i := range ids {
		ids[i] = i
	}
	d := Batchify(ids, 3) // T = 10; stream b is b*10 .. b*10+9
	var windows [][2]int
	covered := 0
	for i := 0; i < d.T-1; i += 4 {
		x, y, n := GetBatch(d, i, 4)
		windows = append(windows, [2]int{i, n})
		if len(x) != n*3 || len(y) != n*3 {
			t.Fatalf("window at %d: %d inputs, %d targets for n=%d", i, len(x), len(y), n)
		}
		for s := range n {
			for b := range 3 {
				if x[s*3+b] != b*10+i+s || y[s*3+b] != b*10+i+s+1 {
					t.Fatalf("window %d step %d stream %d: input %d target %d", i, s, b, x[s*3+b], y[s*3+b])
				}
			}
		}
		covered += n * 3
		x[0] = -1 // a copy: must not touch d
	}
	if want := [][2]int{{0, 4}, {4, 4}, {8, 1}}; !slices.Equal(windows, want) {
		t.Fatalf("windows %v, want %v", windows, want)
	}
	if NumWindows(d, 4) != 3 || NumWindows(d, 9) != 1 || NumWindows(d, 8) != 2 || NumWindows(d, 1) != 9 {
		t.Fatalf("NumWindows: %d %d %d %d", NumWindows(d, 4), NumWindows(d, 9), NumWindows(d, 8), NumWindows(d, 1))
	}
	if covered != NumTargets(d) || NumTargets(d) != 27 {
		t.Fatalf("windows cover %d targets, NumTargets %d", covered, NumTargets(d))
	}
	if d.IDs[0] != 0 {
		t.Fatal("GetBatch returned a view, not a copy")
	}
	for _, bad := range [][2]int{{9, 4}, {-1, 4}, {0, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("GetBatch(i=%d, bptt=%d) did not panic", bad[0], bad[1])
				}
			}()
			GetBatch(d, bad[0], bad[1])
		}()
	}
}

func TestPerplexity(t *testing.T) {
	// A uniform model over V words has perplexity V.
	const v, tokens = 50, 123
	total := float64(tokens) * math.Log(v)
	if got := Perplexity(total, tokens); math.Abs(got-v) > 1e-9 {
		t.Fatalf("Perplexity = %v, want %v", got, v)
	}
	if got := Perplexity(0, 7); got != 1 {
		t.Fatalf("perfect model perplexity %v", got)
	}
}

// TestRealFiles checks the real PTB files when present; the reference
// numbers come from testdata/reference_stats.py (PyTorch example logic).
func TestRealFiles(t *testing.T) {
	dir := "/work/shared/data/ptb"
	if d := os.Getenv("PTB_DIR"); d != "" {
		dir = d
	}
	valid, test := filepath.Join(dir, "ptb.valid.txt"), filepath.Join(dir, "ptb.test.txt")
	if _, err := os.Stat(valid); err != nil {
		t.Skipf("real PTB files not present: %v", err)
	}
	c, err := LoadCorpus(valid, "", test)
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := c.Vocab.ID(EOS)
	unk, _ := c.Vocab.ID(Unk)
	if len(c.Train) != 73760 || c.Vocab.Len() != 6022 || eos != 13 || unk != 14 {
		t.Fatalf("valid: %d tokens, vocabulary %d, eos %d, unk %d; want 73760, 6022, 13, 14",
			len(c.Train), c.Vocab.Len(), eos, unk)
	}
	unks := 0
	for _, id := range c.Test {
		if id == unk {
			unks++
		}
	}
	if len(c.Test) != 82430 || unks != 8162 {
		t.Fatalf("test: %d tokens, %d <unk>; want 82430, 8162", len(c.Test), unks)
	}
	checksum := func(d *Batched) int {
		s := 0
		for i, id := range d.IDs {
			s = (s + id*i) % 1000003
		}
		return s
	}
	bv := Batchify(c.Train, EvalBatchSize)
	if bv.T != 7376 || !slices.Equal(bv.IDs[:10], []int{0, 354, 351, 1829, 1444, 126, 4786, 165, 13, 1608}) ||
		!slices.Equal(bv.IDs[len(bv.IDs)-10:], []int{459, 1143, 1448, 85, 648, 4785, 53, 1785, 633, 13}) ||
		checksum(bv) != 195410 {
		t.Fatalf("batchified valid differs from PyTorch's: T %d, checksum %d", bv.T, checksum(bv))
	}
	if bt := Batchify(c.Test, EvalBatchSize); bt.T != 8243 || checksum(bt) != 74018 {
		t.Fatalf("batchified test differs from PyTorch's: T %d, checksum %d", bt.T, checksum(bt))
	}
}
