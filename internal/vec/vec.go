// Package vec holds the loops over float64 slices that several packages
// write alike: the dot product, scaling to unit norm and the largest
// absolute value, summed and compared in index order so every caller gets
// the same bits.
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

// Dot4 is Σ a[i]·b[i] over the indices of a (b at least as long) in four
// interleaved partial sums, added as (s0+s1)+(s2+s3): the additions of one
// sum wait on each other, four run side by side: on 200 entries (a row of
// linalg.CholeskyInPlace at p = 200) 85–89 ns against Dot's 112–116 ns
// (BenchmarkDot, one core).
// Its bits differ from Dot's; each caller keeps to one of the two.
func Dot4(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Normalize scales v in place to unit Euclidean norm, √Dot(v, v); a zero
// v is left as it is.
func Normalize(v []float64) {
	s := math.Sqrt(Dot(v, v))
	if s == 0 {
		return
	}
	for i := range v {
		v[i] /= s
	}
}

// MaxAbs is the largest |x[i]|, 0 for an empty x and NaN if any x[i] is NaN.
func MaxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
