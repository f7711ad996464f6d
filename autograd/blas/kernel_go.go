package blas

// Register block of the pure-Go micro-kernel.
const (
	goMR = 4
	goNR = 4
)

// goKernel is the pure-Go micro-kernel for a full 4×4 tile with packed B;
// see microKernel.run.
func goKernel(_, _, kc int, ap, bp []float32, _ int, c []float32, ldc int, alpha, beta float32, _ *float32) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	ap = ap[:kc*goMR]
	bp = bp[:kc*goNR]
	for p := 0; p < kc; p++ {
		a := ap[p*goMR : p*goMR+goMR : p*goMR+goMR]
		b := bp[p*goNR : p*goNR+goNR : p*goNR+goNR]
		a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	store4(c[0*ldc:0*ldc+4], c00, c01, c02, c03, alpha, beta)
	store4(c[1*ldc:1*ldc+4], c10, c11, c12, c13, alpha, beta)
	store4(c[2*ldc:2*ldc+4], c20, c21, c22, c23, alpha, beta)
	store4(c[3*ldc:3*ldc+4], c30, c31, c32, c33, alpha, beta)
}

// store4 writes alpha·(v0..v3) + beta·row into row, not reading row when
// beta == 0.
func store4(row []float32, v0, v1, v2, v3, alpha, beta float32) {
	row = row[:4:4]
	if beta == 0 {
		row[0] = alpha * v0
		row[1] = alpha * v1
		row[2] = alpha * v2
		row[3] = alpha * v3
		return
	}
	row[0] = alpha*v0 + beta*row[0]
	row[1] = alpha*v1 + beta*row[1]
	row[2] = alpha*v2 + beta*row[2]
	row[3] = alpha*v3 + beta*row[3]
}
