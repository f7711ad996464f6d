package train

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// svgElements parses an SVG document and counts its elements by name,
// failing the test if it is not well-formed XML.
func svgElements(t *testing.T, doc string) map[string]int {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	counts := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	return counts
}

func TestWriteSVG(t *testing.T) {
	nan := math.NaN()
	charts := []Chart{
		{Title: `loss <train> & "test"`, XLabel: "epoch", YLabel: "CE", Series: []Series{
			{"a", []float64{1, 2, 3, 4, 5}, []float64{2, 1.5, nan, 1, 0.8}}, // broken by NaN: two lines
			{"b", []float64{1, 2, 3}, []float64{2.1, 1.7, 1.2}},
		}},
		{Title: "single", Series: []Series{{"one point", []float64{1}, []float64{0.5}}}},
		{Title: "flat", Series: []Series{{"flat", []float64{1, 2}, []float64{3, 3}}}},
		{Title: "empty", Series: []Series{{"none", nil, nil}}},
		{Title: "fixed", YFixed: true, YMin: 0, YMax: 100, Series: []Series{{"inf", []float64{1, 2, 3}, []float64{10, math.Inf(1), 30}}}},
	}
	var b strings.Builder
	if err := WriteSVG(&b, charts, 2); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	n := svgElements(t, doc)
	if n["svg"] != 1 {
		t.Fatalf("%d svg elements", n["svg"])
	}
	// a: two runs of 2 points each → 2 polylines; b: 1; flat: 1.
	if n["polyline"] != 4 {
		t.Errorf("%d polylines, want 4", n["polyline"])
	}
	// "single" has one point, "a"... none; "fixed" splits into two single points.
	if n["circle"] != 3 {
		t.Errorf("%d circles, want 3", n["circle"])
	}
	if !strings.Contains(doc, "loss &lt;train&gt; &amp; &#34;test&#34;") {
		t.Error("title not escaped")
	}
	if !strings.Contains(doc, "no data") {
		t.Error("empty Chart not marked")
	}
	if !strings.Contains(doc, `width="840" height="840"`) {
		t.Errorf("unexpected size: %.120s", doc)
	}
	if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf") {
		t.Error("non-finite coordinates written")
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{1, 30, []float64{5, 10, 15, 20, 25, 30}},
		{-0.3, 0.3, []float64{-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3}},
		{2, 2, []float64{2}},
	} {
		got := niceTicks(c.lo, c.hi, 6)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
	if got := formatTick(1e-5); got != "1e-05" {
		t.Errorf("formatTick(1e-5) = %q", got)
	}
	if got := formatTick(0.25); got != "0.25" {
		t.Errorf("formatTick(0.25) = %q", got)
	}
}
