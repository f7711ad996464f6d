// Package ptb reads the word-level Penn Treebank language-modelling data
// (ptb.train.txt, ptb.valid.txt, ptb.test.txt as distributed with Mikolov's
// RNNLM toolkit) and prepares it the way PyTorch's word_language_model
// example does, for the LSTM language-model experiment of the ProxGen paper
// (Appendix B of arXiv:2007.07484).
//
// Each line of a file is split on white space and the end-of-sentence token
// "<eos>" is appended, so a file of L lines and W words yields W+L tokens.
// The vocabulary is built from the training file: ids are given in order of
// first occurrence (the first word of the file gets id 0, "<eos>" gets its id
// after the last word of the first line), exactly as the PyTorch example's
// Dictionary does, so ids agree with models trained there. The preprocessed
// PTB already maps rare words to "<unk>" and has a 10,000-word vocabulary
// including "<unk>" and "<eos>"; files encoded with an existing vocabulary
// map words it lacks to "<unk>".
//
// A token stream is cut into B parallel streams with Batchify and read in
// windows of bptt steps with GetBatch:
//
//	c, err := ptb.LoadCorpus("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")
//	...
//	train := ptb.Batchify(c.Train, 20)
//	for i := 0; i < train.T-1; i += 35 {
//		x, y, n := ptb.GetBatch(train, i, 35) // n×20 inputs and targets
//		...
//	}
package ptb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode/utf8"
)

// Special tokens.
const (
	EOS = "<eos>" // appended to every line
	Unk = "<unk>" // stands for words outside the vocabulary
)

// Standard settings of the PyTorch word_language_model example, used by the
// paper's LSTM experiments.
const (
	TrainBatchSize = 20 // parallel streams for training
	EvalBatchSize  = 10 // parallel streams for validation and test
	BPTT           = 35 // truncated back-propagation length
)

// maxLine bounds the length of one line of a text file.
const maxLine = 16 << 20

// Vocab maps words to dense integer ids 0..Len()-1.
type Vocab struct {
	words []string
	ids   map[string]int
}

// NewVocab returns an empty vocabulary.
func NewVocab() *Vocab {
	return &Vocab{ids: make(map[string]int)}
}

// Len returns the number of words in v.
func (v *Vocab) Len() int { return len(v.words) }

// Add returns the id of word, adding it with the next free id if it is new.
func (v *Vocab) Add(word string) int {
	if id, ok := v.ids[word]; ok {
		return id
	}
	id := len(v.words)
	v.words = append(v.words, word)
	v.ids[word] = id
	return id
}

// ID returns the id of word and whether v holds it.
func (v *Vocab) ID(word string) (int, bool) {
	id, ok := v.ids[word]
	return id, ok
}

// Word returns the word with the given id; it panics if id is out of range.
func (v *Vocab) Word(id int) string {
	if id < 0 || id >= len(v.words) {
		panic(fmt.Sprintf("ptb.Vocab.Word: id %d out of range [0, %d)", id, len(v.words)))
	}
	return v.words[id]
}

// Words returns a copy of the words of v in id order.
func (v *Vocab) Words() []string { return append([]string(nil), v.words...) }

// Decode returns the words for ids joined by single spaces.
func (v *Vocab) Decode(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.Word(id))
	}
	return b.String()
}

// AddReader reads a text in PTB format from r, adds its new words to v in
// order of first occurrence and returns the token ids. name is used in error
// messages (normally the file name).
func (v *Vocab) AddReader(r io.Reader, name string) ([]int, error) {
	var ids []int
	err := scan(r, name, func(word string, line int) error {
		ids = append(ids, v.Add(word))
		return nil
	})
	return ids, err
}

// AddFile is AddReader for the file at path.
func (v *Vocab) AddFile(path string) ([]int, error) {
	return withFile(path, v.AddReader)
}

