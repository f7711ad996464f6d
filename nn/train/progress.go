package train

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Progress modes.
const (
	ProgressAuto  = "auto"  // a bar on a terminal, lines otherwise
	ProgressBar   = "bar"   // one line redrawn in place
	ProgressLines = "lines" // a line every few steps
	ProgressNone  = "none"  // nothing
)

// Progress reports training progress on a writer (typically standard
// error): a bar with the epoch's and the run's estimated remaining time,
// redrawn in place on a terminal, or plain lines every few steps
// otherwise. The end-of-epoch evaluation has its own line with its own
// estimate (from the caller's EvalUpdate calls, or from the duration of
// the last evaluation), and the run's estimate includes the evaluations
// still to come, timed on the ones done so far; until one is timed the
// run estimate is shown as a lower bound (">0:06"). Every line fits the
// width of the terminal (TerminalWidth), 80 columns when that is unknown.
// A nil *Progress reports nothing.
type Progress struct {
	w        io.Writer
	mode     string
	every    int // steps between lines (0: about ten per epoch)
	unit     string
	interval time.Duration
	now      func() time.Time
	columns  func() int // width of the output in columns

	epoch, epochs int
	total         int // steps in this epoch
	remainingRun  int // steps in the epochs after this one
	start         time.Time
	startDone     int // steps already done when the epoch (re)started
	last          time.Time
	width         int // length of the last bar, for clearing

	rate        float64   // steps per second of the epoch so far
	evalSeconds float64   // duration of the last evaluation; 0: none timed yet
	evalStart   time.Time // start of the current evaluation; zero outside one
	evalLine    int       // eval updates printed in lines mode
}

// IsTerminal reports whether w is a character device such as a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// DefaultColumns is the width assumed when neither the terminal nor
// $COLUMNS gives one.
const DefaultColumns = 80

// TerminalWidth returns the width in columns of the terminal w writes to
// (read with the TIOCGWINSZ ioctl where the platform has it), else the
// positive integer in $COLUMNS, else DefaultColumns.
func TerminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if n := ioctlColumns(f.Fd()); n > 0 {
			return n
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return DefaultColumns
}

// NewProgress returns a reporter writing to w in mode (ProgressAuto,
// ProgressBar, ProgressLines or ProgressNone). In lines mode it prints
// every every steps (0: about ten lines per epoch). unit names what
// Loop's steps count as samples in the throughput, for example "img" or
// "tok".
func NewProgress(w io.Writer, mode string, every int, unit string) *Progress {
	if mode == ProgressAuto || mode == "" {
		mode = ProgressLines
		if IsTerminal(w) {
			mode = ProgressBar
		}
	}
	return &Progress{w: w, mode: mode, every: every, unit: unit, interval: 100 * time.Millisecond, now: time.Now,
		columns: func() int { return TerminalWidth(w) }}
}

// SetColumns fixes the width of the lines to n columns instead of reading
// it from the terminal (n <= 0 restores that).
func (p *Progress) SetColumns(n int) {
	if p == nil {
		return
	}
	if n <= 0 {
		p.columns = func() int { return TerminalWidth(p.w) }
		return
	}
	p.columns = func() int { return n }
}

// Mode returns the resolved mode: bar, lines or none.
func (p *Progress) Mode() string {
	if p == nil {
		return ProgressNone
	}
	return p.mode
}

// Begin starts epoch (counted from 1) of epochs with total steps, done of
// which are already done (a resumed epoch), and remainingRun steps in
// later epochs.
func (p *Progress) Begin(epoch, epochs, total, done, remainingRun int) {
	if p == nil {
		return
	}
	p.epoch, p.epochs, p.total, p.remainingRun = epoch, epochs, total, remainingRun
	p.start = p.now()
	p.startDone = done
	p.last = time.Time{}
	p.rate = 0
}

