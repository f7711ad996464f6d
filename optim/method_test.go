package optim

import (
	"fmt"
	"strings"
	"testing"
)

func TestLookupMethod(t *testing.T) {
	h := Hyper{Beta1: 0.8, Beta2: 0.99, Eps: 1e-7, Momentum: 0.5}
	for _, name := range MethodNames() {
		m, err := LookupMethod(name)
		if err != nil || m.Name != name {
			t.Fatalf("LookupMethod(%q) = %v, %v", name, m.Name, err)
		}
		c := m.Config(h)
		if m.Kind == ProxSGDKind {
			if c.Precond != nil {
				t.Errorf("%s: a Config %+v for a method without one", name, c)
			}
			continue
		}
		if c.Precond == nil {
			t.Errorf("%s: no preconditioner", name)
		}
		if m.Adam != (c.Momentum.Rho == 0.8) {
			t.Errorf("%s: Adam %v but momentum %v", name, m.Adam, c.Momentum.Rho)
		}
	}
	if m, _ := LookupMethod("sgd"); m.Config(h).Momentum.Rho != 0.5 || !m.Config(h).Momentum.HeavyBall {
		t.Errorf("sgd momentum %+v", m.Config(h).Momentum)
	}
	if m, _ := LookupMethod("subgrad"); m.Config(h).RegMode != RegSubgradient {
		t.Errorf("subgrad RegMode %v", m.Config(h).RegMode)
	}
	if m, _ := LookupMethod("proxquant"); m.Config(h).Metric != Euclidean {
		t.Errorf("proxquant metric %v", m.Config(h).Metric)
	}
	if _, err := LookupMethod("adamax"); err == nil || !strings.Contains(err.Error(), "proxgen, proxgenw") {
		t.Errorf("unknown method: %v", err)
	}
}

// TestRegularizerSpellings checks that cmd/cifar's former spellings parse
// to the same regularizers as the current ones, with a deprecation message
// for the deprecated ones only.
func TestRegularizerSpellings(t *testing.T) {
	for _, c := range []struct{ old, now string }{
		{"l12", "l1/2"}, {"l23", "l2/3"}, {"binw:1", "bin-l1"}, {"binw:0", "bin-l0"},
		{"binw:2/3", "bin-l2/3"}, {"binw:0.3", "bin-lq:0.3"}, {"lq:1/2", "l1/2"}, {"lq:1/3", fmt.Sprint(Lq(1.0 / 3))},
	} {
		a, err1 := ParseRegularizer(c.old)
		b, err2 := ParseRegularizer(c.now)
		if err1 != nil || err2 != nil || fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(b) != c.now {
			t.Errorf("%q = %v (%v), %q = %v (%v)", c.old, a, err1, c.now, b, err2)
		}
		if d := RegularizerDeprecation(c.now); d != "" {
			t.Errorf("%q: deprecation %q", c.now, d)
		}
		deprecated := RegularizerDeprecation(c.old)
		if (c.old != "l12" && c.old != "l23") != strings.Contains(deprecated, fmt.Sprintf("%q", c.now)) {
			t.Errorf("%q: deprecation %q", c.old, deprecated)
		}
	}
	for _, bad := range []string{"binw:x", "binw:2", "lq:1/0", "bin-binw:1", "l3"} {
		if _, err := ParseRegularizer(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if d := RegularizerDeprecation(bad); d != "" {
			t.Errorf("%q: deprecation %q for a bad name", bad, d)
		}
	}
	if !IsBinary(BinaryW(1)) || IsBinary(Lq(1)) || IsBinary(nil) {
		t.Error("IsBinary")
	}
}
