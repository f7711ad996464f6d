package train

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// Series is one line of a Chart: points (X[i], Y[i]). Points with a
// non-finite coordinate are left out and break the line.
type Series struct {
	Name string
	X, Y []float64
}

// Chart is one panel of line plots sharing axes, for the curves of a
// run (an Output written with WriteSVG).
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// YMin and YMax, when YFixed is set, give the y range instead of the
	// data's (for example [0, 1] for ratios).
	YMin, YMax float64
	YFixed     bool
	// LogY draws the y axis in log scale (for example a step size that
	// drops tenfold); points with y <= 0 are left out and break the line.
	LogY bool
}

// palette holds the line colours, used in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// dashes are the dash patterns of a series that lies on an earlier one,
// used in order, so that every series stays visible.
var dashes = []string{"7 4", "2 3", "10 3 2 3", "4 4"}

// charWidth is the width assumed for a character of the 11-unit font.
const charWidth = 6.5

// Geometry of one panel, in SVG user units.
const (
	panelW, panelH = 420, 280
	marginL        = 66
	marginR        = 14
	marginT        = 44
	marginB        = 44
)

// WriteSVG draws the charts as a grid with cols panels per row and writes
// a standalone SVG document to w.
func WriteSVG(w io.Writer, charts []Chart, cols int) error {
	if cols < 1 {
		cols = 1
	}
	rows := (len(charts) + cols - 1) / cols
	width, height := cols*panelW, max(rows, 1)*panelH
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	for i, c := range charts {
		drawChart(b, c, float64((i%cols)*panelW), float64((i/cols)*panelH))
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

// bounds returns the finite data range of the Chart's Series; ok is false
// when there is no finite point.
func (c Chart) bounds() (x0, x1, y0, y1 float64, ok bool) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range min(len(s.X), len(s.Y)) {
			x, y := s.X[i], s.Y[i]
			if !c.plottable(x, y) {
				continue
			}
			ok = true
			x0, x1 = math.Min(x0, x), math.Max(x1, x)
			y0, y1 = math.Min(y0, y), math.Max(y1, y)
		}
	}
	return
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// plottable reports whether the point (x, y) can be drawn on c's axes.
func (c Chart) plottable(x, y float64) bool {
	return finite(x) && finite(y) && (!c.LogY || y > 0)
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, v)
	}
	return ticks
}

// formatTick writes a tick value compactly.
func formatTick(v float64) string {
	return formatTicks([]float64{v})[0]
}

// formatTicks writes the tick values of one axis in one format: fixed
// point with the decimals the smallest step needs, or, when that would
// take more than 4 decimals or the values reach 1e5, scientific notation
// with one decimal (none when every value is a round mantissa).
func formatTicks(ticks []float64) []string {
	out := make([]string, len(ticks))
	big, minStep := 0.0, math.Inf(1)
	for i, v := range ticks {
		big = math.Max(big, math.Abs(v))
		if i > 0 {
			minStep = math.Min(minStep, math.Abs(v-ticks[i-1]))
		}
	}
	if len(ticks) == 1 {
		minStep = math.Abs(ticks[0])
	}
	decimals := 0
	if minStep > 0 && finite(minStep) {
		// Decimals for the step's significant digits (2.5e-4 needs 5).
		for d := 0; d <= 6; d++ {
			scaled := minStep * math.Pow(10, float64(d))
			if math.Abs(scaled-math.Round(scaled)) < 1e-6*scaled {
				decimals = d
				break
			}
			decimals = d
		}
	}
	if big < 1e5 && decimals <= 4 {
		for i, v := range ticks {
			if math.Abs(v) < 1e-12*math.Max(big, 1e-300) {
				v = 0
			}
			out[i] = strconv.FormatFloat(v, 'f', decimals, 64)
		}
		return out
	}
	prec := 0
	for _, v := range ticks {
		if v != 0 {
			m := v / math.Pow(10, math.Floor(math.Log10(math.Abs(v))))
			if math.Abs(m-math.Round(m)) > 1e-9 {
				prec = 1
			}
		}
	}
	for i, v := range ticks {
		out[i] = strconv.FormatFloat(v, 'e', prec, 64)
	}
	return out
}

// logTicks returns the powers of ten in [lo, hi] (lo > 0), with the 2 and
// 5 multiples too when there are fewer than three powers, and lo and hi
// themselves when there is no tick at all.
func logTicks(lo, hi float64) []float64 {
	var ticks []float64
	first := math.Floor(math.Log10(lo))
	last := math.Ceil(math.Log10(hi))
	mults := []float64{1}
	if last-first < 3 {
		mults = []float64{1, 2, 5}
	}
	for e := first; e <= last; e++ {
		for _, m := range mults {
			v := m * math.Pow(10, e)
			if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				ticks = append(ticks, v)
			}
		}
	}
	if len(ticks) == 0 {
		ticks = []float64{lo, hi}
	}
	return ticks
}

