package experiment

import (
	"strings"
	"testing"

	"github.com/proxgen/proxgen/optim"
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
				t.Errorf("%s: a optim.Config %+v for a method without one", name, c)
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
	if m, _ := LookupMethod("proxgen-sgd"); m.Config(h).RegMode != optim.RegProx || !m.Config(h).Momentum.HeavyBall || !m.TakesReg {
		t.Errorf("proxgen-sgd %+v", m.Config(h))
	}
	if m, _ := LookupMethod("subgrad"); m.Config(h).RegMode != optim.RegSubgradient {
		t.Errorf("subgrad RegMode %v", m.Config(h).RegMode)
	}
	if m, _ := LookupMethod("proxquant"); m.Config(h).Metric != optim.Euclidean {
		t.Errorf("proxquant metric %v", m.Config(h).Metric)
	}
	if _, err := LookupMethod("adamax"); err == nil || !strings.Contains(err.Error(), "proxgen, proxgenw") {
		t.Errorf("unknown method: %v", err)
	}
}
