package linalg

import (
	"math"
)

// InvertSmall inverts the k×k row-major matrix a into inv by Gauss–Jordan
// elimination with partial pivoting (a is overwritten). It is meant for the
// many tiny systems (k ≤ ~5) of the worst-case route's enumeration, where
// allocating a mat.Dense and an LU per system would cost more than the
// elimination itself. It reports false
// when a is singular or its 1-norm condition number exceeds condMax.
func InvertSmall(a, inv []float64, k int, condMax float64) bool {
	norm1 := 0.0
	for c := 0; c < k; c++ {
		s := 0.0
		for r := 0; r < k; r++ {
			s += math.Abs(a[r*k+c])
		}
		norm1 = max(norm1, s)
	}
	if norm1 == 0 {
		return false
	}
	clear(inv)
	for i := 0; i < k; i++ {
		inv[i*k+i] = 1
	}
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r*k+c]) > math.Abs(a[p*k+c]) {
				p = r
			}
		}
		piv := a[p*k+c]
		if math.Abs(piv) <= 1e-300 || math.Abs(piv) < norm1*1e-15 {
			return false
		}
		if p != c {
			for j := 0; j < k; j++ {
				a[p*k+j], a[c*k+j] = a[c*k+j], a[p*k+j]
				inv[p*k+j], inv[c*k+j] = inv[c*k+j], inv[p*k+j]
			}
		}
		for j := 0; j < k; j++ {
			a[c*k+j] /= piv
			inv[c*k+j] /= piv
		}
		for r := 0; r < k; r++ {
			if r == c {
				continue
			}
			f := a[r*k+c]
			if f == 0 {
				continue
			}
			for j := 0; j < k; j++ {
				a[r*k+j] -= f * a[c*k+j]
				inv[r*k+j] -= f * inv[c*k+j]
			}
		}
	}
	ninv := 0.0
	for c := 0; c < k; c++ {
		s := 0.0
		for r := 0; r < k; r++ {
			s += math.Abs(inv[r*k+c])
		}
		ninv = max(ninv, s)
	}
	return norm1*ninv <= condMax
}
