package nn

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func randTensor(rng *rand.Rand, shape ...int) *GraphTensor {
	t := &GraphTensor{Shape: shape, Data: make([]float64, numel(shape))}
	for i := range t.Data {
		t.Data[i] = rng.NormFloat64()
	}
	return t
}

// residualGraph is a tiny mixer-like block on samples of 3 tokens × 4
// channels: h = x + ReLU(x·W1 + b1)·W2, the mean over the channels of hᵀ
// (so per token), then Gemm(·, Wh, bh) with transB.
func residualGraph(rng *rand.Rand) *Graph {
	return &Graph{
		Input: "x", InputShape: []int{3, 4}, Output: "y",
		Consts: map[string]*GraphTensor{
			"W1": randTensor(rng, 4, 5), "b1": randTensor(rng, 5), "W2": randTensor(rng, 5, 4),
			"Wh": randTensor(rng, 2, 3), "bh": randTensor(rng, 2),
		},
		Nodes: []GraphNode{
			{Name: "mm1", Op: "MatMul", Inputs: []string{"x", "W1"}, Outputs: []string{"a"}},
			{Name: "add1", Op: "Add", Inputs: []string{"b1", "a"}, Outputs: []string{"b"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"c"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"c", "W2"}, Outputs: []string{"d"}},
			{Name: "res", Op: "Add", Inputs: []string{"x", "d"}, Outputs: []string{"h"}},
			{Name: "tr", Op: "Transpose", Inputs: []string{"h"}, Outputs: []string{"ht"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{0, 2, 1}}}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"ht"}, Outputs: []string{"m"}, Attrs: map[string]GraphAttr{"axes": {Kind: "ints", Ints: []int64{1}}, "keepdims": {Kind: "int", I: 0}}},
			{Name: "head", Op: "Gemm", Inputs: []string{"m", "Wh", "bh"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"transB": {Kind: "int", I: 1}}},
		},
	}
}

// residualDirect computes residualGraph with plain loops.
func residualDirect(g *Graph, x []float64) []float64 {
	c := g.Consts
	h := make([]float64, 12)
	for t := 0; t < 3; t++ {
		for o := 0; o < 4; o++ {
			h[t*4+o] = x[t*4+o]
		}
		for k := 0; k < 5; k++ {
			s := c["b1"].Data[k]
			for i := 0; i < 4; i++ {
				s += x[t*4+i] * c["W1"].Data[i*5+k]
			}
			s = math.Max(s, 0)
			for o := 0; o < 4; o++ {
				h[t*4+o] += s * c["W2"].Data[k*4+o]
			}
		}
	}
	y := make([]float64, 2)
	for j := 0; j < 2; j++ {
		y[j] = c["bh"].Data[j]
		for t := 0; t < 3; t++ {
			m := 0.0
			for o := 0; o < 4; o++ {
				m += h[t*4+o] / 4
			}
			y[j] += m * c["Wh"].Data[j*3+t]
		}
	}
	return y
}

func TestGraphForwardResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := residualGraph(rng)
	x := randDense(rng, 7, 12)
	y := g.Forward(x)
	if r, c := y.Dims(); r != 7 || c != 2 || g.Out() != 2 || g.In() != 12 {
		t.Fatalf("output %d×%d, In %d, Out %d", r, c, g.In(), g.Out())
	}
	for i := 0; i < 7; i++ {
		want := residualDirect(g, x.RawRowView(i))
		for j, w := range want {
			if d := math.Abs(y.At(i, j) - w); d > 1e-12 {
				t.Fatalf("sample %d output %d: %v, direct %v", i, j, y.At(i, j), w)
			}
		}
	}
	if p := g.NumParams(); p != 20+5+20+6+2 {
		t.Errorf("NumParams %d", p)
	}
	if m := g.MultiplyAdds(); m != 3*4*5+3*5*4+3*2 {
		t.Errorf("MultiplyAdds %d", m)
	}
}

// WriteGraphONNX then ReadONNXNetwork gives a *Graph computing the same
// outputs, bit for bit in F64.
func TestGraphONNXRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := residualGraph(rng)
	g.Nodes[len(g.Nodes)-1].Attrs["alpha"] = GraphAttr{Kind: "float", F: 0.5}
	var buf bytes.Buffer
	if err := WriteGraphONNX(&buf, g, map[string]string{"k": "v"}, "F64"); err != nil {
		t.Fatal(err)
	}
	net, err := ReadONNXNetwork(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	back, ok := net.(*Graph)
	if !ok {
		t.Fatalf("read back a %T", net)
	}
	x := randDense(rng, 5, 12)
	if !mat.Equal(g.Forward(x), back.Forward(x)) {
		t.Fatal("outputs differ after the round trip")
	}
	if _, err := ReadONNX(bytes.NewReader(buf.Bytes())); err == nil {
		t.Fatal("the MLP reader took a residual graph")
	}
}

