// Package vec holds the loops over float64 slices that several packages
// write alike: the dot product and the largest absolute value, summed and
// compared in index order so every caller gets the same bits.
package vec

import "math"

// Dot is Σ a[i]·b[i] over the indices of a, summed in order; b must be at
// least as long as a.
func Dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// MaxAbs is the largest |x[i]|, 0 for an empty x and NaN if any x[i] is NaN.
func MaxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
