// Package testutil holds the helpers the packages' tests share: random
// matrices, the distances between matrices their checks compare, and the
// fixture files some commands read (a small Fashion-MNIST). Only tests
// import it.
package testutil

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// RandDense returns an r×c matrix of standard normal entries drawn from rng
// in row-major order.
func RandDense(rng *rand.Rand, r, c int) *mat.Dense {
	d := make([]float64, r*c)
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	return mat.NewDense(r, c, d)
}

// RandVec returns n standard normal values drawn from rng.
func RandVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// MaxAbs is the largest |entry| of m.
func MaxAbs(m mat.Matrix) float64 {
	r, c := m.Dims()
	v := 0.0
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			v = math.Max(v, math.Abs(m.At(i, j)))
		}
	}
	return v
}

// MaxRelDiff is max|a−b| / max|b| over all entries.
func MaxRelDiff(a, b mat.Matrix) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return MaxAbs(&d) / math.Max(MaxAbs(b), 1e-300)
}

// DiffNormInf is ‖a − b‖_∞, the largest absolute row sum of a − b: an upper
// bound on every |a_ij − b_ij|, and zero only when a = b.
func DiffNormInf(a, b mat.Matrix) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, math.Inf(1))
}

// RelDiff is ‖a − b‖_F / ‖b‖_F (the denominator floored at the smallest
// positive float64, so b = 0 gives a finite value for a = 0).
func RelDiff(a, b mat.Matrix) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, 2) / math.Max(mat.Norm(b, 2), math.SmallestNonzeroFloat64)
}
