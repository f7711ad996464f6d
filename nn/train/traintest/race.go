//go:build race

package traintest

// race reports that the race detector is on: its subprocesses run many
// times slower, so the exhaustive fault loops take their -short strides.
const race = true
