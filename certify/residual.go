package certify

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// RelResidual returns ‖y − yhat‖_F / ‖y‖_F, the residual a Certificate
// holds. It uses scaled sums of squares (and differences of halves), so
// entries near the float64 range neither overflow nor underflow. It is 0
// when both are zero, +Inf when y is zero and yhat is not, and NaN for nil
// or mismatched shapes or NaN/Inf entries.
func RelResidual(y, yhat mat.Matrix) float64 {
	if y == nil || yhat == nil {
		return math.NaN()
	}
	if d, ok := y.(*mat.Dense); ok && d == nil {
		return math.NaN()
	}
	if d, ok := yhat.(*mat.Dense); ok && d == nil {
		return math.NaN()
	}
	r, c := y.Dims()
	r2, c2 := yhat.Dims()
	if r != r2 || c != c2 || r == 0 || c == 0 {
		return math.NaN()
	}
	var num, den ssq
	add := func(a, b float64) {
		num.add(a/2 - b/2) // a − b may overflow; the halves cannot
		den.add(a / 2)
	}
	yd, ok1 := y.(*mat.Dense)
	hd, ok2 := yhat.(*mat.Dense)
	for i := 0; i < r; i++ {
		if ok1 && ok2 {
			ry, rh := yd.RawRowView(i), hd.RawRowView(i)
			for j := range ry {
				add(ry[j], rh[j])
			}
			continue
		}
		for j := 0; j < c; j++ {
			add(y.At(i, j), yhat.At(i, j))
		}
	}
	return ratio(num, den)
}

// ssq accumulates a sum of squares as scale²·sum so that neither huge nor
// tiny entries overflow or underflow (LAPACK's dnrm2). A NaN or Inf entry
// poisons it to NaN.
type ssq struct{ scale, sum float64 }

func (s *ssq) add(x float64) {
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

// ratio is ‖num‖/‖den‖ from two scaled sums of squares, without forming
// either norm (so it neither overflows nor underflows). 0/0 is 0, x/0 is +Inf.
func ratio(num, den ssq) float64 {
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
