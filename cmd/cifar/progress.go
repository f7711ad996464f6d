package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress reports training progress on a writer (stderr): a bar redrawn
// in place on a terminal, or plain lines every few batches otherwise.
type progress struct {
	w        io.Writer
	mode     string // bar, lines or none
	every    int    // batches between lines
	interval time.Duration
	now      func() time.Time

	epoch, epochs int
	total         int // batches in this epoch
	remainingRun  int // batches in the epochs after this one
	start         time.Time
	startDone     int // batches already done when the epoch (re)started
	last          time.Time
	width         int // length of the last bar, for clearing
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress returns a reporter for the -progress mode on w.
func newProgress(w io.Writer, mode string, every int) *progress {
	if mode == "auto" {
		mode = "lines"
		if isTerminal(w) {
			mode = "bar"
		}
	}
	return &progress{w: w, mode: mode, every: every, interval: 100 * time.Millisecond, now: time.Now}
}

// begin starts an epoch of total batches, done of which are already done
// (a resumed epoch), with remainingRun batches in later epochs.
func (p *progress) begin(epoch, epochs, total, done, remainingRun int) {
	p.epoch, p.epochs, p.total, p.remainingRun = epoch, epochs, total, remainingRun
	p.start = p.now()
	p.startDone = done
	p.last = time.Time{}
}

// update reports that done batches of the epoch are finished, with the
// epoch's running mean loss and accuracy, seen images so far in this
// session of the epoch.
func (p *progress) update(done int, loss, acc float64, images int) {
	if p.mode == "none" {
		return
	}
	now := p.now()
	elapsed := now.Sub(p.start).Seconds()
	rate := 0.0 // batches per second
	if elapsed > 0 {
		rate = float64(done-p.startDone) / elapsed
	}
	imgs := 0.0
	if elapsed > 0 {
		imgs = float64(images) / elapsed
	}
	eta, runETA := "?", "?"
	if rate > 0 {
		eta = formatDuration(float64(p.total-done) / rate)
		runETA = formatDuration(float64(p.total-done+p.remainingRun) / rate)
	}
	switch p.mode {
	case "bar":
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
		line := fmt.Sprintf("epoch %d/%d [%s] %d/%d loss %.4f acc %5.2f%% %.0f img/s ETA %s (run %s)",
			p.epoch, p.epochs, bar, done, p.total, loss, 100*acc, imgs, eta, runETA)
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
	case "lines":
		every := p.every
		if every <= 0 {
			every = max(1, p.total/10)
		}
		if done%every != 0 && done != p.total {
			return
		}
		fmt.Fprintf(p.w, "epoch %d/%d batch %d/%d loss %.4f acc %.2f%% %.0f img/s ETA %s (run %s)\n",
			p.epoch, p.epochs, done, p.total, loss, 100*acc, imgs, eta, runETA)
	}
}

// interrupt ends a bar line early so that following messages start on a
// fresh line.
func (p *progress) interrupt() {
	if p.mode == "bar" && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

// logf prints a message line, ending an unfinished bar first.
func (p *progress) logf(format string, args ...any) {
	p.interrupt()
	fmt.Fprintf(p.w, format+"\n", args...)
}
