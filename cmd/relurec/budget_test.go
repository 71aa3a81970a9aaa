package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
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
	if err := modelfile.SaveGraphONNX(model, g, nil, ""); err != nil {
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

// Every size a gen flag asks for is checked against --max-memory before
// anything is drawn: sat6's X of --vars 3000 --clauses 10 is 6025 × 3002
// (145 MB; it was written under a 50 MB budget), and --vars 100000
// --clauses 100000 asks for 320 GB (it died out of memory).
func TestGenOverMaxMemory(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"--max-memory", "50MB", "gen", "twolayer", "--instance", "sat6", "--vars", "3000", "--clauses", "10"}, []string{"X (6025 × 3002)", "--vars", "--clauses", "--max-memory", "50.0 MB"}},
		{[]string{"gen", "twolayer", "--instance", "sat6", "--vars", "100000", "--clauses", "100000"}, []string{"X (400005 × 100002)", "--vars"}},
		{[]string{"--max-memory", "1MB", "gen", "twolayer", "--instance", "lemma16", "--n", "100000"}, []string{"X (100000 × 2)", "--n"}},
		{[]string{"--max-memory", "100MB", "gen", "twolayer", "--d", "4000", "--k", "2", "--m", "1", "--n", "10", "--cond-v", "2"}, []string{"--cond-v", "--d"}},
		{[]string{"--max-memory", "100MB", "gen", "twolayer", "--d", "4000", "--k", "2", "--m", "1", "--n", "10", "--cov-cond", "2"}, []string{"--cov-cond"}},
		{[]string{"--max-memory", "1MB", "gen", "depth2", "--n", "100000"}, []string{"--n", "--outputs"}},
		{[]string{"--max-memory", "1MB", "gen", "generative", "--d", "20", "--k", "5", "--n", "10000"}, []string{"Y (10000 × 20)", "--n"}},
		{[]string{"--max-memory", "1MB", "gen", "robust", "--d", "20", "--k", "5", "--s", "2", "--n", "10000"}, []string{"V (10000 × 20)", "--n"}},
	} {
		out := filepath.Join(dir, fmt.Sprintf("data%d.npz", i))
		code, _, stderr := cli(t, append(tc.args, "--out", out)...)
		refusedOverBudget(t, strings.Join(tc.args, " "), code, stderr, tc.flags, out, dataio.ManifestPath(out))
	}
	out := filepath.Join(dir, "small.npz")
	// The sat6 check counts the instance's own shape, not the defaults of
	// --n, --d, --k and --m (100000 × 33 float64, 26 MB).
	if code, _, stderr := cli(t, "--max-memory", "1MB", "gen", "twolayer", "--instance", "sat6", "--vars", "8", "--clauses", "6", "--out", out); code != 0 {
		t.Fatalf("small sat6 instance under 1 MB: exit %d: %s", code, stderr)
	}
}

// The class count and the hidden widths size the network train mlp builds;
// --classes 1000001 took 18.1 GB, and --classes 100000 1.8 GB under a 100
// MB budget. Both exit 2 before the network is allocated.
func TestTrainOverMaxMemory(t *testing.T) {
	dir := t.TempDir()
	x := mat.NewDense(20, 4, nil)
	y := mat.NewDense(20, 1, nil)
	for i := 0; i < 20; i++ {
		x.Set(i, i%4, 1)
		y.Set(i, 0, float64(i%3))
	}
	data := filepath.Join(dir, "d.npz")
	if err := dataio.WriteNPZ(data, map[string]*mat.Dense{"X": x, "y": y}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.safetensors")
	for _, args := range [][]string{
		{"--max-memory", "100MB", "train", "mlp", "--classes", "100000"},
		{"--max-memory", "500MB", "train", "mlp", "--classes", "1000001", "--hidden", "16"},
		{"--max-memory", "100MB", "train", "mlp", "--hidden", "100000,1000"},
	} {
		code, _, stderr := cli(t, append(args, "--data", data, "--epochs", "1", "--out", out)...)
		refusedOverBudget(t, strings.Join(args, " "), code, stderr, []string{"--classes", "--hidden", "--max-memory"}, out)
	}
	if code, _, stderr := cli(t, "--max-memory", "10MB", "train", "mlp", "--data", data, "--hidden", "8", "--epochs", "1", "--out", out); code != 0 {
		t.Fatalf("a small network under 10 MB: exit %d: %s", code, stderr)
	}
}
