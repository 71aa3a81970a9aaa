package rpca

import (
	"context"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// With several bad options the error must name the same one every time (the
// checks run in a fixed order, not over a map, whose order is random).
func TestReviewOptionErrorDeterministic(t *testing.T) {
	A := mat.NewDense(3, 3, []float64{1, 2, 3, 4, 5, 6, 7, 8, 10})
	opt := Options{Lambda: -1, Mu0: -1, Rho: -1, MuMax: -1, Tol: -1, RankTol: -1, FlagTol: -1}
	_, err0 := PCP(context.Background(), A, opt)
	if err0 == nil {
		t.Fatal("no error for negative options")
	}
	for i := 0; i < 50; i++ {
		if _, err := PCP(context.Background(), A, opt); err == nil || err.Error() != err0.Error() {
			t.Fatalf("error changed between calls: %q then %v", err0, err)
		}
	}
}
