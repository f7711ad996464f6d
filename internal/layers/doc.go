// Package layers holds no code: its test, TestImportRules, checks every
// package of the module against the layer rules of docs/architecture.md,
// written down as data in the style of go/build's deps_test.go. A package
// may import the standard library and what its rule allows; a new package
// needs a rule before its tests pass.
package layers
