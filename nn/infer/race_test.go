//go:build race

package infer_test

// raceEnabled is set when the race detector is on; it makes sync.Pool drop
// items at random, so pooled buffers are not always reused.
const raceEnabled = true
