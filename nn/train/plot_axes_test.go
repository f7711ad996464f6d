package train

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// svgElem is an element of a parsed SVG document with its attributes and
// text.
type svgElem struct {
	name  string
	attr  map[string]string
	text  string
	class string
}

func parseSVG(t *testing.T, doc string) []svgElem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var out []svgElem
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElem{name: tok.Name.Local, attr: map[string]string{}}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			e.class = e.attr["class"]
			out = append(out, e)
		case xml.CharData:
			if len(out) > 0 {
				out[len(out)-1].text += string(tok)
			}
		}
	}
}

func attrFloat(t *testing.T, e svgElem, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attr[name], 64)
	if err != nil {
		t.Fatalf("%s %s=%q: %v", e.name, name, e.attr[name], err)
	}
	return v
}

// lrChart is the step-size panel of a run whose lr drops tenfold twice,
// then reaches 0 (left out on the log axis).
func lrChart() Chart {
	return Chart{Title: "step size", XLabel: "epoch", YLabel: "lr", LogY: true, Series: []Series{
		{"lr", []float64{1, 2, 3, 4, 5, 6}, []float64{1e-3, 1e-3, 1e-4, 1e-4, 1e-5, 0}},
	}}
}

// TestLogAxis checks that tenfold drops are equal steps on a log y axis
// and that a zero is left out rather than drawn.
func TestLogAxis(t *testing.T) {
	var b strings.Builder
	if err := WriteSVG(&b, []Chart{lrChart()}, 1); err != nil {
		t.Fatal(err)
	}
	var ys []float64
	for _, e := range parseSVG(t, b.String()) {
		if e.name == "polyline" {
			for _, p := range strings.Fields(e.attr["points"]) {
				_, y, _ := strings.Cut(p, ",")
				v, _ := strconv.ParseFloat(y, 64)
				ys = append(ys, v)
			}
		}
	}
	if len(ys) != 5 {
		t.Fatalf("%d points drawn, want 5 (the zero left out): %v", len(ys), ys)
	}
	d1, d2 := ys[2]-ys[0], ys[4]-ys[2]
	if d1 <= 0 || math.Abs(d1-d2) > 0.2 {
		t.Errorf("tenfold drops are %.1f and %.1f units, want equal and positive", d1, d2)
	}
}

// TestTickFormats checks one format per axis.
func TestTickFormats(t *testing.T) {
	for _, ticks := range [][]float64{
		{0, 2.5e-4, 5e-4, 7.5e-4, 1e-3},
		{0, 0.2, 0.4, 0.6, 0.8, 1},
		{1e-5, 1e-4, 1e-3},
		{2e-4, 5e-4, 1e-3, 2e-3},
		{5, 10, 15, 20},
		{0, 2e5, 4e5},
	} {
		labels := formatTicks(ticks)
		sci := strings.Contains(labels[0], "e")
		dec := func(l string) int {
			m, _, _ := strings.Cut(l, "e")
			if _, frac, ok := strings.Cut(m, "."); ok {
				return len(frac)
			}
			return 0
		}
		for i, l := range labels {
			if strings.Contains(l, "e") != sci || dec(l) != dec(labels[0]) {
				t.Errorf("ticks %v: labels %q mix formats", ticks, labels)
				break
			}
			if v, err := strconv.ParseFloat(l, 64); err != nil || math.Abs(v-ticks[i]) > 1e-9*math.Max(1, math.Abs(ticks[i])) {
				t.Errorf("ticks %v: label %q reads as %v", ticks, l, v)
			}
		}
	}
}

