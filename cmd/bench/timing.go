package main

// The timing helpers the train and infer subcommands share.

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/proxgen/proxgen/cmd/internal/experiment"
)

// checkLoopFlags checks the flags the timing subcommands share.
func checkLoopFlags(threads, warmup int, minTime time.Duration, width float64) error {
	if threads < 0 || warmup < 0 || minTime < 0 {
		return fmt.Errorf("-threads, -warmup and -min-time must not be negative")
	}
	if !(width > 0) || math.IsInf(width, 0) {
		return fmt.Errorf("-width must be positive, got %g", width)
	}
	return nil
}

// setThreads sets GOMAXPROCS and the worker-pool size to n when n > 0 and
// returns the function that restores both.
func setThreads(n int) (restore func()) {
	if n <= 0 {
		return func() {}
	}
	_, restore = experiment.SetThreads(n)
	return restore
}

// writeMemProfile writes the cumulative allocation profile to path and
// the baseline taken before the timed steps to path+".base", for
// "go tool pprof -sample_index=alloc_space -base path.base path".
func writeMemProfile(path string, base []byte) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench train: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("bench train: memory profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench train: %w", err)
	}
	if err := os.WriteFile(path+".base", base, 0o644); err != nil {
		return fmt.Errorf("bench train: %w", err)
	}
	return nil
}
