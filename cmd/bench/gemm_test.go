package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestGemmJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runGemm([]string{"-m", "37", "-n", "29", "-k", "41", "-threads", "2", "-reps", "3", "-warmup-time", "0", "-transb", "-json"}, &out, &errOut); err != nil {
		t.Fatalf("runGemm: %v (stderr %q)", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r gemmResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line %q is not JSON: %v", lines[len(lines)-1], err)
	}
	if r.M != 37 || r.N != 29 || r.K != 41 || r.Threads != 2 || !r.TransB || r.Reps != 3 || r.Kernel == "" || !strings.Contains(r.KernelChoice, r.Kernel+": ") {
		t.Errorf("result %+v does not echo the flags", r)
	}
	if !(r.GFLOPS > 0) || !(r.Seconds > 0) || r.Seconds > r.MedianSeconds {
		t.Errorf("implausible timing %+v", r)
	}
}

func TestGemmTable(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runGemm([]string{"-m", "8", "-n", "8", "-k", "8", "-reps", "1", "-warmup-time", "0", "-kernel", "generic"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "best_GF/s") || !strings.Contains(s, `kernel generic, chosen as NewEngine("generic")`) {
		t.Errorf("table output %q lacks the header or kernel", s)
	}
}

func TestGemmBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-m", "0"},
		{"-k", "-3"},
		{"-threads", "0"},
		{"-reps", "0"},
		{"-warmup", "-1"},
		{"-warmup-time", "-1s"},
		{"-kernel", "nosuch"},
		{"-nosuchflag"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if err := runGemm(args, &out, &errOut); err == nil {
			t.Errorf("runGemm(%q) succeeded, want an error", args)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"nosuchcommand"}, &out, &errOut); code == 0 {
		t.Errorf("unknown command exited 0")
	}
	if code := run([]string{"gemm", "-m", "x"}, &out, &errOut); code == 0 {
		t.Errorf("bad flag exited 0")
	}
}
