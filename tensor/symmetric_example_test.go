package tensor_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/tensor"
)

// A symmetric tensor stores each distinct entry once; its flattening in the
// symmetric basis has the rank of the full one.
func ExampleSymmetric() {
	T := tensor.NewSymmetric(3, 4)              // order 4 on R³: 15 distinct entries, not 81
	T.AddOuterPower(2, []float64{1, 0, 0})      // 2·e₁^{⊗4}
	T.AddOuterPower(-1, []float64{0, 0.6, 0.8}) // − u^{⊗4}
	fmt.Println("distinct entries:", T.Len())
	fmt.Println("T[0,0,0,0] =", T.At(0, 0, 0, 0), " T[1,2,1,2] = T[1,1,2,2] =", T.At(1, 2, 1, 2) == T.At(1, 1, 2, 2))
	r, c := T.Matricize(2).Dims()
	fmt.Printf("flatten(T, 2, 2) in the symmetric basis: %d×%d\n", r, c)
	// Output:
	// distinct entries: 15
	// T[0,0,0,0] = 2  T[1,2,1,2] = T[1,1,2,2] = true
	// flatten(T, 2, 2) in the symmetric basis: 6×6
}

// Empirical Hermite moments of every order up to 4 in one pass: for
// y = z₁² the order-2 moment E[y·(zzᵀ − I)] is 2·e₁e₁ᵀ.
func ExampleHermiteMoments() {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 200000
	Z := mat.NewDense(n, 2, nil)
	Y := mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		z0, z1 := rng.NormFloat64(), rng.NormFloat64()
		Z.SetRow(i, []float64{z0, z1})
		Y.Set(i, 0, z0*z0)
	}
	T, _ := tensor.HermiteMoments(context.Background(), Z, Y, 4, nil)
	fmt.Printf("E[y] ≈ %.1f, E[y·He_2(z)]₀₀ ≈ %.1f, ₀₁ ≈ %.1f\n", T[0][0].At(), T[0][2].At(0, 0), T[0][2].At(0, 1))
	// Output:
	// E[y] ≈ 1.0, E[y·He_2(z)]₀₀ ≈ 2.0, ₀₁ ≈ 0.0
}
