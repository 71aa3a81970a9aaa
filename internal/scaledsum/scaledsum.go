// Package scaledsum accumulates sums of squares as scale²·sum, so that norms
// of vectors with huge or tiny entries neither overflow nor underflow (the
// method of LAPACK's dnrm2). The residual certificate (certify) and the
// weight comparisons (metrics) share it.
package scaledsum

import "math"

// Sum is a sum of squares held as scale²·sum. The zero value is an empty
// sum. A NaN or Inf entry poisons it to NaN.
type Sum struct{ scale, sum float64 }

// Add adds x².
func (s *Sum) Add(x float64) {
	if x == 0 {
		return
	}
	a := math.Abs(x)
	if math.IsNaN(a) || math.IsInf(a, 0) {
		s.scale, s.sum = math.NaN(), math.NaN()
		return
	}
	if a > s.scale {
		if s.scale > 0 {
			r := s.scale / a
			s.sum = 1 + s.sum*r*r
		} else {
			s.sum = 1
		}
		s.scale = a
		return
	}
	r := a / s.scale
	s.sum += r * r
}

// Norm is the square root of the sum.
func (s Sum) Norm() float64 {
	if s.scale == 0 {
		return 0
	}
	return s.scale * math.Sqrt(s.sum)
}

// Ratio is ‖num‖/‖den‖ from two sums, without forming either norm (so it
// neither overflows nor underflows). 0/0 is 0, x/0 is +Inf, NaN stays NaN.
func Ratio(num, den Sum) float64 {
	if math.IsNaN(num.scale) || math.IsNaN(den.scale) {
		return math.NaN()
	}
	if num.scale == 0 {
		return 0
	}
	if den.scale == 0 {
		return math.Inf(1)
	}
	return (num.scale / den.scale) * math.Sqrt(num.sum/den.sum)
}
