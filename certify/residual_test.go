package certify

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestRelResidual(t *testing.T) {
	y := mat.NewDense(2, 2, []float64{3, 0, 0, 4})
	yh := mat.NewDense(2, 2, []float64{3, 1, 0, 4})
	if r := RelResidual(y, yh); math.Abs(r-0.2) > 1e-16 {
		t.Errorf("RelResidual = %v, want 0.2", r)
	}
	// Near the float64 range: a naive ‖·‖ overflows to Inf (or 0/0) here.
	big := mat.NewDense(1, 2, []float64{1e308, -1e308})
	bigh := mat.NewDense(1, 2, []float64{-1e308, -1e308})
	if r := RelResidual(big, bigh); math.Abs(r-math.Sqrt2) > 1e-15 {
		t.Errorf("huge entries: %v, want √2", r)
	}
	tiny := mat.NewDense(1, 2, []float64{3e-310, 4e-310})
	tinyh := mat.NewDense(1, 2, []float64{3e-310, 0})
	if r := RelResidual(tiny, tinyh); math.Abs(r-0.8) > 1e-3 {
		t.Errorf("tiny entries: %v, want 0.8", r)
	}
	z := mat.NewDense(1, 2, nil)
	if r := RelResidual(z, z); r != 0 {
		t.Errorf("0/0 = %v, want 0", r)
	}
	if r := RelResidual(z, y.Slice(0, 1, 0, 2)); !math.IsInf(r, 1) {
		t.Errorf("x/0 = %v, want +Inf", r)
	}
	if r := RelResidual(y, mat.NewDense(2, 3, nil)); !math.IsNaN(r) {
		t.Errorf("shape mismatch = %v, want NaN", r)
	}
	var nilD *mat.Dense
	if r := RelResidual(nilD, y); !math.IsNaN(r) {
		t.Errorf("nil = %v, want NaN", r)
	}
	if r := RelResidual(y, mat.NewDense(2, 2, []float64{3, math.NaN(), 0, 4})); !math.IsNaN(r) {
		t.Errorf("NaN entry = %v, want NaN", r)
	}
	// Non-Dense matrices take the generic path and agree.
	if r := RelResidual(y.T(), yh.T()); math.Abs(r-0.2) > 1e-16 {
		t.Errorf("transposed: %v", r)
	}
}
