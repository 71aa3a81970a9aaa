package metrics

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// MeanSquareDepth2 returns E_x ‖f(x)‖² for x ~ N(0, I_d), the squared L2
// norm of a depth-2 ReLU network with biases: L2Depth2 against the zero
// network of the same shape. It is the denominator of the relative L2 error
// √(L2Depth2(f, g)/MeanSquareDepth2(f)).
func MeanSquareDepth2(f *nn.MLP) (float64, error) {
	W, _, A, _, err := depth2Parts("f", f)
	if err != nil {
		return 0, fmt.Errorf("metrics.MeanSquareDepth2: %w", err)
	}
	_, d := W.Dims()
	p, _ := A.Dims()
	zero := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.NewDense(1, d, nil), Bias: []float64{0}, Act: nn.ReLU},
		{Weight: mat.NewDense(p, 1, nil), Bias: make([]float64, p), Act: nn.Identity},
	}}
	return L2Depth2(f, zero)
}
