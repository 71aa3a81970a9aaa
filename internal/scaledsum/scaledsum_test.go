package scaledsum

import (
	"math"
	"testing"
)

func TestNoOverflowOrUnderflow(t *testing.T) {
	for _, scale := range []float64{1e-300, 1, 1e300} {
		var s Sum
		s.Add(3 * scale)
		s.Add(4 * scale)
		if got := s.Norm(); math.Abs(got/(5*scale)-1) > 1e-15 {
			t.Errorf("scale %g: norm %g, want %g", scale, got, 5*scale)
		}
	}
	var num, den Sum
	num.Add(3e300)
	num.Add(4e300)
	den.Add(5e300)
	if r := Ratio(num, den); math.Abs(r-1) > 1e-15 {
		t.Errorf("‖(3, 4)·1e300‖/‖5e300‖ = %g, want 1", r)
	}
	var zero Sum
	if Ratio(zero, zero) != 0 || !math.IsInf(Ratio(num, zero), 1) {
		t.Error("0/0 must be 0 and x/0 +Inf")
	}
	var bad Sum
	bad.Add(math.NaN())
	if !math.IsNaN(bad.Norm()) || !math.IsNaN(Ratio(bad, num)) {
		t.Error("a NaN entry must poison the sum")
	}
}
