package autograd

import (
	"math"
	"testing"
)

// sweep calls f for about n values spread evenly over [lo, hi], plus the
// float32 neighbours of a few special points.
func sweep(lo, hi float64, n int, f func(x float32)) {
	for i := 0; i <= n; i++ {
		f(float32(lo + (hi-lo)*float64(i)/float64(n)))
	}
	for _, p := range []float32{0, 0.625, -0.625, -150, -87.33654, 88.72, 88.72284, 1, -1} {
		f(p)
		f(math.Nextafter32(p, float32(math.Inf(1))))
		f(math.Nextafter32(p, float32(math.Inf(-1))))
	}
}

// relErr returns |got − want| / |want| (|got| when want is 0).
func relErr(got float32, want float64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got)-want) / math.Abs(want)
}

func TestExp32(t *testing.T) {
	worst, at := 0.0, float32(0)
	sweep(-150, 89, 2_000_000, func(x float32) {
		want := math.Exp(float64(x))
		got := exp32(x)
		switch {
		case want > math.MaxFloat32:
			if !math.IsInf(float64(got), 1) {
				t.Errorf("exp32(%v) = %v, want +Inf", x, got)
			}
			return
		case want < 0x1p-126:
			// Subnormal results keep an absolute accuracy of one unit.
			if math.Abs(float64(got)-want) > 0x1p-149 {
				t.Errorf("exp32(%v) = %v, want %v", x, got, want)
			}
			return
		}
		if e := relErr(got, want); e > worst {
			worst, at = e, x
		}
	})
	t.Logf("exp32 worst %.3g at %v", worst, at)
	if worst > 1e-7 {
		t.Errorf("exp32: relative error %.3g at %v, want <= 1e-7", worst, at)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1},
		{1, math.E},
		{float32(math.Inf(-1)), 0},
		{-150, 0},
		{-1000, 0},
		{89, float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Errorf("exp32(NaN) = %v, want NaN", got)
	}
}

func TestSigmoidTanh32(t *testing.T) {
	var worstS, worstT float64
	var atS, atT float32
	sweep(-40, 40, 1_000_000, func(x float32) {
		xf := float64(x)
		want := 1 / (1 + math.Exp(-xf))
		if want < 0x1p-126 {
			// Below the normal range sigmoid32 may flush to zero.
			if got := sigmoid32(x); math.Abs(float64(got)-want) > 0x1p-126 {
				t.Errorf("sigmoid32(%v) = %v, want %v", x, got, want)
			}
		} else if e := relErr(sigmoid32(x), want); e > worstS {
			worstS, atS = e, x
		}
		if e := relErr(tanh32(x), math.Tanh(xf)); e > worstT {
			worstT, atT = e, x
		}
	})
	// Tiny arguments, where tanh must not lose relative accuracy.
	for x := float32(1e-30); x < 1; x *= 1.37 {
		if e := relErr(tanh32(x), math.Tanh(float64(x))); e > worstT {
			worstT, atT = e, x
		}
	}
	t.Logf("sigmoid %.3g at %v, tanh %.3g at %v", worstS, atS, worstT, atT)
	if worstS > 2.5e-7 {
		t.Errorf("sigmoid32: relative error %.3g at %v, want <= 2.5e-7", worstS, atS)
	}
	if worstT > 2.5e-7 {
		t.Errorf("tanh32: relative error %.3g at %v, want <= 2.5e-7", worstT, atT)
	}
	for _, c := range []struct{ x, s, th float32 }{
		{0, 0.5, 0},
		{200, 1, 1},
		{-200, 0, -1},
		{float32(math.Inf(1)), 1, 1},
		{float32(math.Inf(-1)), 0, -1},
	} {
		if s, th := sigmoid32(c.x), tanh32(c.x); s != c.s || th != c.th {
			t.Errorf("sigmoid32(%v), tanh32(%v) = %v, %v, want %v, %v", c.x, c.x, s, th, c.s, c.th)
		}
	}
}

// BenchmarkExp compares exp32 with float64 math.Exp over a softmax row.
func BenchmarkExp(b *testing.B) {
	row := make([]float32, 10000)
	for i := range row {
		row[i] = -float32(i%3000) / 100
	}
	dst := make([]float32, len(row))
	b.Run("exp32", func(b *testing.B) {
		for b.Loop() {
			expShiftSum(dst, row, 0)
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for b.Loop() {
			s := 0.0
			for j, v := range row {
				e := math.Exp(float64(v))
				dst[j] = float32(e)
				s += e
			}
			_ = s
		}
	})
}
