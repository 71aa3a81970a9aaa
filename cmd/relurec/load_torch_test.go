package main

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
)

// loadRelurecScript is the one line README and docs/compress.md give
// (load_relurec from examples/load_compressed.py), run on each argument
// model=X.npy with the float64 outputs on X written next to the model; exit
// status 77 without torch or numpy. One interpreter for all models: importing
// torch is most of the time.
const loadRelurecScript = `
import sys
try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)
sys.path.insert(0, sys.argv[1])
from load_compressed import load_relurec
for arg in sys.argv[2:]:
    path, x = arg.split("=")
    model = load_relurec(path)
    with torch.no_grad():
        y = model(torch.from_numpy(np.load(x)).to(next(model.parameters()).dtype))
    np.save(path + ".y.npy", y.double().numpy())
`

// Every model file compress writes as safetensors — a compressed MLP
// (factor layers without bias, the last refit; float64 and float32) and a
// compressed CNN — loads in PyTorch with examples/load_compressed.py's
// load_relurec in one line and computes relurec's outputs (to 1e-12 in
// float64, 1e-5 in float32). Skipped without a python3 that imports torch
// (Debian: python3-torch; scripts/install-bench.sh).
func TestLoadCompressedInTorch(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("no python3 (Debian: python3-torch, python3-numpy; scripts/install-bench.sh installs them)")
		}
	}
	dir := t.TempDir()
	mlp, calib := smallMLP(t, dir)
	cnn := filepath.Join(dir, "cnn.safetensors")
	if err := modelfile.SaveCNNModel(cnn, smallCNN(7), nil, ""); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	img := mat.NewDense(60, 784, nil)
	img.Apply(func(_, _ int, _ float64) float64 { return rng.Float64() }, img)
	imgs := writeNPY(t, dir, "img.npy", img)
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		model, calib, dtype string
		tol                 float64
	}{{mlp, calib, "f64", 1e-12}, {mlp, calib, "f32", 1e-5}, {cnn, imgs, "f64", 1e-12}}
	args := []string{"-c", loadRelurecScript, examples}
	for i, c := range cases {
		out := filepath.Join(dir, "small"+string(rune('a'+i))+".safetensors")
		if code, _, stderr := cli(t, "compress", "--model", c.model, "--calib", c.calib, "--keep", "0.3", "--dtype", c.dtype, "--out", out); code != 0 {
			t.Fatalf("compress %s: exit %d: %s", c.model, code, stderr)
		}
		args = append(args, out+"="+c.calib)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 77 {
		t.Skipf("%s cannot import torch and numpy (Debian: python3-torch, python3-numpy; scripts/install-bench.sh installs them)", py)
	}
	if err != nil {
		t.Fatalf("load_relurec: %v\n%s", err, out)
	}
	for i, c := range cases {
		f := strings.SplitN(args[3+i], "=", 2)[0]
		x, err := dataio.ReadMatrix(c.calib, "")
		if err != nil {
			t.Fatal(err)
		}
		net, _, err := loadAnyNetwork(f)
		if err != nil {
			t.Fatal(err)
		}
		y, err := dataio.ReadMatrix(f+".y.npy", "")
		if err != nil {
			t.Fatal(err)
		}
		want := net.Forward(x)
		var diff mat.Dense
		diff.Sub(y, want)
		if d := mat.Norm(&diff, math.Inf(1)) / mat.Norm(want, math.Inf(1)); !(d <= c.tol) {
			t.Errorf("%s (%s): PyTorch's outputs differ from relurec's by %.3g (relative), tolerance %g", filepath.Base(c.model), c.dtype, d, c.tol)
		}
	}
}
