package extract

import (
	"testing"

	"gonum.org/v1/gonum/mat"
)

// A Jacobian column whose step the oracle's float32 rounding took back to
// x reads 0/0; the measurement fails its check instead of entering the sum
// the orientations are read from (a NaN there leaves every unit as found).
func TestReadJacobianRejectsVanishedStep(t *testing.T) {
	const d, p = 3, 2
	e := &extractor{d: d, o: &counted{p: p}, eta: 1e-7}
	j := &jacJob{x: []float64{1, 2, 3}, h: 1e-3}
	// Rows: f(x), f(x + steps_c e_c) for c < d, f(x + check).
	Y := mat.NewDense(d+2, p, []float64{
		1, 2,
		1.001, 2,
		1, 2, // the vanished step: f unchanged
		1, 2.001,
		1.0005, 2.0005,
	})
	e.readJacobian(j, Y, 0, []float64{1e-3, 0, 1e-3}, []float64{5e-4, 0, 5e-4})
	if j.ok || e.jsum != nil {
		t.Fatalf("a Jacobian with a 0/0 column passed its check (ok %v, sum %v)", j.ok, e.jsum)
	}
}
