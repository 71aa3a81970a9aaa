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

// Dot4 sums every product, tails of 1–3 entries included: on small
// integers (exact in float64) it equals Dot for every length.
func TestDot4(t *testing.T) {
	a := []float64{1, -2, 3, 4, 5, -6, 7, 8, 9}
	b := []float64{2, 3, -1, 5, 7, 1, 1, -2, 3, 99}
	for n := 0; n <= len(a); n++ {
		if got, want := Dot4(a[:n], b), Dot(a[:n], b); got != want {
			t.Fatalf("n=%d: Dot4 = %v, Dot = %v", n, got, want)
		}
	}
}

// BenchmarkDot compares the in-order sum with Dot4's four partial sums on
// a row prefix of the length linalg.CholeskyInPlace sees at p = 200.
func BenchmarkDot(b *testing.B) {
	x := make([]float64, 200)
	for i := range x {
		x[i] = float64(i%7) - 3
	}
	var sink float64
	b.Run("Dot", func(b *testing.B) {
		for b.Loop() {
			sink += Dot(x, x)
		}
	})
	b.Run("Dot4", func(b *testing.B) {
		for b.Loop() {
			sink += Dot4(x, x)
		}
	})
	_ = sink
}

// Normalize divides by the norm (3-4-0 becomes 0.6, 0.8, 0) and leaves a
// zero vector as it is.
func TestNormalize(t *testing.T) {
	v := []float64{3, -4, 0}
	Normalize(v)
	if v[0] != 0.6 || v[1] != -0.8 || v[2] != 0 {
		t.Errorf("Normalize(3, -4, 0) = %v", v)
	}
	z := []float64{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("Normalize(0, 0) = %v", z)
	}
}
