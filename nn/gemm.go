package nn

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/internal/kern"
)

// mul sets c (m×n, row-major, overwritten) to op(a)·op(b): op(a) is m×k,
// stored as a when !ta and as its k×m transpose when ta; op(b) is k×n,
// stored as b or as its n×k transpose when tb. It is every matrix product
// of a graph's forward and backward passes. The pure-Go build copies a
// transposed operand to row-major order and multiplies with internal/kern's
// row kernel: the two products of a transformer block's backward pass on
// a chunk of 16 samples × 17 tokens and a 64×64 weight take 306–314 µs
// against gonum's 810–886 µs, one core (BenchmarkMul). With a native BLAS
// (the openblas build tag) it calls Dgemm.
func mul(c, a []float64, ta bool, b []float64, tb bool, m, k, n int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(c[:m*n])
		return
	}
	if blasbackend.Native() {
		tA, lda := blas.NoTrans, k
		if ta {
			tA, lda = blas.Trans, m
		}
		tB, ldb := blas.NoTrans, n
		if tb {
			tB, ldb = blas.Trans, k
		}
		blas64.Implementation().Dgemm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, n)
		return
	}
	if ta {
		a = transposed(a, k, m)
	}
	if tb {
		b = transposed(b, n, k)
	}
	kern.MulRows(c, n, a, k, b, n, m, k, n)
}

// transposed returns the c×r transpose of the r×c row-major matrix a.
func transposed(a []float64, r, c int) []float64 {
	t := make([]float64, r*c)
	for i := 0; i < r; i++ {
		row := a[i*c : (i+1)*c]
		for j, v := range row {
			t[j*r+i] = v
		}
	}
	return t
}
