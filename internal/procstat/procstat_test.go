package procstat

import (
	"testing"
	"time"
)

func TestParseVmHWM(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tbench\nVmPeak:\t  900 kB\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n", 1234 << 10, true},
		{"VmHWM:\t0 kB", 0, true},
		{"VmRSS:\t 1000 kB\n", 0, false},
		{"VmHWM:\t12 MB\n", 0, false},
		{"VmHWM:\t-3 kB\n", 0, false},
		{"VmHWM:\tx kB\n", 0, false},
	} {
		got, ok := parseVmHWM([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseVmHWM(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if b, ok := PeakRSS(); ok && b <= 0 {
		t.Errorf("PeakRSS() = %d on a running process", b)
	}
}

func TestCPUTime(t *testing.T) {
	before, ok := CPUTime()
	if !ok {
		t.Skip("no CPU time on this platform")
	}
	// Burn CPU until it is counted: at least 50 ms, and up to 5 s on a
	// machine so busy that this process is rarely running.
	x := 0.0
	after := before
	for start := time.Now(); time.Since(start) < 50*time.Millisecond || after <= before && time.Since(start) < 5*time.Second; {
		for i := range 1000 {
			x += float64(i)
		}
		after, _ = CPUTime()
	}
	if after <= before || x == 0 {
		t.Errorf("CPU time did not advance: %v then %v", before, after)
	}
}

func TestCPUPerOp(t *testing.T) {
	calls := 0
	ms, ok := CPUPerOp(3, func() {
		calls++
		for s, i := 0.0, 0; i < 1e6; i++ {
			s += float64(i)
			_ = s
		}
	})
	if calls != 3 {
		t.Fatalf("CPUPerOp(3) made %d calls", calls)
	}
	if _, has := CPUTime(); has && (!ok || ms < 0) {
		t.Fatalf("CPUPerOp = %v, %v; want a non-negative time", ms, ok)
	}
	if _, ok := CPUPerOp(0, func() {}); ok {
		t.Fatal("CPUPerOp(0) reported a time")
	}
}
