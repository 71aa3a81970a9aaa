package certify

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/scaledsum"
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
	var num, den scaledsum.Sum
	add := func(a, b float64) {
		num.Add(a/2 - b/2) // a − b may overflow; the halves cannot
		den.Add(a / 2)
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
	return scaledsum.Ratio(num, den)
}
