package linalg

import (
	"math"
	"testing"
)

func TestCholeskyInPlace(t *testing.T) {
	a := []float64{4, 2, 2, 3}
	if !CholeskyInPlace(a, 2) {
		t.Fatal("SPD matrix rejected")
	}
	b := []float64{2, 1} // solution of [[4,2],[2,3]]x = b is (0.5, 0)
	CholeskySolveInPlace(a, 2, b)
	if math.Abs(b[0]-0.5) > 1e-15 || math.Abs(b[1]) > 1e-15 {
		t.Errorf("solution %v, want [0.5 0]", b)
	}
	if CholeskyInPlace([]float64{1, 2, 2, 1}, 2) {
		t.Error("indefinite matrix accepted")
	}
}
