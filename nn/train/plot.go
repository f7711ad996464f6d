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
}

// palette holds the line colours, used in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Geometry of one panel, in SVG user units.
const (
	panelW, panelH = 420, 280
	marginL        = 58
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
			if !finite(x) || !finite(y) {
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
	if v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e5) {
		return strconv.FormatFloat(v, 'e', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func drawChart(b *bufio.Writer, c Chart, ox, oy float64) {
	pw := float64(panelW - marginL - marginR)
	ph := float64(panelH - marginT - marginB)
	left, top := ox+marginL, oy+marginT
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`+"\n",
		left+pw/2, oy+18, html.EscapeString(c.Title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+pw/2, oy+panelH-8, html.EscapeString(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		ox+13, top+ph/2, html.EscapeString(c.YLabel))

	x0, x1, y0, y1, ok := c.bounds()
	if !ok {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#888">no data</text>`+"\n", left+pw/2, top+ph/2)
		return
	}
	if c.YFixed {
		y0, y1 = c.YMin, c.YMax
	}
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	if y1 == y0 {
		d := math.Max(math.Abs(y0)*0.1, 1e-3)
		y0, y1 = y0-d, y1+d
	} else if !c.YFixed {
		pad := (y1 - y0) * 0.05
		y0, y1 = y0-pad, y1+pad
	}
	px := func(x float64) float64 { return left + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return top + ph - (y-y0)/(y1-y0)*ph }

	for _, t := range niceTicks(x0, x1, 6) {
		x := px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, top+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, top+ph+14, formatTick(t))
	}
	for _, t := range niceTicks(y0, y1, 5) {
		y := py(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y+4, formatTick(t))
	}

	clipID := fmt.Sprintf("clip%d_%d", int(ox), int(oy))
	fmt.Fprintf(b, `<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath>`+"\n", clipID, left, top, pw, ph)
	lx := left
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		fmt.Fprintf(b, `<g clip-path="url(#%s)" stroke="%s" fill="%s">`+"\n", clipID, col, col)
		var run []string
		flush := func() {
			switch len(run) {
			case 0:
			case 1:
				xy := strings.Split(run[0], ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5"/>`+"\n", xy[0], xy[1])
			default:
				fmt.Fprintf(b, `<polyline fill="none" stroke-width="1.8" points="%s"/>`+"\n", strings.Join(run, " "))
			}
			run = run[:0]
		}
		for j := range min(len(s.X), len(s.Y)) {
			if !finite(s.X[j]) || !finite(s.Y[j]) {
				flush()
				continue
			}
			run = append(run, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
		}
		flush()
		b.WriteString("</g>\n")
		// Legend entry, in a row between the title and the plot.
		ly := oy + 36
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", lx, ly-4, lx+16, ly-4, col)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+20, ly, html.EscapeString(s.Name))
		lx += 20 + 6.5*float64(len([]rune(s.Name))) + 14
	}
}
