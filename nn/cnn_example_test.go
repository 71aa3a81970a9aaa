package nn_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// ExampleCNN builds a one-channel 4×4 → Conv2d(1, 1, 2×2) → ReLU →
// MaxPool2d(3×3, stride 1) network and shows that the conv is its weight
// matrix applied to the unfolded patches.
func ExampleCNN() {
	conv := &nn.Conv2d{Weight: mat.NewDense(1, 4, []float64{1, 0, 0, -1}), Kernel: [2]int{2, 2}}
	net := &nn.CNN{Input: nn.FeatureShape{C: 1, H: 4, W: 4}, Layers: []nn.CNNLayer{
		conv, &nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}},
	}}
	x := mat.NewDense(1, 16, []float64{ // one image, row-major
		0, 1, 2, 3,
		4, 5, 6, 7,
		8, 9, 9, 9,
		0, 0, 0, 1,
	})
	fmt.Println(net, "→", mat.Formatted(net.Forward(x)))

	p, _ := conv.Unfold(x, net.Input) // 9 positions × 4 kernel entries
	var z mat.Dense
	z.Mul(p, conv.Weight.T()) // the conv's output, one row per position
	fmt.Println(mat.Formatted(z.T()))
	// Output:
	// 1×4×4 → Conv2d(1, 1, 2×2, stride 1×1, pad 0×0) → ReLU → MaxPool2d(3×3, stride 1×1, pad 0×0) → [9]
	// [-5  -5  -5  -5  -4  -3   8   9   8]
}
