package robust

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// RecoverKnownBiasAll refuses an empty A or V with ErrInput instead of
// panicking.
func TestReviewKnownBiasAllEmptyNoPanic(t *testing.T) {
	A := mat.NewDense(3, 1, []float64{1, 2, 3})
	for name, tc := range map[string]struct{ A, V *mat.Dense }{
		"empty V": {A, &mat.Dense{}},
		"empty A": {&mat.Dense{}, mat.NewDense(1, 3, []float64{1, 2, 3})},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panicked: %v", name, r)
				}
			}()
			_, err := RecoverKnownBiasAll(context.Background(), tc.A, tc.V, []float64{0, 0, 0}, KnownBiasOptions{}, nil)
			if !errors.Is(err, ErrInput) {
				t.Errorf("%s: err = %v, want ErrInput", name, err)
			}
		}()
	}
}

// NaN in both v and b: the error must name the same vector every time (the
// checks run in a fixed order, not over a map, whose order is random).
func TestReviewKnownBiasNaNErrorDeterministic(t *testing.T) {
	A := mat.NewDense(3, 1, []float64{1, 2, 3})
	nan := math.NaN()
	v, b := []float64{nan, 1, 1}, []float64{nan, 0, 0}
	_, err0 := RecoverKnownBias(A, v, b, KnownBiasOptions{})
	if !errors.Is(err0, ErrInput) {
		t.Fatalf("err = %v, want ErrInput", err0)
	}
	for i := 0; i < 50; i++ {
		if _, err := RecoverKnownBias(A, v, b, KnownBiasOptions{}); err == nil || err.Error() != err0.Error() {
			t.Fatalf("error changed between calls: %q then %v", err0, err)
		}
	}
}
