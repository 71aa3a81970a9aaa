package modelfile

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil/nets"
	"github.com/relurec/relurec/nn"
)

// maxFuzzSample bounds the declared sample size of the graphs the fuzz
// target evaluates: a hostile declared shape is the memory budget's to
// refuse, not what this target looks for.
const maxFuzzSample = 4096

// FuzzReadONNXGraph feeds arbitrary bytes to the ONNX graph reader and runs
// what it accepts: reading must fail with an error wrapping ErrModelFile
// or give a Graph that evaluates samples without a panic, one output row
// of Out() values per sample.
func FuzzReadONNXGraph(f *testing.F) {
	for _, g := range []*nn.Graph{nets.ResidualGraph(rand.New(rand.NewPCG(1, 2))), reshapeGraph()} {
		var buf bytes.Buffer
		if err := WriteGraphONNX(&buf, g, nil, "F32"); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
		f.Add(buf.Bytes()[:buf.Len()/2])
	}
	for _, p := range []string{"testdata/torch_mlp.onnx", "../nn/testdata/vit_tiny_opset13.onnx", "../nn/testdata/vit_tiny_opset17.onnx"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := readONNXGraph(bytes.NewReader(b))
		if err == nil {
			in, derr := g.dataInput()
			if derr == nil && len(g.inputDims[in]) > 1 {
				size := 1
				for _, d := range g.inputDims[in][1:] {
					if d <= 0 || d > maxFuzzSample/size {
						return
					}
					size *= d
				}
			}
		}
		var gr *nn.Graph
		if err == nil {
			gr, err = graphFromONNX(g)
		}
		if err != nil {
			if !errors.Is(err, ErrModelFile) {
				t.Fatalf("error does not wrap ErrModelFile: %v", err)
			}
			return
		}
		rng := rand.New(rand.NewPCG(3, 4))
		x := mat.NewDense(2, gr.In(), nil)
		for i := range x.RawMatrix().Data {
			x.RawMatrix().Data[i] = rng.NormFloat64()
		}
		if r, c := gr.Forward(x).Dims(); r != 2 || c != gr.Out() {
			t.Fatalf("Forward gave %d×%d, want 2×%d", r, c, gr.Out())
		}
	})
}

// reshapeGraph uses the operators nets.ResidualGraph does not: on samples of
// 2 × 3 values, Reshape to 6, Sub, Mul, Div by constants, Softmax, Flatten,
// Dropout and Identity.
func reshapeGraph() *nn.Graph {
	return &nn.Graph{
		Input: "x", InputShape: []int{2, 3}, Output: "y",
		Consts: map[string]*nn.GraphTensor{
			"shape": {Shape: []int{2}, Data: []float64{0, 6}, Int: true},
			"c":     {Shape: []int{6}, Data: []float64{1, 2, 3, 4, 5, 6}},
			"two":   {Shape: []int{1}, Data: []float64{2}},
		},
		Nodes: []nn.GraphNode{
			{Name: "rs", Op: "Reshape", Inputs: []string{"x", "shape"}, Outputs: []string{"a"}},
			{Name: "sub", Op: "Sub", Inputs: []string{"a", "c"}, Outputs: []string{"b"}},
			{Name: "mul", Op: "Mul", Inputs: []string{"b", "c"}, Outputs: []string{"d"}},
			{Name: "div", Op: "Div", Inputs: []string{"d", "two"}, Outputs: []string{"e"}},
			{Name: "sm", Op: "Softmax", Inputs: []string{"e"}, Outputs: []string{"f"}, Attrs: map[string]nn.GraphAttr{"axis": {Kind: "int", I: -1}}},
			{Name: "fl", Op: "Flatten", Inputs: []string{"f"}, Outputs: []string{"g"}},
			{Name: "do", Op: "Dropout", Inputs: []string{"g"}, Outputs: []string{"h"}},
			{Name: "id", Op: "Identity", Inputs: []string{"h"}, Outputs: []string{"y"}},
		},
	}
}
