package twolayer_test

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/twolayer"
)

// The worst-case route fits a two-layer network exactly to data from any
// input law — here 12 samples on an integer grid, far from Gaussian.
func ExampleWorstCase() {
	X := mat.NewDense(12, 3, nil)
	for i := 0; i < 12; i++ {
		X.SetRow(i, []float64{float64(i%3 - 1), float64(i%4 - 2), float64((i*5)%7 - 3)})
	}
	V := mat.NewDense(2, 3, []float64{1, 0.5, -1, -0.5, 1, 0.25})
	U := mat.NewDense(2, 2, []float64{1, 2, -1, 1})
	var H, Y mat.Dense
	H.Mul(X, V.T())
	H.Apply(func(_, _ int, v float64) float64 { return max(v, 0) }, &H)
	Y.Mul(&H, U.T())

	res, err := twolayer.WorstCase(context.Background(), X, &Y, twolayer.WorstCaseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Route, res.Diagnostics.Hidden, res.Certificate.Met, res.Certificate.Residual < 1e-12)
	// Output: worstcase-lp 2 true true
}
