package nn_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Example builds y = U·ReLU(V·x), evaluates it and puts it in canonical
// form (package modelfile's example saves it to a file).
func Example() {
	V := mat.NewDense(2, 2, []float64{
		0, 2, // unit 0: 2·x₁
		1, 0, // unit 1: x₀
	})
	U := mat.NewDense(1, 2, []float64{1, 3})
	net := nn.NewTwoLayer(V, U)

	X := mat.NewDense(2, 2, []float64{1, 1, -1, 2})
	fmt.Println(mat.Formatted(net.Forward(X)))

	// Canonical form: unit rows, units sorted by outgoing weight.
	c := net.Canonical()
	fmt.Println(mat.Formatted(c.Layers[0].Weight), mat.Formatted(c.Layers[1].Weight))

	// Output:
	// ⎡5⎤
	// ⎣4⎦
	// ⎡1  0⎤
	// ⎣0  1⎦ [3  2]
}
