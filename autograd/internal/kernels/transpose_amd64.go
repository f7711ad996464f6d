//go:build !purego

package kernels

// transposeAsm: TransposeStrided has an AVX2 kernel (run while useAsm).
const transposeAsm = true

// transpose8AVX2 writes the transpose of the 8×n block at src (rows lds
// values apart) into the n×8 block at dst (rows ldd values apart): what
// TransposeStrided's Go loop does for eight rows, n a positive multiple
// of 8.
//
//go:noescape
func transpose8AVX2(src *float32, lds int, dst *float32, ldd int, n int)

// transpose16AVX2 writes the transpose of the 16×n block at src (rows lds
// values apart) into the n×16 block at dst (rows ldd values apart): what
// TransposeStrided's Go loop does for sixteen rows, n a positive multiple
// of 8.
//
//go:noescape
func transpose16AVX2(src *float32, lds int, dst *float32, ldd int, n int)
