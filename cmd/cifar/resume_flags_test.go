package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
)

// TestResumeNewEpochs checks that -resume -epochs N applies the new length
// as a fresh N-epoch run would: a 2-epoch run (constant step size, as
// -schedule auto gives for fewer than 4 epochs) resumed with -epochs 5
// recomputes the schedule (multistep:2,4), says so, and ends bit-identical
// to a fresh 5-epoch run, whose first two epochs have the same step size.
func TestResumeNewEpochs(t *testing.T) {
	data := writeFixture(t, 4, 10)
	base := t.TempDir()
	fresh, part := filepath.Join(base, "fresh"), filepath.Join(base, "part")
	if code, _, stderr := runCmd(context.Background(), tinyArgs(data, fresh, "-epochs", "5")...); code != exitOK {
		t.Fatalf("fresh run: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(context.Background(), tinyArgs(data, part, "-epochs", "2")...); code != exitOK {
		t.Fatalf("2-epoch run: exit %d\n%s", code, stderr)
	}
	code, _, stderr := runCmd(context.Background(), "-out", part, "-resume", "-epochs", "5", "-data", data, "-allow-subset", "-progress", "none")
	if code != exitOK {
		t.Fatalf("resume -epochs 5: exit %d\n%s", code, stderr)
	}
	want := "-epochs 5 (was 2), -schedule multistep:2,4 (was const), as a fresh 5-epoch run would use, from epoch 3 on"
	if !strings.Contains(stderr, want) {
		t.Errorf("resume said %q, want %q", stderr, want)
	}
	a, b := readMetrics(t, fresh), readMetrics(t, part)
	for i := range a {
		if a[i].LR != b[i].LR {
			t.Errorf("epoch %d: step size %g after the resume, %g in the fresh run", i+1, b[i].LR, a[i].LR)
		}
	}
	sameHistory(t, a, b)
	sameTensors(t, filepath.Join(fresh, checkpoint.ModelFileName), filepath.Join(part, checkpoint.ModelFileName))

	// Flags that change the run otherwise are refused, named.
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-lr", "0.01"}, "-lr 0.01 (the run has 0.001)"},
		{[]string{"-lambda", "0.2"}, "-lambda 0.2 (the run has 0.1)"},
		{[]string{"-schedule", "cosine"}, "-schedule cosine (the run has multistep:2,4)"},
	} {
		args := append([]string{"-out", part, "-resume", "-epochs", "6", "-data", data, "-allow-subset", "-progress", "none"}, c.flags...)
		code, _, stderr := runCmd(context.Background(), args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d naming %q", c.flags, code, stderr, exitUsage, c.want)
		}
	}
	// A length that an explicit setting does not fit is refused.
	explicit := filepath.Join(base, "explicit")
	if code, _, stderr := runCmd(context.Background(), tinyArgs(data, explicit, "-epochs", "2", "-schedule", "warmup:1+const")...); code != exitOK {
		t.Fatalf("run with -schedule: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCmd(context.Background(), "-out", explicit, "-resume", "-epochs", "1", "-data", data, "-allow-subset", "-progress", "none")
	if code != exitUsage || !strings.Contains(stderr, "-resume: -schedule") || !strings.Contains(stderr, "-schedule") {
		t.Errorf("resume -epochs 1 with -schedule warmup:1+const: exit %d, %q", code, stderr)
	}
}
