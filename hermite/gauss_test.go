package hermite

import (
	"math"
	"testing"
)

func TestNormCDFTails(t *testing.T) {
	cases := []struct{ x, logPhi float64 }{
		{0, math.Log(0.5)},
		{-1, math.Log(0.15865525393145707)},
		{-10, math.Log(7.619853024160527e-24)},
		{-30, math.Log(4.906713927148187e-198)},
		{-40, -804.6084420137538},
		{3, math.Log(0.9986501019683699)},
		{10, -7.619853024160527e-24},
	}
	for _, c := range cases {
		if got := LogNormCDF(c.x); math.Abs(got-c.logPhi) > 1e-12*math.Max(1, math.Abs(c.logPhi)) {
			t.Errorf("LogNormCDF(%v) = %.16g, want %.16g", c.x, got, c.logPhi)
		}
	}
	// Continuity across the switch to the asymptotic series.
	if a, b := LogNormCDF(-20+1e-9), LogNormCDF(-20-1e-9); math.Abs(a-b) > 1e-6 {
		t.Errorf("LogNormCDF jumps at −20: %v vs %v", a, b)
	}
}

func TestNormHazard(t *testing.T) {
	for _, x := range []float64{-40, -5, 0, 1, 5, 19.9, 20.1, 50} {
		want := NormPDF(x) / NormCDF(-x)
		got := NormHazard(x)
		if x < 30 && math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Errorf("NormHazard(%v) = %v, want %v", x, got, want)
		}
		if x >= 0 && (got < x || got > x+1/x+1e-12) && x > 1 {
			t.Errorf("NormHazard(%v) = %v outside (x, x + 1/x)", x, got)
		}
	}
}
