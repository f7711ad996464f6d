package train

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
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
// otherwise. A nil *Progress reports nothing.
type Progress struct {
	w        io.Writer
	mode     string
	every    int // steps between lines (0: about ten per epoch)
	unit     string
	interval time.Duration
	now      func() time.Time

	epoch, epochs int
	total         int // steps in this epoch
	remainingRun  int // steps in the epochs after this one
	start         time.Time
	startDone     int // steps already done when the epoch (re)started
	last          time.Time
	width         int // length of the last bar, for clearing
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
	return &Progress{w: w, mode: mode, every: every, unit: unit, interval: 100 * time.Millisecond, now: time.Now}
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
	rate, perS := 0.0, 0.0 // steps and samples per second
	if elapsed > 0 {
		rate = float64(done-p.startDone) / elapsed
		perS = float64(samples) / elapsed
	}
	eta, runETA := "?", "?"
	if rate > 0 {
		eta = FormatDuration(float64(p.total-done) / rate)
		runETA = FormatDuration(float64(p.total-done+p.remainingRun) / rate)
	}
	if extra != "" {
		extra = " " + extra
	}
	switch p.mode {
	case ProgressBar:
		if done < p.total && now.Sub(p.last) < p.interval {
			return
		}
		p.last = now
		const barWidth = 24
		fill := barWidth * done / max(p.total, 1)
		bar := strings.Repeat("=", fill)
		if fill < barWidth {
			bar += ">" + strings.Repeat(" ", barWidth-fill-1)
		}
		line := fmt.Sprintf("epoch %d/%d [%s] %d/%d loss %.4f%s %.0f %s/s ETA %s (run %s)",
			p.epoch, p.epochs, bar, done, p.total, loss, extra, perS, p.unit, eta, runETA)
		pad := ""
		if n := p.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		p.width = len(line)
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		if done >= p.total {
			fmt.Fprintln(p.w)
			p.width = 0
		}
	case ProgressLines:
		every := p.every
		if every <= 0 {
			every = max(1, p.total/10)
		}
		if done%every != 0 && done != p.total {
			return
		}
		fmt.Fprintf(p.w, "epoch %d/%d step %d/%d loss %.4f%s %.0f %s/s ETA %s (run %s)\n",
			p.epoch, p.epochs, done, p.total, loss, extra, perS, p.unit, eta, runETA)
	}
}

// Interrupt ends a bar line early so that following messages start on a
// fresh line.
func (p *Progress) Interrupt() {
	if p != nil && p.mode == ProgressBar && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

// Logf prints a message line, ending an unfinished bar first. With mode
// none it still prints: messages are not progress.
func (p *Progress) Logf(format string, args ...any) {
	if p == nil {
		return
	}
	p.Interrupt()
	fmt.Fprintf(p.w, format+"\n", args...)
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
