package train

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeClock is a settable time source.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) advance(seconds float64) {
	c.t = c.t.Add(time.Duration(seconds * float64(time.Second)))
}
func newFakeProgress(b *bytes.Buffer, mode string, columns int) (*Progress, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgress(b, mode, 0, "img")
	p.now = c.now
	p.interval = 0
	p.SetColumns(columns)
	return p, c
}

// screenLines splits bar output at carriage returns and newlines.
func screenLines(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\r' || r == '\n' })
}

// TestProgressFitsWidth checks that no bar or line is wider than the
// terminal less one column, for long status texts and narrow terminals,
// and that the epoch count and the ETA stay.
func TestProgressFitsWidth(t *testing.T) {
	for _, mode := range []string{ProgressBar, ProgressLines} {
		for _, cols := range []int{40, 60, 80, 132} {
			var b bytes.Buffer
			p, clock := newFakeProgress(&b, mode, cols)
			p.Begin(12, 300, 390, 0, 390*288)
			for i := 1; i <= 390; i++ {
				clock.advance(0.25)
				p.Update(i, 2.302585, "acc 51.20% zeros 93.17% λ 1.0e-05", 128*i)
			}
			p.BeginEval()
			for i := 1; i <= 79; i++ {
				clock.advance(0.1)
				p.EvalUpdate(i, 79)
			}
			p.EndEval()
			for _, l := range screenLines(b.String()) {
				l = strings.TrimRight(l, " ")
				if l == "" {
					continue
				}
				if n := utf8.RuneCountInString(l); n > cols-1 {
					t.Errorf("%s, %d columns: line of %d columns: %q", mode, cols, n, l)
				}
				if !strings.HasPrefix(l, "epoch 12/300") || !strings.Contains(l, "ETA ") {
					t.Errorf("%s, %d columns: line without the epoch or the ETA: %q", mode, cols, l)
				}
			}
			if cols >= 80 && !strings.Contains(b.String(), "(run ") {
				t.Errorf("%s, %d columns: no run estimate in %q", mode, cols, b.String())
			}
		}
	}
}

// TestProgressEvalETA checks that evaluation has its own line with its
// own estimate, that the run estimate is a lower bound until an
// evaluation is timed, and that it then includes the evaluations left.
func TestProgressEvalETA(t *testing.T) {
	var b bytes.Buffer
	p, clock := newFakeProgress(&b, ProgressLines, 200)
	// Epoch 1 of 2: 10 steps of 1 s, then an evaluation of 5 s.
	p.Begin(1, 2, 10, 0, 10)
	clock.advance(4)
	p.Update(4, 1, "", 4)
	// 6 s left in the epoch, 10 in the next: lower bounds, evaluation unknown.
	if got := lastLine(&b); !strings.Contains(got, "ETA >0:06 (run >0:16)") {
		t.Fatalf("before any evaluation: %q, want ETA >0:06 (run >0:16)", got)
	}
	clock.advance(6)
	p.Update(10, 1, "", 10)
	p.BeginEval()
	if got := lastLine(&b); !strings.Contains(got, "epoch 1/2 evaluating ETA ? (run >0:10)") {
		t.Fatalf("evaluation start: %q", got)
	}
	clock.advance(2)
	p.EvalUpdate(2, 5)
	// 3 s left in the evaluation by its own rate, then 10 s of training
	// and an evaluation not yet timed.
	if got := lastLine(&b); !strings.Contains(got, "epoch 1/2 eval 2/5 ETA 0:03 (run >0:13)") {
		t.Fatalf("evaluation update: %q", got)
	}
	clock.advance(3)
	p.EvalUpdate(5, 5)
	p.EndEval()
	// Epoch 2: the 5 s evaluation is counted in both estimates.
	p.Begin(2, 2, 10, 0, 0)
	clock.advance(4)
	p.Update(4, 1, "", 4)
	if got := lastLine(&b); !strings.Contains(got, "ETA 0:11 (run 0:11)") {
		t.Fatalf("with a timed evaluation: %q, want ETA 0:11 (run 0:11) (6 s of steps and 5 s of evaluation)", got)
	}
	clock.advance(6)
	p.Update(10, 1, "", 10)
	p.BeginEval()
	// Without updates from the evaluation, the last one's duration.
	if got := lastLine(&b); !strings.Contains(got, "epoch 2/2 evaluating ETA 0:05 (run 0:05)") {
		t.Fatalf("second evaluation start: %q", got)
	}
}

