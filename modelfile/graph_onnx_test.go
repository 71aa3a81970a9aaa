package modelfile

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/memtest"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/testutil/nets"
	"github.com/relurec/relurec/nn"
)

// WriteGraphONNX then ReadONNXNetwork gives a *Graph computing the same
// outputs, bit for bit in F64.
func TestGraphONNXRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := nets.ResidualGraph(rng)
	g.Nodes[len(g.Nodes)-1].Attrs["alpha"] = nn.GraphAttr{Kind: "float", F: 0.5}
	var buf bytes.Buffer
	if err := WriteGraphONNX(&buf, g, map[string]string{"k": "v"}, "F64"); err != nil {
		t.Fatal(err)
	}
	net, err := ReadONNXNetwork(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	back, ok := net.(*nn.Graph)
	if !ok {
		t.Fatalf("read back a %T", net)
	}
	x := testutil.RandDense(rng, 5, 12)
	if !mat.Equal(g.Forward(x), back.Forward(x)) {
		t.Fatal("outputs differ after the round trip")
	}
	if _, err := ReadONNX(bytes.NewReader(buf.Bytes())); err == nil {
		t.Fatal("the MLP reader took a residual graph")
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
	graphs := map[string]*nn.Graph{"residual": nets.ResidualGraph(rand.New(rand.NewPCG(7, 8)))}
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
		edit func(g *nn.Graph)
		want string
	}{
		"reshape with one input": {func(g *nn.Graph) {
			g.Nodes[2] = nn.GraphNode{Name: "rs", Op: "Reshape", Inputs: []string{"b"}, Outputs: []string{"c"}}
		}, `"rs"`},
		"matmul with one input":   {func(g *nn.Graph) { g.Nodes[0].Inputs = g.Nodes[0].Inputs[:1] }, `"mm1"`},
		"relu with two inputs":    {func(g *nn.Graph) { g.Nodes[2].Inputs = append(g.Nodes[2].Inputs, "b") }, `"relu"`},
		"add with an empty input": {func(g *nn.Graph) { g.Nodes[1].Inputs[0] = "" }, `"add1"`},
		"zero-size weight": {func(g *nn.Graph) {
			g.Consts["W1"] = &nn.GraphTensor{Shape: []int{4, 0}}
		}, `"W1"`},
		"negative dimensions": {func(g *nn.Graph) {
			g.Consts["W1"] = &nn.GraphTensor{Shape: []int{-1, -1}, Data: []float64{1}}
		}, `"W1"`},
		"overflowing size": {func(g *nn.Graph) {
			g.Consts["W1"] = &nn.GraphTensor{Shape: []int{1 << 32, 1 << 32}}
		}, `"W1"`},
	} {
		g := nets.ResidualGraph(rng)
		tc.edit(g)
		err := g.Validate()
		if err == nil || !errors.Is(err, nn.ErrInput) || !strings.Contains(err.Error(), tc.want) {
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

// The graph evaluator gives PyTorch's float64 outputs of the exported ViT
// to 1e-5 (the weights are float32 in the file and in PyTorch alike; the
// float32 constants of the export, 1/√d and LayerNorm's ε, make the rest
// of the difference), reads each file's opset, and finds the samples of
// each linear layer's input on axis 0.
func TestGraphTorchViT(t *testing.T) {
	x, err := dataio.ReadMatrix("../nn/testdata/vit_tiny_x.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := dataio.ReadMatrix("../nn/testdata/vit_tiny_y.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	for path, opset := range vitFixtures {
		g, err := LoadGraphONNX(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if g.Opset != opset {
			t.Errorf("%s: opset %d, want %d", path, g.Opset, opset)
		}
		got := g.Forward(x)
		d := testutil.DiffNormInf(got, want)
		t.Logf("%s: max |relurec − PyTorch| %.1e", path, d)
		if d > 1e-5 {
			t.Errorf("%s: outputs differ from PyTorch's by %.2e", path, d)
		}
		for i, n := range g.Nodes {
			if _, isW := g.Consts[n.Inputs[len(n.Inputs)-1]]; n.Op == "MatMul" && isW && g.SampleAxis(i) != 0 {
				t.Errorf("%s: node %q: sample axis %d, want 0", path, n.Name, g.SampleAxis(i))
			}
		}
		// Written back (F64) it computes the same, in the same opset.
		var buf bytes.Buffer
		if err := WriteGraphONNX(&buf, g, nil, "F64"); err != nil {
			t.Fatal(err)
		}
		back, err := ReadGraphONNX(&buf)
		if err != nil {
			t.Fatalf("%s written back: %v", path, err)
		}
		if back.Opset != opset || !mat.Equal(back.Forward(x), got) {
			t.Errorf("%s: the graph written back (opset %d) computes other outputs", path, back.Opset)
		}
	}
}

// The ONNX reader refuses an unsupported operator naming the node.
func TestGraphONNXRefusesUnsupported(t *testing.T) {
	og := &onnxGraph{inits: map[string]*onnxTensor{}, inputs: []string{"x"}, outputs: []string{"y"}, inputDims: map[string][]int{"x": {-1, 3}},
		nodes: []onnxNode{{name: "act", op: "Sigmoid", inputs: []string{"x"}, outs: []string{"y"}}}}
	if _, err := graphFromONNX(og); err == nil || !strings.Contains(err.Error(), `"act"`) || !errors.Is(err, ErrONNX) {
		t.Fatalf("ONNX Sigmoid node: %v", err)
	}
}

// An ONNX graph whose declared input shape would not fit the memory
// budget is refused with an error naming the size, having allocated no
// more than the budget (a residual block declared [N, 100000, 100000, 64]
// would need 5.12 TB).
func TestGraphONNXOverBudgetRefused(t *testing.T) {
	dataio.SetMemoryBudget(16 << 20)
	defer dataio.SetMemoryBudget(0)
	// y = x + ReLU(x·W) on samples of the declared shape [..., 64].
	declared := func(dims ...int) func() error {
		return func() error {
			_, err := graphFromONNX(&onnxGraph{
				inits:  map[string]*onnxTensor{"W": {name: "W", dims: []int{64, 64}, data: make([]float64, 64*64), dtype: onnxDouble}},
				inputs: []string{"x"}, outputs: []string{"y"}, inputDims: map[string][]int{"x": append([]int{-1}, dims...)},
				nodes: []onnxNode{
					{name: "mm", op: "MatMul", inputs: []string{"x", "W"}, outs: []string{"a"}},
					{name: "relu", op: "Relu", inputs: []string{"a"}, outs: []string{"r"}},
					{name: "res", op: "Add", inputs: []string{"x", "r"}, outs: []string{"y"}},
				},
			})
			return err
		}
	}
	for name, check := range map[string]func() error{
		"declared [N 100000 100000 64]": declared(100000, 100000, 64),
		"declared [N 1000 1000 64]":     declared(1000, 1000, 64),
		"declared [N 100 100 64]":       declared(100, 100, 64), // 5 MB a sample, 20 MB with the activations
	} {
		var err error
		n := memtest.Allocated(func() { err = check() })
		if !errors.Is(err, dataio.ErrTooLarge) || !strings.Contains(err.Error(), "needed but the memory budget is 16.8 MB") {
			t.Errorf("%s: got %v, want ErrTooLarge naming the size and the budget", name, err)
		}
		if n > 16<<20 {
			t.Errorf("%s: allocated %s before refusing, more than the budget", name, dataio.FormatBytes(float64(n)))
		}
	}
}
