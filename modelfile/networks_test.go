package modelfile

import (
	"math/rand/v2"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// The MLPs and graphs the tests write and read back (the CNN is
// internal/testutil/nets'). They are built as package nn's internal tests
// build theirs, which cannot come from a shared package: a test file of
// package nn cannot import a package that imports nn.

// randMLP builds a network of the given widths; acts[i] is layer i's
// activation, biases on every other layer.
func randMLP(rng *rand.Rand, widths []int, acts []nn.Activation) *nn.MLP {
	m := &nn.MLP{}
	for i := 0; i+1 < len(widths); i++ {
		l := nn.Layer{Weight: testutil.RandDense(rng, widths[i+1], widths[i]), Act: acts[i]}
		if i%2 == 1 {
			l.Bias = testutil.RandVec(rng, widths[i+1])
		}
		m.Layers = append(m.Layers, l)
	}
	return m
}

// randTensor is a tensor of the shape with standard normal entries.
func randTensor(rng *rand.Rand, shape ...int) *nn.GraphTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &nn.GraphTensor{Shape: shape, Data: testutil.RandVec(rng, n)}
}

// residualGraph is a tiny mixer-like block on samples of 3 tokens × 4
// channels: h = x + ReLU(x·W1 + b1)·W2, the mean over the channels of hᵀ
// (so per token), then Gemm(·, Wh, bh) with transB.
func residualGraph(rng *rand.Rand) *nn.Graph {
	return &nn.Graph{
		Input: "x", InputShape: []int{3, 4}, Output: "y",
		Consts: map[string]*nn.GraphTensor{
			"W1": randTensor(rng, 4, 5), "b1": randTensor(rng, 5), "W2": randTensor(rng, 5, 4),
			"Wh": randTensor(rng, 2, 3), "bh": randTensor(rng, 2),
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

// vitFixtures are the tiny ViT that bench/vit_fashion.py --fixture exports
// with torch.onnx.export in two opsets: 17 with LayerNormalization, 13
// with its decomposition (ReduceMean, Sub, Pow, Sqrt, Div); both with
// attention (MatMul of two computed values, Softmax), GELU (Erf) and the
// shape arithmetic of a dynamic batch (Shape, Gather, Unsqueeze, Concat,
// Cast, ConstantOfShape, Equal, Where, Expand).
var vitFixtures = map[string]int{"../nn/testdata/vit_tiny_opset13.onnx": 13, "../nn/testdata/vit_tiny_opset17.onnx": 17}