func drawChart(b *bufio.Writer, c Chart, ox, oy float64) {
	pw := float64(panelW - marginL - marginR)
	ph := float64(panelH - marginT - marginB)
	left, top := ox+marginL, oy+marginT
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`+"\n",
		left+pw/2, oy+18, html.EscapeString(c.Title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+pw/2, oy+panelH-8, html.EscapeString(c.XLabel))

	x0, x1, y0, y1, ok := c.bounds()
	if !ok {
		c.yLabel(b, ox+13, top+ph/2)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#888">no data</text>`+"\n", left+pw/2, top+ph/2)
		return
	}
	if c.YFixed && !(c.LogY && c.YMin <= 0) {
		y0, y1 = c.YMin, c.YMax
	}
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	// ty maps a value to the axis' linear coordinate.
	ty := func(y float64) float64 { return y }
	if c.LogY {
		ty = math.Log10
	}
	t0, t1 := ty(y0), ty(y1)
	switch {
	case t1 == t0 && c.LogY:
		t0, t1 = t0-0.5, t1+0.5
		y0, y1 = math.Pow(10, t0), math.Pow(10, t1)
	case t1 == t0:
		d := math.Max(math.Abs(y0)*0.1, 1e-3)
		y0, y1 = y0-d, y1+d
		t0, t1 = y0, y1
	case !c.YFixed:
		pad := (t1 - t0) * 0.05
		t0, t1 = t0-pad, t1+pad
		if c.LogY {
			y0, y1 = math.Pow(10, t0), math.Pow(10, t1)
		} else {
			y0, y1 = t0, t1
		}
	}
	px := func(x float64) float64 { return left + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return top + ph - (ty(y)-t0)/(t1-t0)*ph }

	xt := niceTicks(x0, x1, 6)
	for i, label := range formatTicks(xt) {
		x := px(xt[i])
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, top+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, top+ph+14, label)
	}
	yt := niceTicks(y0, y1, 5)
	if c.LogY {
		yt = logTicks(y0, y1)
	}
	widest := 0.0
	for i, label := range formatTicks(yt) {
		y := py(yt[i])
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y+4, label)
		widest = math.Max(widest, charWidth*float64(len(label)))
	}
	// The axis label's glyphs reach about 9 units left and 3 right of its
	// baseline: it ends 5 units before the widest tick label.
	c.yLabel(b, math.Max(left-4-widest-5-3, ox+10), top+ph/2)

	clipID := fmt.Sprintf("clip%d_%d", int(ox), int(oy))
	// The clip leaves room for the stroke of a line on the frame (a ratio
	// at 100 % of a fixed axis), so that it shows whole.
	fmt.Fprintf(b, `<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath>`+"\n", clipID, left-2, top-2, pw+4, ph+4)
	lx := left
	drawn := map[[2]int]bool{} // pixels of the earlier series' points
	dashed := 0
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		var pts [][2]float64
		var runs [][]string
		var run []string
		for j := range min(len(s.X), len(s.Y)) {
			if !c.plottable(s.X[j], s.Y[j]) {
				runs, run = append(runs, run), nil
				continue
			}
			x, y := px(s.X[j]), py(s.Y[j])
			pts = append(pts, [2]float64{x, y})
			run = append(run, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		runs = append(runs, run)
		// A series whose points mostly lie on an earlier one's is dashed.
		on := 0
		for _, p := range pts {
			if drawn[[2]int{int(math.Round(p[0])), int(math.Round(p[1]))}] {
				on++
			}
		}
		dash := ""
		if len(pts) > 0 && 2*on >= len(pts) {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, dashes[dashed%len(dashes)])
			dashed++
		}
		for _, p := range pts {
			drawn[[2]int{int(math.Round(p[0])), int(math.Round(p[1]))}] = true
		}
		fmt.Fprintf(b, `<g clip-path="url(#%s)" stroke="%s" fill="%s">`+"\n", clipID, col, col)
		for _, run := range runs {
			switch len(run) {
			case 0:
			case 1:
				xy := strings.Split(run[0], ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5"/>`+"\n", xy[0], xy[1])
			default:
				fmt.Fprintf(b, `<polyline fill="none" stroke-width="1.8"%s points="%s"/>`+"\n", dash, strings.Join(run, " "))
			}
		}
		b.WriteString("</g>\n")
		// Legend entry, in a row between the title and the plot.
		ly := oy + 36
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+16, ly-4, col, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+20, ly, html.EscapeString(s.Name))
		lx += 20 + charWidth*float64(len([]rune(s.Name))) + 14
	}
}

// yLabel writes the y axis label, rotated, with its baseline at x.
func (c Chart) yLabel(b *bufio.Writer, x, y float64) {
	fmt.Fprintf(b, `<text class="ylabel" transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		x, y, html.EscapeString(c.YLabel))
}
