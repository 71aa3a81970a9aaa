// Package kern holds the inner loops of the sample-moment sums that both
// learners run over every row of the data (linalg.AddGram, internal/outer,
// the residualisation and slice passes of package twolayer): a row pair of
// a sum of outer products and a vector–matrix product. On amd64 CPUs with
// AVX2 they run in assembly, four columns per instruction; elsewhere (or
// with the purego build tag) in Go. Both give the same bits: the assembly
// vectorises over the output's columns only and keeps each entry's
// operations, their order and their rounding (a multiply and an add, never
// a fused multiply–add), and the Go loops round every product explicitly
// (float64(x*y)), which keeps the compiler from fusing it where it may
// (arm64, GOAMD64=v3). Callers' own Go loops around these kernels are not
// covered: results are reproducible within one build, and agree across
// builds only as far as those loops are not fused.
package kern

// Pair4 adds to the first n entries of ca and cb the weighted sums of four
// rows b0…b3:
//
//	ca[j] += ((x[0]·b0[j] + x[1]·b1[j]) + x[2]·b2[j]) + x[3]·b3[j]
//	cb[j] += ((x[4]·b0[j] + x[5]·b1[j]) + x[6]·b2[j]) + x[7]·b3[j]
//
// in exactly that order of operations (Go's for the same expression). It
// panics when a slice is shorter than n.
func Pair4(ca, cb, b0, b1, b2, b3 []float64, n int, x *[8]float64) {
	if n <= 0 {
		return
	}
	_, _, _, _, _, _ = ca[n-1], cb[n-1], b0[n-1], b1[n-1], b2[n-1], b3[n-1]
	if useAVX2 {
		pair4AVX2(&ca[0], &cb[0], &b0[0], &b1[0], &b2[0], &b3[0], n, x)
		return
	}
	pair4Go(ca[:n], cb[:n], b0[:n], b1[:n], b2[:n], b3[:n], x)
}

func pair4Go(ca, cb, b0, b1, b2, b3 []float64, x *[8]float64) {
	x0, x1, x2, x3 := x[0], x[1], x[2], x[3]
	y0, y1, y2, y3 := x[4], x[5], x[6], x[7]
	cb, b0, b1, b2, b3 = cb[:len(ca)], b0[:len(ca)], b1[:len(ca)], b2[:len(ca)], b3[:len(ca)]
	for j := range ca {
		v0, v1, v2, v3 := b0[j], b1[j], b2[j], b3[j]
		// float64(…): each product rounded, never fused into an add.
		ca[j] += float64(x0*v0) + float64(x1*v1) + float64(x2*v2) + float64(x3*v3)
		cb[j] += float64(y0*v0) + float64(y1*v1) + float64(y2*v2) + float64(y3*v3)
	}
}

// RowTimes sets out = x·B for B len(x)×len(out), row-major in b with the
// given stride: out[j] = Σ_i x[i]·b[i·stride + j], each sum taken over i in
// order from 0 (a multiply and an add per term). It panics when b is too
// short.
func RowTimes(out, x, b []float64, stride int) {
	n, m := len(out), len(x)
	if n == 0 {
		return
	}
	if m == 0 {
		clear(out)
		return
	}
	_ = b[(m-1)*stride+n-1]
	if useAVX2 {
		rowTimesAVX2(&out[0], n, &x[0], m, &b[0], stride)
		return
	}
	rowTimesGo(out, x, b, stride)
}

func rowTimesGo(out, x, b []float64, stride int) {
	clear(out)
	for i, xi := range x {
		row := b[i*stride : i*stride+len(out)]
		for j, v := range row {
			out[j] += float64(xi * v) // rounded product, never fused
		}
	}
}

// MulRows sets the rows×n matrix out (row-major, stride ldo) to a·b for a
// rows×m (stride lda) and b m×n (stride ldb): every row is RowTimes of a's
// row, the same bits, computed four rows at a time.
func MulRows(out []float64, ldo int, a []float64, lda int, b []float64, ldb int, rows, m, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	_ = out[(rows-1)*ldo+n-1]
	if m > 0 {
		_, _ = a[(rows-1)*lda+m-1], b[(m-1)*ldb+n-1]
	}
	r := 0
	if useAVX2 && m > 0 {
		for ; r+4 <= rows; r += 4 {
			gemm4AVX2(&out[r*ldo], ldo, &a[r*lda], lda, &b[0], ldb, m, n)
		}
	}
	for ; r < rows; r++ {
		RowTimes(out[r*ldo:r*ldo+n], a[r*lda:r*lda+m], b, ldb)
	}
}

// Finite reports whether every entry of row is finite: x·0 is ±0 for a
// finite x and NaN for ±Inf or NaN, and NaN survives the sums. Four
// independent sums and no branch per entry: several times faster than
// testing each entry; callers look for the offending entry only when it
// fails.
func Finite(row []float64) bool {
	var a0, a1, a2, a3 float64
	j := 0
	for ; j+4 <= len(row); j += 4 {
		a0 += row[j] * 0
		a1 += row[j+1] * 0
		a2 += row[j+2] * 0
		a3 += row[j+3] * 0
	}
	for ; j < len(row); j++ {
		a0 += row[j] * 0
	}
	return a0+a1+a2+a3 == 0
}
