//go:build !purego

package autograd

// expBlocksAVX2 is expBlocksGo for n > 0 elements, n a multiple of 4, with
// dst nil or holding n elements: it computes the same values bit for bit
// (exp32's float64 steps without fused multiply-adds, the table read with
// a gather) and adds them to the four lane sums in s.
//
//go:noescape
func expBlocksAVX2(dst, row *float32, n int, m float32, s *[4]float64)
