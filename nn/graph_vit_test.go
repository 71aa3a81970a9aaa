package nn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// vitFixtures are the tiny ViT that bench/vit_fashion.py --fixture exports
// with torch.onnx.export in two opsets: 17 with LayerNormalization, 13
// with its decomposition (ReduceMean, Sub, Pow, Sqrt, Div); both with
// attention (MatMul of two computed values, Softmax), GELU (Erf) and the
// shape arithmetic of a dynamic batch (Shape, Gather, Unsqueeze, Concat,
// Cast, ConstantOfShape, Equal, Where, Expand).
var vitFixtures = map[string]int{"testdata/vit_tiny_opset13.onnx": 13, "testdata/vit_tiny_opset17.onnx": 17}

// InputRows gives a node's rows sample by sample when its input holds the
// samples on a later axis: after a Transpose to [tokens, N, width] the
// first three rows are the first sample's three tokens.
func TestGraphInputRowsSampleAxis(t *testing.T) {
	g := &Graph{
		Input: "x", InputShape: []int{3, 2}, Output: "y",
		Consts: map[string]*GraphTensor{"W": {Shape: []int{2, 2}, Data: []float64{1, 0, 0, 1}}},
		Nodes: []GraphNode{
			{Name: "t", Op: "Transpose", Inputs: []string{"x"}, Outputs: []string{"xt"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
			{Name: "mm", Op: "MatMul", Inputs: []string{"xt", "W"}, Outputs: []string{"a"}},
			{Name: "tb", Op: "Transpose", Inputs: []string{"a"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
		},
	}
	x := mat.NewDense(2, 6, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	if g.SampleAxis(1) != 1 {
		t.Fatalf("sample axis %d, want 1", g.SampleAxis(1))
	}
	rows, err := g.InputRows(x, []int{1}, func(int, int) []int { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := mat.NewDense(6, 2, x.RawMatrix().Data); !mat.Equal(rows[0], want) {
		t.Fatalf("rows\n%v\nwant\n%v", mat.Formatted(rows[0]), mat.Formatted(want))
	}
}

// A node that mixes the samples is refused by name: a Softmax over the
// batch axis gives each sample values that change when another joins it.
func TestGraphRefusesMixingSamples(t *testing.T) {
	g := &Graph{
		Input: "x", InputShape: []int{3}, Output: "y", Consts: map[string]*GraphTensor{},
		Nodes: []GraphNode{{Name: "sm", Op: "Softmax", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"axis": {Kind: "int", I: 0}}}},
	}
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `"sm"`) || !errors.Is(err, ErrInput) {
		t.Fatalf("Softmax over the batch: %v", err)
	}
}

// The layout operators torch.onnx.export writes beside the ViT's: Split
// into two parts, a Slice with a negative step and an open end (INT64_MAX),
// Squeeze and Unsqueeze, Concat, Tanh, and Where on an Equal; one sample
// of [2, 3] values 0…5.
func TestGraphLayoutOps(t *testing.T) {
	ints := func(v ...float64) *GraphTensor { return &GraphTensor{Shape: []int{len(v)}, Data: v, Int: true} }
	g := &Graph{
		Input: "x", InputShape: []int{2, 3}, Output: "y",
		Consts: map[string]*GraphTensor{
			"split": ints(1, 2), "st": ints(-1), "en": ints(-9.223372036854775807e18), "ax": ints(2), "step": ints(-1),
			"ax1": ints(1), "two": {Shape: []int{}, Data: []float64{2}},
		},
		Nodes: []GraphNode{
			{Name: "split", Op: "Split", Inputs: []string{"x", "split"}, Outputs: []string{"a", "b"}, Attrs: map[string]GraphAttr{"axis": {Kind: "int", I: 2}}},
			{Name: "rev", Op: "Slice", Inputs: []string{"b", "st", "en", "ax", "step"}, Outputs: []string{"br"}},                                         // [N, 2, 2] reversed columns
			{Name: "sq", Op: "Unsqueeze", Inputs: []string{"a", "ax1"}, Outputs: []string{"a4"}},                                                         // [N, 1, 2, 1]
			{Name: "usq", Op: "Squeeze", Inputs: []string{"a4", "ax1"}, Outputs: []string{"a3"}},                                                         // [N, 2, 1]
			{Name: "cat", Op: "Concat", Inputs: []string{"br", "a3"}, Outputs: []string{"c"}, Attrs: map[string]GraphAttr{"axis": {Kind: "int", I: -1}}}, // [N, 2, 3]
			{Name: "eq", Op: "Equal", Inputs: []string{"c", "two"}, Outputs: []string{"is2"}},
			{Name: "th", Op: "Tanh", Inputs: []string{"c"}, Outputs: []string{"tc"}},
			{Name: "wh", Op: "Where", Inputs: []string{"is2", "two", "tc"}, Outputs: []string{"y"}},
		},
	}
	x := mat.NewDense(1, 6, []float64{0, 1, 2, 3, 4, 5})
	got := g.Forward(x).RawRowView(0)
	want := []float64{2, math.Tanh(1), 0, math.Tanh(5), math.Tanh(4), math.Tanh(3)}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// ForwardFrom resumes a run from a node: the tiny ViT with its last
// weight's node replaced by an equal one, run from there on the values of
// the original run, gives the original outputs.
func TestGraphForwardFrom(t *testing.T) {
	g, err := LoadGraphONNX("testdata/vit_tiny_opset17.onnx")
	if err != nil {
		t.Fatal(err)
	}
	x, err := dataio.ReadMatrix("testdata/vit_tiny_x.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := g.Values(x)
	if err != nil {
		t.Fatal(err)
	}
	last := len(g.Nodes) - 1
	h := *g
	h.Nodes = append([]GraphNode(nil), g.Nodes...)
	h.Nodes[last].Name = "head copy"
	got, err := h.ForwardFrom(vals, last)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(got, g.Forward(x)) {
		t.Fatal("ForwardFrom differs from Forward")
	}
}

// Integer Div truncates, as the shape arithmetic of an export needs (a
// width over the heads), in the repeated fast path and the general one.
func TestGraphIntegerDiv(t *testing.T) {
	seven := value{shape: []int{2}, data: []float64{7, -7}, isInt: true}
	for _, two := range []value{{shape: []int{1}, data: []float64{2}, isInt: true}, {shape: []int{2, 1}, data: []float64{2, 2}, isInt: true}} {
		y, err := broadcast("Div", seven, two)
		if err != nil || y.data[0] != 3 || y.data[1] != -3 || !y.isInt {
			t.Fatalf("7, -7 div %v = %+v, %v; want 3, -3", two.shape, y, err)
		}
	}
}
