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

// RandTensor is a graph constant of the shape with standard normal entries.
func RandTensor(rng *rand.Rand, shape ...int) *nn.GraphTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &nn.GraphTensor{Shape: shape, Data: testutil.RandVec(rng, n)}
}

// ResidualGraph is a tiny mixer-like block on samples of 3 tokens × 4
// channels: h = x + ReLU(x·W1 + b1)·W2, the mean over the channels of hᵀ
// (so per token), then Gemm(·, Wh, bh) with transB. Package nn's own
// tests build the same graph (they cannot import this package).
func ResidualGraph(rng *rand.Rand) *nn.Graph {
	return &nn.Graph{
		Input: "x", InputShape: []int{3, 4}, Output: "y",
		Consts: map[string]*nn.GraphTensor{
			"W1": RandTensor(rng, 4, 5), "b1": RandTensor(rng, 5), "W2": RandTensor(rng, 5, 4),
			"Wh": RandTensor(rng, 2, 3), "bh": RandTensor(rng, 2),
		},
		Nodes: []nn.GraphNode{
			{Name: "mm1", Op: "MatMul", Inputs: []string{"x", "W1"}, Outputs: []string{"a"}},
			{Name: "add1", Op: "Add", Inputs: []string{"b1", "a"}, Outputs: []string{"b"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"c"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"c", "W2"}, Outputs: []string{"d"}},
			{Name: "res", Op: "Add", Inputs: []string{"x", "d"}, Outputs: []string{"h"}},
			{Name: "tr", Op: "Transpose", Inputs: []string{"h"}, Outputs: []string{"ht"}, Attrs: map[string]nn.GraphAttr{"perm": {Kind: "ints", Ints: []int64{0, 2, 1}}}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"ht"}, Outputs: []string{"m"}, Attrs: map[string]nn.GraphAttr{"axes": {Kind: "ints", Ints: []int64{1}}, "keepdims": {Kind: "int", I: 0}}},
			{Name: "head", Op: "Gemm", Inputs: []string{"m", "Wh", "bh"}, Outputs: []string{"y"}, Attrs: map[string]nn.GraphAttr{"transB": {Kind: "int", I: 1}}},
		},
	}
}
