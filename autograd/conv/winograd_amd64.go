//go:build !purego

package conv

// The kernels process n tiles or elements, n a positive multiple of 8;
// the Go loops of winograd.go do the rest. Each computes what those loops
// compute, bit for bit.

// winoInRowsAVX2 and winoOutRowsAVX2 take the inputs (outputs) of the
// first four of every eight tiles at row and those of the other four half
// elements further, then move row on by adv elements: half 8 and adv 16
// for tiles along one row, other values for four tiles from each of two
// tile rows.
//
//go:noescape
func winoInRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int)

//go:noescape
func winoInColsAVX2(o0, o1, o2, o3, d0, d1, d2, d3 *float32, n int)

//go:noescape
func winoOutColsAVX2(o0, o1, d0, d1, d2, d3 *float32, n int)

// winoOutRowsAVX2 writes row as mode (an outMode) says.
//
//go:noescape
func winoOutRowsAVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, half, adv int)

// winoInRows2AVX2 and winoOutRows2AVX2 are the row transforms of planes
// two tiles wide: each step takes four tiles, two from each of two tile
// rows, whose windows' row l (outputs' row x) lies two plane (output)
// rows apart, and then moves on by two tile rows. n is a positive
// multiple of 4; wp is the plane's row pitch and wo the output's.
//
//go:noescape
func winoInRows2AVX2(row, o0, o1, o2, o3 *float32, n, wp int)

//go:noescape
func winoOutRows2AVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, wo int)

// winoFilterAVX2 is winoFilter for the n filters (n a positive multiple
// of 4) at src[o·stride], o < n, writing U_ξ of filter o to
// dst[ξ·pitch + o].
//
//go:noescape
func winoFilterAVX2(dst *float32, pitch int, src *float32, stride, n int, swap bool)

// winoGradRowsAVX2 is the row transform of winoGradRows for n tiles (a
// positive multiple of 8), taking the pairs of the first four of every
// eight tiles at row and those of the other four half elements further,
// then moving row on by adv elements, as winoInRowsAVX2 does.
//
//go:noescape
func winoGradRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int)

// winoGradColsAVX2 is winoGradCols for n elements, a positive multiple of
// 8.
//
//go:noescape
func winoGradColsAVX2(o0, o1, o2, o3, d0, d1 *float32, n int)
