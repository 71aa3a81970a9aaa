package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// refusedOverBudget checks that a command exited 2 naming a size, the
// budget and the flags that set them, and wrote none of outs.
func refusedOverBudget(t *testing.T, what string, code int, stderr string, flags []string, outs ...string) {
	t.Helper()
	if code != exitBadInput || !strings.Contains(stderr, "needed but the memory budget is") {
		t.Errorf("%s: exit %d, stderr %q; want 2 naming the size and the budget", what, code, stderr)
	}
	for _, f := range flags {
		if !strings.Contains(stderr, f) {
			t.Errorf("%s: stderr %q does not name %s", what, stderr, f)
		}
	}
	for _, p := range outs {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %s was written", what, p)
		}
	}
}

// An ONNX graph whose activations would not fit --max-memory (here 5 MB a
// sample, from two broadcasting Adds of 200-value constants on a 16-value
// input) exits 2 from eval and compress before they are allocated.
func TestGraphOverMaxMemory(t *testing.T) {
	dir := t.TempDir()
	tensor := func(shape ...int) *nn.GraphTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return &nn.GraphTensor{Shape: shape, Data: make([]float64, n)}
	}
	g := &nn.Graph{
		Input: "x", InputShape: []int{1, 1, 16}, Output: "y",
		Consts: map[string]*nn.GraphTensor{"c1": tensor(200, 1), "c2": tensor(200, 1, 1)},
		Nodes: []nn.GraphNode{
			{Name: "wide", Op: "Add", Inputs: []string{"x", "c1"}, Outputs: []string{"h1"}},
			{Name: "wider", Op: "Add", Inputs: []string{"h1", "c2"}, Outputs: []string{"h2"}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"h2"}, Outputs: []string{"y"}, Attrs: map[string]nn.GraphAttr{"axes": {Kind: "ints", Ints: []int64{1, 2}}, "keepdims": {Kind: "int", I: 0}}},
		},
	}
	model := filepath.Join(dir, "wide.onnx")
	if err := nn.SaveGraphONNX(model, g, nil, ""); err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(dir, "x.npy")
	if err := dataio.WriteNPY(x, mat.NewDense(4, 16, nil)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "--max-memory", "2MB", "eval", "--model", model, "--x", x, "--y", x)
	refusedOverBudget(t, "eval", code, stderr, []string{"--model", "--max-memory", "2.00 MB"})
	out := filepath.Join(dir, "small.onnx")
	code, _, stderr = cli(t, "--max-memory", "2MB", "compress", "--model", model, "--calib", x, "--keep", "0.5", "--out", out)
	refusedOverBudget(t, "compress", code, stderr, []string{"--model", "--max-memory"}, out)
	if code, _, stderr := cli(t, "eval", "--model", model, "--x", x, "--y", x); code == exitBadInput && strings.Contains(stderr, "memory budget") {
		t.Fatalf("default budget: %s", stderr)
	}
}
