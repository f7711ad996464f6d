package main

// The flag checks and thread setting the train and infer subcommands share.

import (
	"fmt"
	"math"
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
