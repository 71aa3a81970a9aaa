package main

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// tinyMixer is a one-block residual mixer on 784-pixel images as 28 rows
// × 28 pixels: h = x + ReLU(x·W1 + b1)·W2, the mean over rows, a Gemm to
// 10 classes.
func tinyMixer(seed uint64) *nn.Graph {
	rng := rand.New(rand.NewPCG(seed, 1))
	rt := func(shape ...int) *nn.GraphTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := &nn.GraphTensor{Shape: shape, Data: make([]float64, n)}
		for i := range t.Data {
			t.Data[i] = rng.NormFloat64() * 0.3
		}
		return t
	}
	return &nn.Graph{
		Input: "input", InputShape: []int{28, 28}, Output: "output",
		Consts: map[string]*nn.GraphTensor{"W1": rt(28, 32), "b1": rt(32), "W2": rt(32, 28), "Wh": rt(10, 28), "bh": rt(10)},
		Nodes: []nn.GraphNode{
			{Name: "mm1", Op: "MatMul", Inputs: []string{"input", "W1"}, Outputs: []string{"a"}},
			{Name: "add1", Op: "Add", Inputs: []string{"b1", "a"}, Outputs: []string{"b"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"c"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"c", "W2"}, Outputs: []string{"d"}},
			{Name: "res", Op: "Add", Inputs: []string{"input", "d"}, Outputs: []string{"h"}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"h"}, Outputs: []string{"m"}, Attrs: map[string]nn.GraphAttr{"axes": {Kind: "ints", Ints: []int64{1}}, "keepdims": {Kind: "int", I: 0}}},
			{Name: "head", Op: "Gemm", Inputs: []string{"m", "Wh", "bh"}, Outputs: []string{"output"}, Attrs: map[string]nn.GraphAttr{"transB": {Kind: "int", I: 1}}},
		},
	}
}

// mixerFiles writes tinyMixer(seed) to dir as ONNX and n random images
// with its outputs as an .npz (X, Y), and returns the graph and both
// paths.
func mixerFiles(t *testing.T, dir string, seed uint64, n int) (g *nn.Graph, model, data string) {
	g = tinyMixer(seed)
	model = filepath.Join(dir, "mixer.onnx")
	if err := modelfile.SaveGraphONNX(model, g, nil, ""); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	x := mat.NewDense(n, 784, nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = rng.Float64()
	}
	data = filepath.Join(dir, "calib.npz")
	if err := dataio.WriteNPZ(data, map[string]*mat.Dense{"X": x, "Y": g.Forward(x)}); err != nil {
		t.Fatal(err)
	}
	return g, model, data
}

// compress takes an ONNX graph with a residual block and writes a graph
// that reads back with the reported parameters; eval scores it; a
// .safetensors output is refused.
func TestCompressGraphCommand(t *testing.T) {
	dir := t.TempDir()
	g, model, data := mixerFiles(t, dir, 3, 60)
	out := filepath.Join(dir, "small.onnx")
	code, stdout, stderr := cli(t, "compress", "--model", model, "--calib", data, "--keep", "0.5", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	// A graph's default recipe reaches keep 0.5 (compress.GraphAutoMaxKeep).
	if d, ok := v["distill"].(map[string]any); !ok || d["epochs"].(float64) != compress.GraphDistillEpochs || !strings.Contains(v["selection"].(string), "sensitivity") {
		t.Fatalf("default at keep 0.5: selection %v, distillation %v", v["selection"], v["distill"])
	}
	params, budget := int(v["params"].(float64)), int(v["budget"].(float64))
	if budget != int(0.5*float64(g.NumParams())) || params > budget || len(v["modules"].([]any)) != 3 {
		t.Fatalf("params %d, budget %d, modules %v", params, budget, v["modules"])
	}
	got, _, err := loadAnyNetwork(out)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := got.(*nn.Graph); !ok || c.NumParams() != params {
		t.Fatalf("read back %T with %d parameters, want a graph with %d", got, got.NumParams(), params)
	}
	// eval of the dense graph against its own outputs: exact.
	code, stdout, stderr = cli(t, "eval", "--model", model, "--truth", data, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if e := decodeOne(t, stdout)["truth_outputs"].(map[string]any)["max_abs_error"].(float64); e > 1e-12 {
		t.Fatalf("eval --truth: max abs error %g", e)
	}
	if code, _, stderr := cli(t, "compress", "--model", model, "--calib", data, "--out", filepath.Join(dir, "s.safetensors")); code != 2 {
		t.Fatalf(".safetensors out for a graph: exit %d: %s", code, stderr)
	}
}

// compress --distill on a graph reports the distillation (JSON and table)
// and writes a model of the same parameter count that eval loads and
// scores against the original's outputs.
func TestCompressGraphDistillCommand(t *testing.T) {
	dir := t.TempDir()
	_, model, data := mixerFiles(t, dir, 4, 80)
	out := filepath.Join(dir, "small.onnx")
	code, stdout, stderr := cli(t, "compress", "--model", model, "--calib", data, "--keep", "0.3", "--distill", "2", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	d, ok := v["distill"].(map[string]any)
	if !ok || d["epochs"].(float64) != 2 || d["objective"] != "logits" {
		t.Fatalf("--distill on a graph: report %v", v["distill"])
	}
	got, _, err := loadAnyNetwork(out)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := got.(*nn.Graph); !ok || c.NumParams() != int(v["params"].(float64)) {
		t.Fatalf("read back %T with %d parameters, want a graph with %v", got, got.NumParams(), v["params"])
	}
	code, stdout, stderr = cli(t, "eval", "--model", out, "--truth", data, "--json")
	if code != 0 {
		t.Fatalf("eval of the distilled graph: exit %d: %s", code, stderr)
	}
	if _, ok := decodeOne(t, stdout)["truth_outputs"].(map[string]any)["max_abs_error"].(float64); !ok {
		t.Fatalf("eval --truth of the distilled graph: %s", stdout)
	}
	code, stdout, stderr = cli(t, "compress", "--model", model, "--calib", data, "--keep", "0.3", "--distill", "2", "--out", out)
	if code != 0 || !strings.Contains(stdout, "distillation   2 epochs") || !strings.Contains(stderr+stdout, "2 epochs of distillation") {
		t.Fatalf("--distill table: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
}
