package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestGemmFlags checks that the flags reach the harness and the result
// its output: the JSON line and the table.
func TestGemmFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runGemm([]string{"-m", "37", "-n", "29", "-k", "41", "-threads", "2", "-reps", "3", "-warmup-time", "0", "-transb", "-json"}, &out, &errOut); err != nil {
		t.Fatalf("runGemm: %v (stderr %q)", err, errOut.String())
	}
	checkEcho(t, lastJSON(t, out.String()), map[string]any{"m": 37.0, "n": 29.0, "k": 41.0, "threads": 2.0,
		"transa": false, "transb": true, "reps": 3.0, "op": "sgemm", "stat": "best"})
	out.Reset()
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
		{"-m", "65536", "-n", "65536", "-k", "1"},
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
	if code := run([]string{"nosuchcommand"}, &out, &errOut); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if code := run([]string{"gemm", "-m", "x"}, &out, &errOut); code != 2 {
		t.Errorf("bad flag exited %d, want 2", code)
	}
}