// evalsLeft returns how many evaluations the run still has, counting the
// current epoch's unless it is running.
func (p *Progress) evalsLeft() int {
	n := p.epochs - p.epoch + 1
	if !p.evalStart.IsZero() {
		n--
	}
	return max(n, 0)
}

// etas returns the epoch's and the run's estimated remaining time, given
// the seconds left in the current phase (negative: unknown).
func (p *Progress) etas(phase float64) (eta, run string) {
	later, laterKnown := 0.0, true // training of the later epochs
	if p.remainingRun > 0 {
		later, laterKnown = float64(p.remainingRun)/p.rate, p.rate > 0
	}
	evals := p.evalsLeft()
	timed := evals == 0 || p.evalSeconds > 0
	inEval := !p.evalStart.IsZero()
	switch {
	case phase < 0 && laterKnown && !timed:
		return "?", ">" + FormatDuration(later)
	case phase < 0 || !laterKnown:
		if phase >= 0 && (inEval || timed) {
			return FormatDuration(phase + p.evalSeconds*b2f(!inEval)), "?"
		}
		return "?", "?"
	case timed:
		return FormatDuration(phase + p.evalSeconds*b2f(!inEval)), FormatDuration(phase + later + float64(evals)*p.evalSeconds)
	case inEval:
		// This evaluation's estimate is its own; later ones are untimed.
		return FormatDuration(phase), ">" + FormatDuration(phase+later)
	default:
		// No evaluation timed yet: lower bounds.
		return ">" + FormatDuration(phase), ">" + FormatDuration(phase+later)
	}
}

// b2f is 1 for true and 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Update reports that done steps of the epoch are finished, with the
// epoch's running mean loss, extra text (for example "acc 51.20%") and the
// samples processed in this session of the epoch.
func (p *Progress) Update(done int, loss float64, extra string, samples int) {
	if p == nil || p.mode == ProgressNone {
		return
	}
	now := p.now()
	elapsed := now.Sub(p.start).Seconds()
	perS := 0.0 // samples per second
	p.rate = 0
	if elapsed > 0 {
		p.rate = float64(done-p.startDone) / elapsed
		perS = float64(samples) / elapsed
	}
	phase := -1.0
	if p.rate > 0 {
		phase = float64(p.total-done) / p.rate
	}
	eta, runETA := p.etas(phase)
	head := fmt.Sprintf("epoch %d/%d", p.epoch, p.epochs)
	fields := []field{
		{text: fmt.Sprintf("loss %.4f", loss), drop: 4},
		{text: extra, drop: 2},
		{text: fmt.Sprintf("%.0f %s/s", perS, p.unit), drop: 1},
		{text: "ETA " + eta},
		{text: "(run " + runETA + ")", drop: 3},
	}
	switch p.mode {
	case ProgressBar:
		if done < p.total && now.Sub(p.last) < p.interval {
			return
		}
		p.last = now
		p.draw(head, done, p.total, fields, done >= p.total)
	case ProgressLines:
		every := p.every
		if every <= 0 {
			every = max(1, p.total/10)
		}
		if done%every != 0 && done != p.total {
			return
		}
		p.println(fit(p.columns(), head, fmt.Sprintf("step %d/%d", done, p.total), -1, fields))
	}
}

// BeginEval starts the evaluation of the current epoch: from here on the
// run estimate counts it as running, and a line says it is running, with
// the duration of the last evaluation as its estimate. Loop calls it
// before EndEpoch; the caller's evaluation may report its batches with
// EvalUpdate.
func (p *Progress) BeginEval() {
	if p == nil || p.mode == ProgressNone {
		return
	}
	p.evalStart = p.now()
	p.evalLine = 0
	p.last = time.Time{}
	p.evalUpdate(0, 0)
}

// EvalUpdate reports that done of total evaluation batches (or samples)
// are finished.
func (p *Progress) EvalUpdate(done, total int) {
	if p == nil || p.mode == ProgressNone || p.evalStart.IsZero() {
		return
	}
	p.evalUpdate(done, total)
}