// TestYLabelClearsTicks checks that the rotated y axis label ends before
// the widest y tick label starts, on the lr panel and a linear one.
func TestYLabelClearsTicks(t *testing.T) {
	lin := Chart{Title: "lr", YLabel: "lr", Series: []Series{{"lr", []float64{1, 2, 3}, []float64{1e-3, 5e-4, 2.5e-4}}}}
	for _, c := range []Chart{lrChart(), lin} {
		var b strings.Builder
		if err := WriteSVG(&b, []Chart{c}, 1); err != nil {
			t.Fatal(err)
		}
		label, tickLeft := math.NaN(), math.Inf(1)
		for _, e := range parseSVG(t, b.String()) {
			if e.class == "ylabel" {
				tr := strings.TrimPrefix(e.attr["transform"], "translate(")
				x, _, _ := strings.Cut(tr, " ")
				label, _ = strconv.ParseFloat(x, 64)
			}
			if e.name == "text" && e.attr["text-anchor"] == "end" {
				tickLeft = math.Min(tickLeft, attrFloat(t, e, "x")-charWidth*float64(len(strings.TrimSpace(e.text))))
			}
		}
		if !(label+3 < tickLeft) || label-9 < 0 {
			t.Errorf("%s: y label baseline at x=%.1f (glyphs to %.1f), tick labels start at %.1f", c.Title, label, label+3, tickLeft)
		}
	}
}

// coinciding is the "remaining network" panel of a dense run: three
// series at 100 %.
func coinciding() Chart {
	x := []float64{1, 2, 3, 4}
	full := []float64{100, 100, 100, 100}
	return Chart{Title: "remaining network", YLabel: "%", YFixed: true, YMin: 0, YMax: 100, Series: []Series{
		{"FLOPs", x, full}, {"parameters", x, full}, {"channels", x, full},
	}}
}

// TestCoincidingSeriesDashed checks that series drawn on an earlier one
// get distinct dash patterns, in the plot and the legend.
func TestCoincidingSeriesDashed(t *testing.T) {
	var b strings.Builder
	if err := WriteSVG(&b, []Chart{coinciding()}, 1); err != nil {
		t.Fatal(err)
	}
	var lines, legend []string
	for _, e := range parseSVG(t, b.String()) {
		switch e.name {
		case "polyline":
			lines = append(lines, e.attr["stroke-dasharray"])
		case "line":
			if e.attr["stroke-width"] == "2" {
				legend = append(legend, e.attr["stroke-dasharray"])
			}
		}
	}
	if len(lines) != 3 || lines[0] != "" || lines[1] == "" || lines[2] == "" || lines[1] == lines[2] {
		t.Fatalf("dash patterns %q, want none, then two distinct ones", lines)
	}
	if strings.Join(legend, "|") != strings.Join(lines, "|") {
		t.Errorf("legend dashes %q, lines %q", legend, lines)
	}
}

// TestCurvesRenderPNG renders the panels with rsvg-convert, when it is
// installed (.ci/run installs librsvg2-bin), and checks in the pixels
// that every series of the coinciding panel is visible inside the plot
// area.
func TestCurvesRenderPNG(t *testing.T) {
	bin, err := exec.LookPath("rsvg-convert")
	if err != nil {
		t.Skip("rsvg-convert not installed (apt-get install librsvg2-bin); the structural tests above still run")
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "curves.svg")
	var b bytes.Buffer
	if err := WriteSVG(&b, []Chart{coinciding(), lrChart()}, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(svg, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-f", "png", "-o", filepath.Join(dir, "curves.png"), svg).CombinedOutput()
	if err != nil {
		t.Fatalf("rsvg-convert: %v\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "curves.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 2*panelW || img.Bounds().Dy() != panelH {
		t.Fatalf("PNG is %v, want %dx%d", img.Bounds(), 2*panelW, panelH)
	}
	// The lines at 100 % lie on the frame's top edge: half of their
	// width shows inside it.
	plot := image.Rect(marginL+1, marginT-1, panelW-marginR-1, panelH-marginB-1)
	for i := range 3 {
		want := palette[i]
		r, g, bl := hexByte(want[1:3]), hexByte(want[3:5]), hexByte(want[5:7])
		n := 0
		for y := plot.Min.Y; y < plot.Max.Y; y++ {
			for x := plot.Min.X; x < plot.Max.X; x++ {
				pr, pg, pb, _ := img.At(x, y).RGBA()
				if near(pr, r) && near(pg, g) && near(pb, bl) {
					n++
				}
			}
		}
		if n < 20 {
			t.Errorf("series %d (%s): %d pixels of its colour in the plot area, want a visible line", i, want, n)
		}
	}
}

func hexByte(s string) uint32 {
	v, _ := strconv.ParseUint(s, 16, 8)
	return uint32(v)
}

func near(c16, c8 uint32) bool {
	d := int(c16>>8) - int(c8)
	return d > -40 && d < 40
}