func TestGraphRefusesUnsupported(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := residualGraph(rng)
	g.Nodes[2].Op = "Sigmoid"
	err := g.Validate()
	if err == nil || !strings.Contains(err.Error(), `"relu"`) || !strings.Contains(err.Error(), "Sigmoid") || !errors.Is(err, ErrInput) {
		t.Fatalf("Sigmoid node: %v", err)
	}
	// The ONNX reader names the node too.
	og := &onnxGraph{inits: map[string]*onnxTensor{}, inputs: []string{"x"}, outputs: []string{"y"}, inputDims: map[string][]int{"x": {-1, 3}},
		nodes: []onnxNode{{name: "act", op: "Sigmoid", inputs: []string{"x"}, outs: []string{"y"}}}}
	if _, err := graphFromONNX(og); err == nil || !strings.Contains(err.Error(), `"act"`) || !errors.Is(err, ErrONNX) {
		t.Fatalf("ONNX Sigmoid node: %v", err)
	}
	// An operator that mixes samples is refused.
	g = residualGraph(rng)
	g.Nodes[6].Attrs["axes"] = GraphAttr{Kind: "ints", Ints: []int64{0}}
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `"mean"`) {
		t.Fatalf("ReduceMean over the batch: %v", err)
	}
}

// The files WriteGraphONNX writes pass onnx.checker (full_check, so the
// types of the ViT fixtures' shape arithmetic are inferred and checked),
// in F64 and F32. Skipped without python3 and onnx.
func TestGraphONNXPythonCheck(t *testing.T) {
	py, tried := onnxPython()
	if py == "" {
		t.Skipf("no python3 with the onnx module (tried %s); install python3-onnx or set RELUREC_PYTHON", tried)
	}
	graphs := map[string]*Graph{"residual": residualGraph(rand.New(rand.NewPCG(7, 8)))}
	for path := range vitFixtures {
		g, err := LoadGraphONNX(path)
		if err != nil {
			t.Fatal(err)
		}
		graphs[filepath.Base(path)] = g
	}
	dir := t.TempDir()
	var files []string
	for name, g := range graphs {
		for _, dtype := range []string{"F64", "F32"} {
			p := filepath.Join(dir, name+"."+dtype+".onnx")
			if err := SaveGraphONNX(p, g, nil, dtype); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
	}
	script := "import sys, onnx\nfor p in sys.argv[1:]:\n    onnx.checker.check_model(onnx.load(p), full_check=True)\n"
	if out, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("onnx.checker: %v\n%s", err, out)
	}
}

// Malformed nodes and constants are refused with an error naming them,
// through the ONNX reader as well, never a panic: a Reshape with one input,
// a MatMul by a [4, 0] weight (which gonum cannot hold), a node with too
// many inputs, and constants whose shape is not positive or whose size
// overflows.
func TestGraphRefusesMalformedNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for name, tc := range map[string]struct {
		edit func(g *Graph)
		want string
	}{
		"reshape with one input": {func(g *Graph) {
			g.Nodes[2] = GraphNode{Name: "rs", Op: "Reshape", Inputs: []string{"b"}, Outputs: []string{"c"}}
		}, `"rs"`},
		"matmul with one input":   {func(g *Graph) { g.Nodes[0].Inputs = g.Nodes[0].Inputs[:1] }, `"mm1"`},
		"relu with two inputs":    {func(g *Graph) { g.Nodes[2].Inputs = append(g.Nodes[2].Inputs, "b") }, `"relu"`},
		"add with an empty input": {func(g *Graph) { g.Nodes[1].Inputs[0] = "" }, `"add1"`},
		"zero-size weight": {func(g *Graph) {
			g.Consts["W1"] = &GraphTensor{Shape: []int{4, 0}}
		}, `"W1"`},
		"negative dimensions": {func(g *Graph) {
			g.Consts["W1"] = &GraphTensor{Shape: []int{-1, -1}, Data: []float64{1}}
		}, `"W1"`},
		"overflowing size": {func(g *Graph) {
			g.Consts["W1"] = &GraphTensor{Shape: []int{1 << 32, 1 << 32}}
		}, `"W1"`},
	} {
		g := residualGraph(rng)
		tc.edit(g)
		err := g.Validate()
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an ErrInput naming %s", name, err, tc.want)
		}
		g.Ranks() // must not index a missing input
		var buf bytes.Buffer
		if err := WriteGraphONNX(&buf, g, nil, "F64"); err != nil {
			continue // the writer may refuse it first
		}
		if _, err := ReadGraphONNX(&buf); err == nil || !errors.Is(err, ErrModelFile) {
			t.Errorf("%s: ReadGraphONNX = %v, want a refusal", name, err)
		}
	}
}
