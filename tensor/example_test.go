package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/tensor"
)

// Jennrich recovers the common components of slices W·D_i·Wᵀ.
func ExampleJennrich() {
	W := mat.NewDense(2, 2, []float64{1, 0.6, 0, 0.8}) // unit columns (1,0) and (0.6,0.8)
	var slices []*mat.SymDense
	for _, d := range [][]float64{{1, 2}, {3, -1}} {
		var M mat.Dense
		M.Product(W, mat.NewDiagDense(2, d), W.T())
		slices = append(slices, mat.NewSymDense(2, []float64{M.At(0, 0), M.At(0, 1), M.At(1, 0), M.At(1, 1)}))
	}
	dec, _ := tensor.Jennrich(slices, rand.New(rand.NewPCG(1, 1)), tensor.JennrichOptions{})
	for j := 0; j < 2; j++ {
		c := mat.Col(nil, j, dec.W)
		if c[0] < 0 { // components are found up to sign
			c[0], c[1] = -c[0], -c[1]
		}
		for i, v := range c {
			if math.Abs(v) < 5e-4 {
				c[i] = 0 // rounding noise prints as 0.000, not -0.000
			}
		}
		fmt.Printf("(%.3f, %.3f)\n", c[0], c[1])
	}
	// Unordered output:
	// (1.000, 0.000)
	// (0.600, 0.800)
}
