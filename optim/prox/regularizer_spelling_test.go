package prox

import (
	"fmt"
	"strings"
	"testing"
)

// TestRegularizerSpellings checks that cmd/cifar's former spellings parse
// to the same regularizers as the current ones, with a deprecation message
// for the deprecated ones only.
func TestRegularizerSpellings(t *testing.T) {
	for _, c := range []struct{ old, now string }{
		{"l12", "l1/2"}, {"l23", "l2/3"}, {"binw:1", "bin-l1"}, {"binw:0", "bin-l0"},
		{"binw:2/3", "bin-l2/3"}, {"binw:0.3", "bin-lq:0.3"}, {"lq:1/2", "l1/2"}, {"lq:1/3", fmt.Sprint(Lq(1.0 / 3))},
	} {
		a, err1 := Parse(c.old)
		b, err2 := Parse(c.now)
		if err1 != nil || err2 != nil || fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(b) != c.now {
			t.Errorf("%q = %v (%v), %q = %v (%v)", c.old, a, err1, c.now, b, err2)
		}
		if d := Deprecation(c.now); d != "" {
			t.Errorf("%q: deprecation %q", c.now, d)
		}
		deprecated := Deprecation(c.old)
		if (c.old != "l12" && c.old != "l23") != strings.Contains(deprecated, fmt.Sprintf("%q", c.now)) {
			t.Errorf("%q: deprecation %q", c.old, deprecated)
		}
	}
	for _, bad := range []string{"binw:x", "binw:2", "lq:1/0", "bin-binw:1", "l3"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if d := Deprecation(bad); d != "" {
			t.Errorf("%q: deprecation %q for a bad name", bad, d)
		}
	}
	if !IsBinary(BinaryW(1)) || IsBinary(Lq(1)) || IsBinary(nil) {
		t.Error("IsBinary")
	}
}