func (p *Progress) evalUpdate(done, total int) {
	now := p.now()
	elapsed := now.Sub(p.evalStart).Seconds()
	phase := -1.0
	switch {
	case done > 0 && total > 0 && elapsed > 0:
		phase = elapsed * float64(total-done) / float64(done)
	case p.evalSeconds > 0:
		phase = max(p.evalSeconds-elapsed, 0)
	}
	eta, runETA := p.etas(phase)
	head := fmt.Sprintf("epoch %d/%d", p.epoch, p.epochs)
	fields := []field{{text: "ETA " + eta}, {text: "(run " + runETA + ")", drop: 3}}
	switch p.mode {
	case ProgressBar:
		if total > 0 && done < total && now.Sub(p.last) < p.interval {
			return
		}
		p.last = now
		p.draw(head+" eval", done, total, fields, false)
	case ProgressLines:
		// The start, then about every quarter of the evaluation.
		if total > 0 && done < total && done*4/total <= p.evalLine {
			return
		}
		if total > 0 {
			p.evalLine = done * 4 / total
		}
		progress := "evaluating"
		if total > 0 {
			progress = fmt.Sprintf("eval %d/%d", done, total)
		}
		p.println(fit(p.columns(), head, progress, -1, fields))
	}
}

// EndEval ends the evaluation begun by BeginEval and times it for the
// estimates of the evaluations to come. A bar line is cleared, so that
// the caller's epoch summary takes its place.
func (p *Progress) EndEval() {
	if p == nil || p.evalStart.IsZero() {
		return
	}
	p.Interrupt()
	p.evalSeconds = p.now().Sub(p.evalStart).Seconds()
	p.evalStart = time.Time{}
}

// field is a part of a progress line; when the line does not fit, fields
// with a drop rank are left out, rank 1 first.
type field struct {
	text string
	drop int // 0: always kept
}

// barMin and barMax bound the width of the bar between its brackets.
const barMin, barMax = 10, 24

// fit builds a progress line of at most columns-1 columns (the last column
// is left free so that no terminal wraps): head, a bar filled to bar
// thousandths when bar >= 0, the count text, then the fields. When the
// line is too long it narrows the bar, leaves out optional fields, then
// the bar, and cuts the line as a last resort.
func fit(columns int, head, count string, bar int, fields []field) string {
	limit := max(columns-1, 20)
	maxDrop := 0
	for _, f := range fields {
		maxDrop = max(maxDrop, f.drop)
	}
	build := func(level, barWidth int) string {
		var b strings.Builder
		b.WriteString(head)
		if barWidth > 0 {
			b.WriteString(" [")
			b.WriteString(barText(barWidth, bar))
			b.WriteString("]")
		}
		if count != "" {
			b.WriteString(" ")
			b.WriteString(count)
		}
		for _, f := range fields {
			if f.text != "" && (f.drop == 0 || f.drop > level) {
				b.WriteString(" ")
				b.WriteString(f.text)
			}
		}
		return b.String()
	}
	widths := []int{0}
	if bar >= 0 {
		widths = []int{barMax, barMin}
	}
	for level := 0; level <= maxDrop; level++ {
		for _, w := range widths {
			if line := build(level, w); utf8.RuneCountInString(line) <= limit {
				return line
			}
		}
	}
	line := build(maxDrop, 0)
	if utf8.RuneCountInString(line) <= limit {
		return line
	}
	return string([]rune(line)[:limit])
}

// barText draws a bar of width characters filled to fill thousandths.
func barText(width, fill int) string {
	n := width * min(fill, 1000) / 1000
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	return bar
}

