package robust

import (
	"context"
	"errors"
	"testing"

	"gonum.org/v1/gonum/mat"
)

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
