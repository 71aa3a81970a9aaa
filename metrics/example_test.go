package metrics_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// Example compares a two-layer network with a copy whose hidden units are
// reordered and rescaled (the same function), and with one whose unit has
// its sign flipped (a different function under ReLU).
func Example() {
	v := mat.NewDense(2, 3, []float64{1, 0, 0, 0, 1, 1})
	u := mat.NewDense(1, 2, []float64{2, -1})
	truth := nn.NewTwoLayer(v, u)

	// Units swapped; unit 0 scaled by 4 in V and 1/4 in U, unit 1 by 0.5 and 2.
	same := nn.NewTwoLayer(
		mat.NewDense(2, 3, []float64{0, 0.5, 0.5, 4, 0, 0}),
		mat.NewDense(1, 2, []float64{-2, 0.5}),
	)
	e, err := metrics.CompareTwoLayer(truth, same)
	if err != nil {
		panic(err)
	}
	fmt.Printf("perm %v, max relative error %.1g\n", e.Perm, e.MaxRelErr)

	flipped := nn.NewTwoLayer(
		mat.NewDense(2, 3, []float64{-1, 0, 0, 0, 1, 1}),
		mat.NewDense(1, 2, []float64{-2, -1}),
	)
	e, err = metrics.CompareTwoLayer(truth, flipped)
	if err != nil {
		panic(err)
	}
	fmt.Println("sign flip matches within 1e-9:", e.MaxRelErr <= 1e-9)
	// Output:
	// perm [1 0], max relative error 0
	// sign flip matches within 1e-9: false
}
