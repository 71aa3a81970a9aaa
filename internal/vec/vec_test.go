package vec

import (
	"math"
	"testing"
)

func TestDotAndMaxAbs(t *testing.T) {
	if d := Dot([]float64{1, 2, 3}, []float64{4, -5, 6, 7}); d != 12 {
		t.Errorf("Dot = %g, want 12", d)
	}
	if m := MaxAbs([]float64{1, -7, 3}); m != 7 {
		t.Errorf("MaxAbs = %g, want 7", m)
	}
	if m := MaxAbs(nil); m != 0 {
		t.Errorf("MaxAbs(nil) = %g", m)
	}
	if m := MaxAbs([]float64{1, math.NaN()}); !math.IsNaN(m) {
		t.Errorf("MaxAbs with NaN = %g", m)
	}
}
