package main

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// drawFigure solves the problem with both methods from both starts and
// writes a grid of stem plots as an SVG file, one row per start: true θ*,
// ProxGen, Prox-SGD (official) and Prox-SGD with the scaled-gradient
// subproblem (the paper's figures have the first three columns).
func drawFigure(path string, pr *problem, base settings) error {
	type panel struct {
		title string
		vals  []float64
		zeros int
	}
	var rows [][]panel
	for _, init := range []string{"random", "zero"} {
		row := []panel{{title: "true θ*", vals: pr.truth}}
		for _, mv := range [][2]string{{"proxgen", ""}, {"proxsgd", "official"}, {"proxsgd", "scaled"}} {
			method := mv[0]
			st := base
			st.init, st.method, st.variant = init, method, mv[1]
			st = withDefaultLR(st)
			est, _, err := solve(pr, st)
			if err != nil {
				return err
			}
			m := compare(est, pr.truth)
			name := "ProxGen"
			if method == "proxsgd" {
				name = "Prox-SGD"
				if st.variant == "scaled" {
					name += " scaled"
				}
			}
			vals := make([]float64, len(est))
			for i, v := range est {
				vals[i] = float64(v)
			}
			verdict := "not the true support"
			if m.ExactSupport {
				verdict = "exact support"
			}
			row = append(row, panel{
				title: fmt.Sprintf("%s, %s start: %d zeros, %s", name, init, m.Zeros, verdict),
				vals:  vals,
				zeros: m.Zeros,
			})
		}
		rows = append(rows, row)
	}

	const (
		pw, ph   = 330, 200 // panel size
		mx, my   = 40, 40   // panel margins
		cols     = 4
		headroom = 40
	)
	width := cols*(pw+mx) + mx
	height := len(rows)*(ph+my+20) + headroom + my
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14">Lasso support recovery: p=%d, n=%d, s=%d, noise=%g, seed=%d, λ=%g, %d steps</text>`+"\n",
		mx, pr.p, pr.n, countNonzero(pr.truth), pr.noise, base.seed, base.lambda, base.steps)
	for r, row := range rows {
		for c, pn := range row {
			x0 := mx + c*(pw+mx)
			y0 := headroom + my + r*(ph+my+20)
			ymax := 1.2
			for _, v := range pn.vals {
				ymax = math.Max(ymax, math.Abs(v)*1.05)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x0, y0-8, escape(pn.title))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", x0, y0, pw, ph)
			yOf := func(v float64) float64 { return float64(y0) + float64(ph)/2*(1-v/ymax) }
			xOf := func(j int) float64 { return float64(x0) + 4 + float64(j)*float64(pw-8)/float64(max(len(pn.vals)-1, 1)) }
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb"/>`+"\n", x0, yOf(0), x0+pw, yOf(0))
			for _, tick := range []float64{-1, 1} {
				fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", x0-4, yOf(tick)+4, tick)
				fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", x0, yOf(tick), x0+pw, yOf(tick))
			}
			for j, v := range pn.vals {
				if v == 0 {
					continue
				}
				color := "#1f77b4"
				if pr.truth[j] == 0 {
					color = "#d62728" // off the true support
				}
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, xOf(j), yOf(0), xOf(j), yOf(v), color)
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", xOf(j), yOf(v), color)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">coordinates 1..%d; blue: true support, red: off it</text>`+"\n", x0, y0+ph+14, len(pn.vals))
		}
	}
	b.WriteString("</svg>\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing figure: %w", err)
	}
	return nil
}

func countNonzero(v []float64) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
