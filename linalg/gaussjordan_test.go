package linalg

import (
	"math"
	"testing"
)

func TestInvertSmall(t *testing.T) {
	a := []float64{4, 7, 2, 6}
	inv := make([]float64, 4)
	if !InvertSmall(append([]float64(nil), a...), inv, 2, 1e12) {
		t.Fatal("a regular 2×2 matrix was reported singular")
	}
	want := []float64{0.6, -0.7, -0.2, 0.4}
	for i := range want {
		if math.Abs(inv[i]-want[i]) > 1e-15 {
			t.Fatalf("inverse %v, want %v", inv, want)
		}
	}
	if InvertSmall([]float64{1, 2, 2, 4}, inv, 2, 1e12) {
		t.Error("a singular matrix was inverted")
	}
	if InvertSmall([]float64{1, 0, 0, 1e-14}, inv, 2, 1e12) {
		t.Error("a matrix with condition number 1e14 passed condMax 1e12")
	}
}
