//go:build !race

package traintest

const race = false
