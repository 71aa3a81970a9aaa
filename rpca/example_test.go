package rpca_test

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/rpca"
	"github.com/relurec/relurec/synth"
)

// Example separates a rank-2 matrix from 5% large corruptions.
func Example() {
	rng := synth.NewRand(1)
	P := mat.NewDense(300, 2, nil)
	Q := mat.NewDense(40, 2, nil)
	for _, d := range [][]float64{P.RawMatrix().Data, Q.RawMatrix().Data} {
		for i := range d {
			d[i] = rng.NormFloat64()
		}
	}
	var M mat.Dense
	M.Mul(P, Q.T())
	A, _, err := synth.CorruptSparse(&M, synth.SparseCorruption{Frac: 0.05}, rng)
	if err != nil {
		panic(err)
	}
	res, err := rpca.PCP(context.Background(), A, rpca.Options{})
	if err != nil {
		panic(err)
	}
	var diff mat.Dense
	diff.Sub(res.L, &M)
	fmt.Println("converged:", res.Converged, "rank:", res.Rank, "corrupted entries:", res.NNZ)
	fmt.Println("‖L − M‖/‖M‖ < 1e-12:", mat.Norm(&diff, 2)/mat.Norm(&M, 2) < 1e-12)
	// Output:
	// converged: true rank: 2 corrupted entries: 600
	// ‖L − M‖/‖M‖ < 1e-12: true
}
