//go:build !race

package infer_test

// raceEnabled is set when the race detector is on.
const raceEnabled = false
