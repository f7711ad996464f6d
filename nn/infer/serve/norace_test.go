//go:build !race

package serve_test

// raceEnabled is set when the race detector is on.
const raceEnabled = false
