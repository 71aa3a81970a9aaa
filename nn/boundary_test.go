package nn

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

// TestCheckTwoLayer: the shapes NewTwoLayer does not check.
func TestCheckTwoLayer(t *testing.T) {
	V, U := mat.NewDense(3, 5, nil), mat.NewDense(2, 3, nil)
	if err := CheckTwoLayer(V, U); err != nil {
		t.Fatalf("valid pair: %v", err)
	}
	testutil.WantInputError(t, "nil V", CheckTwoLayer(nil, U), "V is nil")
	testutil.WantInputError(t, "nil U", CheckTwoLayer(V, nil), "U is nil; expected m×k with k = 3")
	testutil.WantInputError(t, "k mismatch", CheckTwoLayer(V, mat.NewDense(2, 4, nil)), "U has 4 columns but needs 3")
	testutil.WantInputError(t, "NaN", CheckTwoLayer(mat.NewDense(1, 1, []float64{math.NaN()}), mat.NewDense(1, 1, nil)), "NaN")
	if err := NewTwoLayer(V, U).Validate(); err != nil {
		t.Fatalf("NewTwoLayer of a checked pair does not validate: %v", err)
	}
}
