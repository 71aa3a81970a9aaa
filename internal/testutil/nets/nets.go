// Package nets builds the networks that the tests of more than one package
// write, read and run. It is apart from package testutil, which package
// nn's own tests import and which therefore cannot import nn.
package nets

import (
	"math/rand/v2"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// RandCNN is a small CNN exercising every module, strides, paddings, a
// factored conv (3×3 to 2 channels, then 1×1) and a factored Linear:
// 2×9×7 → Conv(2,3,3×3,pad 1) → ReLU → MaxPool(2×2) → Conv(3,2,3×2,stride
// 2×1,pad 1×0, no bias) → Conv(2,4,1×1) → ReLU → MaxPool(3×2, stride 1,
// pad 1×1) → Flatten → Linear → Linear → ReLU → Linear(…, 5).
func RandCNN(rng *rand.Rand) *nn.CNN {
	conv := func(out, in, kh, kw int, bias bool) *nn.Conv2d {
		c := &nn.Conv2d{Weight: testutil.RandDense(rng, out, in*kh*kw), Kernel: [2]int{kh, kw}}
		if bias {
			c.Bias = testutil.RandVec(rng, out)
		}
		return c
	}
	c1 := conv(3, 2, 3, 3, true)
	c1.Padding = [2]int{1, 1}
	c2 := conv(2, 3, 3, 2, false)
	c2.Stride, c2.Padding = [2]int{2, 1}, [2]int{1, 0}
	c3 := conv(4, 2, 1, 1, true)
	net := &nn.CNN{Input: nn.FeatureShape{C: 2, H: 9, W: 7}, Layers: []nn.CNNLayer{
		c1, &nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}},
		c2, c3, &nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{3, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}},
		&nn.Flatten{},
	}}
	s, err := net.Shapes()
	if err != nil {
		panic(err)
	}
	flat := s[len(s)-1].Size()
	net.Layers = append(net.Layers,
		&nn.Linear{Weight: testutil.RandDense(rng, 3, flat)},
		&nn.Linear{Weight: testutil.RandDense(rng, 6, 3), Bias: testutil.RandVec(rng, 6)}, &nn.ReLULayer{},
		&nn.Linear{Weight: testutil.RandDense(rng, 5, 6), Bias: testutil.RandVec(rng, 5)})
	return net
}
