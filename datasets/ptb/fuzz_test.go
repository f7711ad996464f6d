package ptb

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTokenize reads arbitrary text: it must fail (invalid UTF-8, an
// over-long line) or give ids that decode to the text's words, and
// encoding the same text with the finished vocabulary gives the same ids.
func FuzzTokenize(f *testing.F) {
	f.Add("the cat sees the dog \n a <unk> \n")
	f.Add("")
	f.Add("\n\n  \t x\r\n")
	f.Add("\xff bad")
	f.Add("<eos> <unk> N $")
	f.Fuzz(func(t *testing.T, text string) {
		v := NewVocab()
		ids, err := v.AddReader(strings.NewReader(text), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ptb: fuzz:") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		var want []string
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if !utf8.ValidString(line) {
				t.Fatalf("invalid UTF-8 line %q accepted", line)
			}
			want = append(want, strings.Fields(line)...)
			want = append(want, EOS)
		}
		if text == "" {
			want = nil
		}
		got := strings.Fields(v.Decode(ids))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("decoded %q, want %q", got, want)
		}
		again, err := v.EncodeReader(strings.NewReader(text), "fuzz")
		if err != nil || len(again) != len(ids) {
			t.Fatalf("re-encoding: %v, %d ids for %d", err, len(again), len(ids))
		}
		for i := range ids {
			if again[i] != ids[i] {
				t.Fatalf("id %d: %d then %d", i, ids[i], again[i])
			}
		}
	})
}
