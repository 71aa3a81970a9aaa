package kern

import (
	"math"
	"testing"
)

// Finite flags a NaN or ±Inf at any position (the four sums and the
// tail), and passes finite rows, −0 and the largest floats included.
func TestFiniteRow(t *testing.T) {
	for n := 0; n <= 9; n++ {
		row := make([]float64, n)
		for i := range row {
			row[i] = float64(i) - 3.5
		}
		if n > 0 {
			row[0] = math.Copysign(0, -1)
		}
		if n > 1 {
			row[n-1] = math.MaxFloat64
		}
		if !Finite(row) {
			t.Fatalf("n=%d: finite row %v flagged", n, row)
		}
		for at := 0; at < n; at++ {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				r := append([]float64(nil), row...)
				r[at] = bad
				if Finite(r) {
					t.Fatalf("n=%d: %v at %d not flagged", n, bad, at)
				}
			}
		}
	}
}
