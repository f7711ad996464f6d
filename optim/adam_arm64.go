//go:build !purego

package optim

import "github.com/proxgen/proxgen/internal/impl"

// haveNEON reports whether the NEON Adam kernels run: on every arm64 CPU
// (ASIMD is part of the architecture). Registered with internal/impl as
// package "optim", which tests use to compare them with the Go loops.
var haveNEON = true

func init() { impl.Register("optim", "neon", &haveNEON) }

// The kernels below are in adam_arm64.s; each computes what the adamEMA
// loop it names computes, bit for bit, on n elements, n a multiple of 8.

// adamNEON is adamEMA's fusedNone loop.
//
//go:noescape
func adamNEON(th, grad, m, v *float32, n int, c *float32)

// adamEtaNEON is adamEMA's fusedEta loop.
//
//go:noescape
func adamEtaNEON(th, grad, m, v, eta *float32, n int, c *float32)