// draw redraws the bar line of done/total (total 0: no bar, the word
// "evaluating"), ending it
// with a newline when end is set.
func (p *Progress) draw(head string, done, total int, fields []field, end bool) {
	count, fill := "evaluating", -1 // an evaluation that reports no batches
	if total > 0 {
		count = fmt.Sprintf("%d/%d", done, total)
		fill = 1000 * done / total
	}
	columns := p.columns()
	line := fit(columns, head, count, fill, fields)
	pad := ""
	if n := min(p.width, columns-1) - utf8.RuneCountInString(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = utf8.RuneCountInString(line)
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	if end {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

// println prints a whole line in lines mode.
func (p *Progress) println(line string) { fmt.Fprintln(p.w, line) }

// Interrupt ends a bar line early so that following messages start on a
// fresh line.
// An evaluation line is cleared instead: the next update redraws it.
func (p *Progress) Interrupt() {
	if p != nil && p.mode == ProgressBar && p.width > 0 {
		if p.evalStart.IsZero() {
			fmt.Fprintln(p.w)
		} else {
			fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		}
		p.width = 0
	}
}

// Logf prints a message line, ending an unfinished bar first. With mode
// none it still prints: messages are not progress.
//
// A line wider than the terminal is wrapped at spaces (WrapText).
func (p *Progress) Logf(format string, args ...any) {
	if p == nil {
		return
	}
	p.Interrupt()
	fmt.Fprintln(p.w, WrapText(p.columns(), "  ", fmt.Sprintf(format, args...)))
}

// FormatDuration writes sec seconds as h:mm:ss or m:ss ("?" when sec is
// negative or not finite).
func FormatDuration(sec float64) string {
	if !(sec >= 0) || math.IsInf(sec, 0) {
		return "?"
	}
	s := int(sec + 0.5)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// WrapFields joins fields with spaces into lines of at most columns-1
// columns (the last column is left free, as Progress does), starting a
// new line, indented by indent, before a field that would not fit; a
// field longer than a line gets a line of its own. The result has no
// final newline. Programs use it for their per-epoch lines, with the
// width of TerminalWidth(stdout).
func WrapFields(columns int, indent string, fields []string) string {
	limit := max(columns-1, 20)
	var b strings.Builder
	n := 0 // columns on the current line
	for _, f := range fields {
		if f == "" {
			continue
		}
		w := utf8.RuneCountInString(f)
		switch {
		case n == 0:
		case n+1+w <= limit:
			b.WriteByte(' ')
			n++
		default:
			b.WriteString("\n")
			b.WriteString(indent)
			n = utf8.RuneCountInString(indent)
		}
		b.WriteString(f)
		n += w
	}
	return b.String()
}

// WrapText returns each line of text that fits in columns-1 columns as it
// is, and wraps a longer one with WrapFields, keeping its indentation: at
// the ends of its comma-separated phrases ("86.36% exactly zero, 86.38%
// below 1e-3") when each phrase fits on a line after indent, at its spaces
// otherwise (runs of spaces between words then become one).
func WrapText(columns int, indent, text string) string {
	limit := max(columns-1, 20)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if utf8.RuneCountInString(l) <= limit {
			continue
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " "))]
		if phrases := splitPhrases(l); phrases != nil && fitPhrases(phrases, limit-utf8.RuneCountInString(indent)) {
			lines[i] = WrapFields(columns, indent, phrases)
			continue
		}
		fields := strings.Fields(l)
		fields[0] = lead + fields[0] // keep the indentation
		lines[i] = WrapFields(columns, indent, fields)
	}
	return strings.Join(lines, "\n")
}

// splitPhrases splits l after each ", " into phrases that keep their comma
// (the first keeps l's indentation), or returns nil when l has no ", ".
func splitPhrases(l string) []string {
	parts := strings.Split(l, ", ")
	if len(parts) < 2 {
		return nil
	}
	for i := range parts[:len(parts)-1] {
		parts[i] += ","
	}
	return parts
}

// fitPhrases reports whether every phrase after the first fits in width
// columns (the first starts the line and may be longer).
func fitPhrases(phrases []string, width int) bool {
	for _, p := range phrases[1:] {
		if utf8.RuneCountInString(p) > width {
			return false
		}
	}
	return true
}
