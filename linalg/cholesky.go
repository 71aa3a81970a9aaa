package linalg

import (
	"math"

	"github.com/relurec/relurec/internal/vec"
)

// CholeskyInPlace factors the symmetric positive definite p×p matrix a
// (row-major, full storage) in place into its lower factor L, a = L·Lᵀ. It
// reports false when a pivot is not positive. It is the allocation-free
// kernel for small systems solved many times in inner loops (gonum's
// mat.Cholesky allocates per factorisation). Its dot products are
// vec.Dot4, four partial sums side by side.
func CholeskyInPlace(a []float64, p int) bool {
	for j := 0; j < p; j++ {
		rj := a[j*p : j*p+j]
		s := a[j*p+j] - vec.Dot4(rj, rj)
		if !(s > 0) {
			return false
		}
		ljj := math.Sqrt(s)
		a[j*p+j] = ljj
		for i := j + 1; i < p; i++ {
			a[i*p+j] = (a[i*p+j] - vec.Dot4(a[i*p:i*p+j], rj)) / ljj
		}
	}
	return true
}

// CholeskySolveInPlace solves L·Lᵀ·x = b in place, L from CholeskyInPlace.
func CholeskySolveInPlace(l []float64, p int, b []float64) {
	for i := 0; i < p; i++ {
		t := b[i]
		for k := 0; k < i; k++ {
			t -= l[i*p+k] * b[k]
		}
		b[i] = t / l[i*p+i]
	}
	for i := p - 1; i >= 0; i-- {
		t := b[i]
		for k := i + 1; k < p; k++ {
			t -= l[k*p+i] * b[k]
		}
		b[i] = t / l[i*p+i]
	}
}
