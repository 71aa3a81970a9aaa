package density_test

import (
	"fmt"

	"github.com/relurec/relurec/density"
)

// The Theorem 3 constants of a Laplace bias (finite bound) and of a centred
// Gaussian bias (β_γ = 0: the theorem says nothing, and the bound is +Inf).
func Example() {
	lap, _ := density.Parse("laplace:0,1")
	fmt.Printf("%s: β=%.6f L=%.0f ω=%.6f\n", lap.Name(), density.Beta(lap, 1), density.Lip(lap, 1), density.Omega(lap, 1, 0.1))
	fmt.Printf("bound per unit of d: %.0f\n", density.Theorem3Bound(lap, 1, 0.1, 1, 0))
	g := density.Gaussian{Mean: 0, Std: 1}
	fmt.Println(g.Name(), "bound:", density.Theorem3Bound(g, 1, 0.1, 100, 0))
	// Output:
	// laplace(0,1): β=0.045985 L=1 ω=0.019345
	// bound per unit of d: 24445
	// gaussian(0,1) bound: +Inf
}