// EncodeReader reads a text in PTB format from r and returns its token ids
// under v, without changing v. Words v lacks become Unk; it is an error,
// naming the place and the word, when such a word occurs and v has no Unk.
func (v *Vocab) EncodeReader(r io.Reader, name string) ([]int, error) {
	unk, hasUnk := v.ids[Unk]
	var ids []int
	err := scan(r, name, func(word string, line int) error {
		id, ok := v.ids[word]
		if !ok {
			if !hasUnk {
				return fmt.Errorf("ptb: %s:%d: word %q is not in the vocabulary, which has no %s to map it to",
					name, line, word, Unk)
			}
			id = unk
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// EncodeFile is EncodeReader for the file at path.
func (v *Vocab) EncodeFile(path string) ([]int, error) {
	return withFile(path, v.EncodeReader)
}

// BuildVocab reads the training file at path and returns the vocabulary of
// its words (in order of first occurrence) and its token ids.
func BuildVocab(path string) (*Vocab, []int, error) {
	v := NewVocab()
	ids, err := v.AddFile(path)
	if err != nil {
		return nil, nil, err
	}
	return v, ids, nil
}

// Corpus is a vocabulary and the token ids of the three splits.
type Corpus struct {
	// Vocab is built from the training file.
	Vocab *Vocab
	// Train, Valid and Test are the token ids of the splits; a split
	// whose path was empty is nil.
	Train, Valid, Test []int
}

// LoadCorpus builds the vocabulary from the training file and encodes the
// validation and test files with it. An empty valid or test path leaves that
// split nil, so an experiment can, for example, train on ptb.valid.txt and
// evaluate on ptb.test.txt with LoadCorpus(valid, "", test).
func LoadCorpus(train, valid, test string) (*Corpus, error) {
	v, trainIDs, err := BuildVocab(train)
	if err != nil {
		return nil, err
	}
	c := &Corpus{Vocab: v, Train: trainIDs}
	if valid != "" {
		if c.Valid, err = v.EncodeFile(valid); err != nil {
			return nil, err
		}
	}
	if test != "" {
		if c.Test, err = v.EncodeFile(test); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// withFile opens path and passes it to read.
func withFile(path string, read func(io.Reader, string) ([]int, error)) ([]int, error) {
	// Stat before opening: opening a FIFO would block until a writer
	// comes, and a directory is no text file.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory"
		}
		return nil, fmt.Errorf("ptb: %s is %s, not a text file", path, what)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ptb: %w", err)
	}
	defer f.Close()
	return read(f, path)
}

// scan calls fn for every token of the text in r: the white-space separated
// words of each line followed by EOS. Lines are numbered from 1.
func scan(r io.Reader, name string, fn func(word string, line int) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if !utf8.Valid(text) {
			return fmt.Errorf("ptb: %s:%d: invalid UTF-8", name, line)
		}
		for _, w := range strings.Fields(string(text)) {
			if err := fn(w, line); err != nil {
				return err
			}
		}
		if err := fn(EOS, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("ptb: %s:%d: line longer than %d bytes", name, line+1, maxLine)
		}
		return fmt.Errorf("ptb: %s: reading after line %d: %w", name, line, err)
	}
	return nil
}

// Batched is a token stream cut into B parallel streams of T steps, stored
// time-major: IDs[t*B+b] is step t of stream b. Stream b is the b-th
// contiguous slice of the original stream, as in the PyTorch example's
// batchify (data.view(B, -1).t()).
type Batched struct {
	IDs []int // T·B token ids, time-major
	T   int   // steps per stream
	B   int   // parallel streams
}

// At returns step t of stream b.
func (d *Batched) At(t, b int) int { return d.IDs[t*d.B+b] }

// Batchify cuts ids into batchSize streams of len(ids)/batchSize steps,
// dropping the remainder, and returns them time-major. It panics if
// batchSize is not positive.
func Batchify(ids []int, batchSize int) *Batched {
	if batchSize <= 0 {
		panic(fmt.Sprintf("ptb.Batchify: batch size %d, want > 0", batchSize))
	}
	steps := len(ids) / batchSize
	d := &Batched{IDs: make([]int, steps*batchSize), T: steps, B: batchSize}
	for b := range batchSize {
		stream := ids[b*steps : (b+1)*steps]
		for t, id := range stream {
			d.IDs[t*batchSize+b] = id
		}
	}
	return d
}

// GetBatch returns the window of data starting at step i: inputs are steps
// i..i+n-1 and targets steps i+1..i+n, with n = min(bptt, T-1-i), each as
// n×B ids in time-major order (element t*B+b). The slices are fresh copies.
// It panics unless 0 <= i < T-1 and bptt > 0.
func GetBatch(d *Batched, i, bptt int) (input, target []int, n int) {
	if bptt <= 0 || i < 0 || i >= d.T-1 {
		panic(fmt.Sprintf("ptb.GetBatch: step %d with bptt %d, want 0 <= step < %d and bptt > 0", i, bptt, d.T-1))
	}
	n = min(bptt, d.T-1-i)
	input = append([]int(nil), d.IDs[i*d.B:(i+n)*d.B]...)
	target = append([]int(nil), d.IDs[(i+1)*d.B:(i+1+n)*d.B]...)
	return input, target, n
}

// NumWindows returns how many GetBatch windows of length bptt cover d
// (i = 0, bptt, 2*bptt, … while i < T-1).
func NumWindows(d *Batched, bptt int) int {
	if bptt <= 0 {
		panic(fmt.Sprintf("ptb.NumWindows: bptt %d, want > 0", bptt))
	}
	if d.T < 2 {
		return 0
	}
	return (d.T - 2 + bptt) / bptt
}

// NumTargets returns the number of predicted tokens in one pass over d:
// (T-1)*B, the denominator of the per-token cross-entropy.
func NumTargets(d *Batched) int {
	if d.T < 2 {
		return 0
	}
	return (d.T - 1) * d.B
}

// Perplexity returns exp(totalCE / tokens), where totalCE is the summed
// (not averaged) natural-log cross-entropy over tokens predicted tokens. With
// a loss averaged over each window of n×B targets, totalCE is the sum of
// loss*n*B, and tokens is NumTargets. It panics if tokens is not positive.
func Perplexity(totalCE float64, tokens int) float64 {
	if tokens <= 0 {
		panic(fmt.Sprintf("ptb.Perplexity: %d tokens, want > 0", tokens))
	}
	return math.Exp(totalCE / float64(tokens))
}
