package modelfile

import (
	"math/rand/v2"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// The MLPs and graphs the tests write and read back (the CNN and the
// residual graph are internal/testutil/nets'). They are built as package
// nn's internal tests build theirs, which cannot come from a shared
// package: a test file of package nn cannot import a package that imports
// nn.

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

// vitFixtures are the tiny ViT that bench/vit_fashion.py --fixture exports
// with torch.onnx.export in two opsets: 17 with LayerNormalization, 13
// with its decomposition (ReduceMean, Sub, Pow, Sqrt, Div); both with
// attention (MatMul of two computed values, Softmax), GELU (Erf) and the
// shape arithmetic of a dynamic batch (Shape, Gather, Unsqueeze, Concat,
// Cast, ConstantOfShape, Equal, Where, Expand).
var vitFixtures = map[string]int{"../nn/testdata/vit_tiny_opset13.onnx": 13, "../nn/testdata/vit_tiny_opset17.onnx": 17}