func lastLine(b *bytes.Buffer) string {
	l := screenLines(b.String())
	return l[len(l)-1]
}

// TestProgressEvalBar checks the bar of an evaluation and that it is
// cleared at its end, leaving the training bar's last line.
func TestProgressEvalBar(t *testing.T) {
	var b bytes.Buffer
	p, clock := newFakeProgress(&b, ProgressBar, 80)
	p.Begin(1, 1, 2, 0, 0)
	clock.advance(1)
	p.Update(1, 1, "", 1)
	clock.advance(1)
	p.Update(2, 1, "", 2)
	p.BeginEval()
	clock.advance(1)
	p.EvalUpdate(1, 4)
	p.EndEval()
	out := b.String()
	if !strings.Contains(out, "epoch 1/1 eval [") || !strings.Contains(out, "] 1/4 ETA 0:03") {
		t.Fatalf("no evaluation bar in %q", out)
	}
	if !strings.HasSuffix(out, "\r") || strings.HasSuffix(strings.TrimRight(out, " \r"), "ETA 0:03 (run 0:03)") == false {
		t.Fatalf("evaluation bar not cleared at its end: %q", out)
	}
}

// TestTerminalWidth checks the width read from a pseudo-terminal and the
// fallbacks: $COLUMNS, then 80.
func TestTerminalWidth(t *testing.T) {
	var b bytes.Buffer
	t.Setenv("COLUMNS", "")
	if got := TerminalWidth(&b); got != DefaultColumns {
		t.Errorf("width of a buffer without $COLUMNS: %d, want %d", got, DefaultColumns)
	}
	t.Setenv("COLUMNS", "123")
	if got := TerminalWidth(&b); got != 123 {
		t.Errorf("width of a buffer with COLUMNS=123: %d", got)
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := TerminalWidth(f); got != 123 {
		t.Errorf("width of a regular file with COLUMNS=123: %d", got)
	}
	pts, cols := openPTY(t, 57)
	if pts == nil {
		return
	}
	if got := TerminalWidth(pts); got != cols {
		t.Errorf("width of a %d-column pseudo-terminal: %d", cols, got)
	}
}

func TestWrapFields(t *testing.T) {
	fields := []string{"epoch 12/300", "loss 2.3026", "obj 2.3027", "train 10.00%", "test 10.00% (loss 2.3026)",
		"zeros 93.17%", "|w|<1e-3 95.00%", "lr 0.001", "λ 2e-06", "12.3 s", "1234 img/s"}
	for _, cols := range []int{40, 80, 200} {
		out := WrapFields(cols, "  ", fields)
		for _, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > cols-1 {
				t.Errorf("%d columns: line of %d: %q", cols, n, l)
			}
		}
		if got := strings.Join(strings.Fields(out), " "); got != strings.Join(strings.Fields(strings.Join(fields, " ")), " ") {
			t.Errorf("%d columns: fields changed: %q", cols, out)
		}
		if cols == 200 && strings.Contains(out, "\n") {
			t.Errorf("200 columns: wrapped %q", out)
		}
	}
}

func TestWrapText(t *testing.T) {
	text := "short line\n  indented line that is much too long for a narrow terminal of forty columns"
	got := WrapText(40, "      ", text)
	lines := strings.Split(got, "\n")
	if lines[0] != "short line" || !strings.HasPrefix(lines[1], "  indented ") || !strings.HasPrefix(lines[2], "      ") {
		t.Fatalf("WrapText:\n%s", got)
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 39 {
			t.Errorf("line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
}

// TestWrapTextPhrases: a summary line wraps after its commas, never inside
// a phrase, and keeps its words.
func TestWrapTextPhrases(t *testing.T) {
	text := "weights           86.36% exactly zero, 86.38% below 1e-3, 86.90% below 1e-2, 0.00% at ±1"
	got := WrapText(50, strings.Repeat(" ", 18), text)
	lines := strings.Split(got, "\n")
	if len(lines) < 2 {
		t.Fatalf("not wrapped at 50 columns: %q", got)
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) > 49 {
			t.Errorf("line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
		if i < len(lines)-1 && !strings.HasSuffix(l, ",") {
			t.Errorf("line %d ends inside a phrase: %q", i, l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(text), " ") {
		t.Errorf("words changed: %q", got)
	}
}
