// Package layers holds no code: its tests hold the module to the rules of
// docs/architecture.md. TestImportRules checks every package against the
// layer table, written down as data in the style of go/build's
// deps_test.go: a package may import the standard library and what its
// rule allows, and a new package needs a rule before the test passes.
// TestProcessSettingsOnlyInPrograms requires that only programs change
// what the whole process computes with (thread count, GEMM engine,
// assembly implementations).
package layers
