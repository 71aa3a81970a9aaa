package ica_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/ica"
)

// Example unmixes two independent sources — a rectified Gaussian (the hidden
// activation of a ReLU unit) and a uniform — from two linear mixtures.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	X := mat.NewDense(n, 2, nil)
	for i := 0; i < n; i++ {
		s1 := math.Max(rng.NormFloat64(), 0)
		s2 := rng.Float64()
		X.Set(i, 0, 2*s1+s2)
		X.Set(i, 1, s1-s2)
	}
	res, err := ica.FastICA(context.Background(), X, ica.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("converged:", res.Converged)
	// Each mixing column is parallel to one true column (2, 1) or (1, −1).
	for j := 0; j < 2; j++ {
		a := mat.Col(nil, j, res.Mixing)
		c1 := math.Abs(a[0]*2+a[1]*1) / math.Hypot(a[0], a[1]) / math.Sqrt(5)
		c2 := math.Abs(a[0]*1-a[1]*1) / math.Hypot(a[0], a[1]) / math.Sqrt(2)
		fmt.Printf("|cos| with a true column: %.2f\n", math.Max(c1, c2))
	}
	// Output:
	// converged: true
	// |cos| with a true column: 1.00
	// |cos| with a true column: 1.00
}
