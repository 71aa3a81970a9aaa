package nn

import (
	"bytes"
	"math"
	"os/exec"
	"path/filepath"
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

// The graph evaluator gives PyTorch's float64 outputs of the exported ViT
// to 1e-5 (the weights are float32 in the file and in PyTorch alike; the
// float32 constants of the export, 1/√d and LayerNorm's ε, make the rest
// of the difference), reads each file's opset, and finds the samples of
// each linear layer's input on axis 0.
func TestGraphTorchViT(t *testing.T) {
	x, err := dataio.ReadMatrix("testdata/vit_tiny_x.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := dataio.ReadMatrix("testdata/vit_tiny_y.npy", "")
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
		d := maxEntryDiff(got, want)
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

// maxEntryDiff is the largest |a_ij − b_ij|.
func maxEntryDiff(a, b *mat.Dense) float64 {
	r, c := a.Dims()
	m := 0.0
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			m = math.Max(m, math.Abs(a.At(i, j)-b.At(i, j)))
		}
	}
	return m
}

// The ViT graphs WriteGraphONNX writes, in F32 and F64, pass onnx.checker
// (full_check, so the types of the shape arithmetic are inferred and
// checked). Skipped without python3 and onnx.
func TestGraphViTONNXPythonCheck(t *testing.T) {
	py, tried := onnxPython()
	if py == "" {
		t.Skipf("no python3 with the onnx module (tried %s); install python3-onnx or set RELUREC_PYTHON", tried)
	}
	dir := t.TempDir()
	var files []string
	for path := range vitFixtures {
		g, err := LoadGraphONNX(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dtype := range []string{"F64", "F32"} {
			p := filepath.Join(dir, filepath.Base(path)+"."+dtype+".onnx")
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
