//go:build !purego

package proxk

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// HaveAVX2 reports whether the AVX2 kernels run (the prox maps, the group
// sums and the fused Adam step): registered with internal/impl as package
// "optim", which tests use to compare them with the Go loops.
var HaveAVX2 = cpu.X86.AVX2

func init() { impl.Register("optim", "avx2", &HaveAVX2) }

// The kernels below are in prox_amd64.s; each computes what the Go loop
// it names computes, bit for bit, on n elements, n a multiple of 8.

// proxL1AVX2 is ProxL1Slice.
//
//go:noescape
func proxL1AVX2(dst, z, eta *float32, n int, l float32)

// proxL0AVX2 is the float32 fast path of ProxL0Slice.
//
//go:noescape
func proxL0AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8) (slow int)

// l12SAVX2 is l12S for the elements of z and eta.
//
//go:noescape
func l12SAVX2(s, z, eta *float32, n int, l2 float32)

// L12XAVX2 is l12X for the elements of z and s.
//
//go:noescape
func L12XAVX2(dst, z, s *float32, n int, mask *uint8, rat *[7]float32) (slow int)

// AdamAVX2 is adamEMA's fusedNone loop.
//
//go:noescape
func AdamAVX2(th, grad, m, v *float32, n int, c *float32)

// AdamEtaAVX2 is adamEMA's fusedEta loop.
//
//go:noescape
func AdamEtaAVX2(th, grad, m, v, eta *float32, n int, c *float32)

// AdamL12SAVX2 is AdamEtaAVX2 followed by l12SAVX2(s, th, eta, n, l2).
//
//go:noescape
func AdamL12SAVX2(th, grad, m, v, eta, s *float32, n int, c *float32, l2 float32)
