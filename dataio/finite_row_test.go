package dataio

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// CheckFinite's row screen (internal/kern.Finite) misses no position: every column of
// rows of 1 to 9 entries (the four sums and the tail), each bad value.
func TestCheckFiniteEveryPosition(t *testing.T) {
	for c := 1; c <= 9; c++ {
		for at := 0; at < c; at++ {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				m := mat.NewDense(3, c, nil)
				m.Set(0, c-1, math.MaxFloat64)
				m.Set(1, at, bad)
				if err := CheckFinite("X", m); err == nil {
					t.Fatalf("%d columns: %v at column %d not found", c, bad, at)
				}
			}
		}
	}
}
