//go:build !amd64 || purego

package conv

// haveAVX512 is false where the assembly kernels are not built.
const haveAVX512 = false

// outer is outerGo where the assembly kernels are not built.
func outer(d []float32, n int, v, c []float32) { outerGo(d, n, v, c) }

// winoGradIn is winoGradInGo where the assembly kernels are not built.
func winoGradIn(src []float32, so, rs, n int, dst []float32, do, xs int) {
	winoGradInGo(src, so, rs, n, dst, do, xs)
}
