// Package benchrun holds the measurement harnesses of cmd/bench: the GEMM
// timing (Gemm), training steps of the paper's models on random data
// (Train) and inference of a prepared model on random images (Infer),
// each timed by TimeLoop. A configuration (TrainConfig, InferConfig,
// GemmConfig) says what to run, and its Check what is out of range; a
// result says what was measured, as a JSON object whose keys the scripts
// under scripts/ parse, or as a table (WriteTable).
//
// The harnesses compute with the thread count and GEMM engine the program
// chose (cmd/internal/compute) and change no setting of the process; the
// results report what they ran with. They are the project's own
// benchmarks, not a library for embedding: a Go program that embeds the
// engine times its own model with testing.B or TimeLoop's pattern.
package benchrun

import (
	"fmt"
	"math"
	"time"

	"github.com/proxgen/proxgen/internal/procstat"
)

// seedStream is the second word of the PCG source of every harness's
// random numbers ("proxgen").
const seedStream = 0x70726f7867656e

// Loop says how many steps a harness runs: Warmup untimed steps, then
// timed steps until both Steps steps and MinTime have passed.
type Loop struct {
	Warmup  int           // untimed steps, at least 0
	Steps   int           // timed steps, at least 1
	MinTime time.Duration // least wall time of the timed steps, at least 0
}

// defaultLoop is the loop of the default configurations.
var defaultLoop = Loop{Warmup: 2, Steps: 10}

// check reports a loop that cannot run.
func (l Loop) check() error {
	if l.Steps < 1 {
		return fmt.Errorf("steps must be at least 1, got %d", l.Steps)
	}
	if l.Warmup < 0 || l.MinTime < 0 {
		return fmt.Errorf("warmup and min-time must not be negative, got %d and %v", l.Warmup, l.MinTime)
	}
	return nil
}

// warmUp runs the untimed steps.
func (l Loop) warmUp(step func()) {
	for range l.Warmup {
		step()
	}
}

// Timing is what TimeLoop measured.
type Timing struct {
	N       int           // timed calls
	Elapsed time.Duration // wall time of all N calls
	Fastest time.Duration // wall time of the fastest call
	CPU     time.Duration // process CPU time (all threads) of all N calls; valid if CPUOK
	CPUOK   bool          // whether CPU time could be read (procstat.CPUTime)
}

// TimeLoop calls step until both steps calls and minTime have passed and
// returns the wall and CPU times. It calls step at least once.
func TimeLoop(steps int, minTime time.Duration, step func()) Timing {
	lt := Timing{Fastest: time.Duration(math.MaxInt64)}
	cpu0, ok := procstat.CPUTime()
	start := time.Now()
	for {
		t := time.Now()
		step()
		lt.Fastest = min(lt.Fastest, time.Since(t))
		lt.N++
		if lt.N >= steps && time.Since(start) >= minTime {
			break
		}
	}
	lt.Elapsed = time.Since(start)
	cpu1, _ := procstat.CPUTime()
	lt.CPU, lt.CPUOK = cpu1-cpu0, ok
	return lt
}

// millis returns d in milliseconds rounded to the microsecond, as the
// results report times.
func millis(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// perStep returns the mean wall and CPU milliseconds of one call; cpu is
// 0 where CPU time could not be read.
func (lt Timing) perStep() (wall, cpu float64) {
	wall = millis(lt.Elapsed / time.Duration(lt.N))
	if lt.CPUOK {
		cpu = millis(lt.CPU / time.Duration(lt.N))
	}
	return wall, cpu
}
