package main

import "testing"

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
	if b, ok := peakRSS(); ok && b <= 0 {
		t.Errorf("peakRSS() = %d on a running process", b)
	}
}
