package quad

import (
	"math"
	"testing"
)

func TestGaussLegendre(t *testing.T) {
	if got := GaussLegendre(func(x float64) float64 { return x * x * x * x * x * x * x }, -1, 2, 1); math.Abs(got-(256-1)/8.0) > 1e-12 {
		t.Errorf("∫x⁷ = %v, want %v", got, 255/8.0)
	}
	if got := GaussLegendre(math.Exp, 0, 1, 4); math.Abs(got-(math.E-1)) > 1e-14 {
		t.Errorf("∫eˣ = %v, want %v", got, math.E-1)
	}
}
