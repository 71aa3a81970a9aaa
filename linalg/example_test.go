package linalg_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// Example detects the exact rank of a tall matrix from its singular values,
// the test the exact two-layer route uses to infer the number of hidden units,
// and then solves a consistent least-squares system.
func Example() {
	// 6 samples × 3 columns whose third column is the sum of the first two.
	a := mat.NewDense(6, 3, []float64{
		1, 0, 1,
		0, 1, 1,
		2, 1, 3,
		1, 3, 4,
		0, 2, 2,
		3, 1, 4,
	})
	_, s, _, err := linalg.ThinSVD(a)
	if err != nil {
		panic(err)
	}
	fmt.Println("rank:", linalg.NumericalRank(s, 1e-10))
	fmt.Println("σ3/σ1 < 1e-10:", s[2]/s[0] < 1e-10)

	// The rank-deficient matrix has no unique least-squares solution…
	_, err = linalg.LstSq(a, mat.NewDense(6, 1, []float64{1, 1, 1, 1, 1, 1}))
	fmt.Println(err != nil)

	// …but its first two columns do: b = 2·col0 − col1 is recovered exactly.
	a2 := a.Slice(0, 6, 0, 2)
	b := mat.NewDense(6, 1, nil)
	b.Apply(func(i, _ int, _ float64) float64 { return 2*a.At(i, 0) - a.At(i, 1) }, b)
	x, err := linalg.LstSq(a2, b)
	if err != nil {
		panic(err)
	}
	fmt.Printf("x = [%.6f %.6f]\n", x.At(0, 0), x.At(1, 0))
	// Output:
	// rank: 2
	// σ3/σ1 < 1e-10: true
	// true
	// x = [2.000000 -1.000000]
}
