package main

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// compress takes a CNN and writes the factored network as ONNX or
// safetensors that read back as a CNN with the reported ranks and
// parameters; --holdout is refused for a CNN.
func TestCompressCNNCommand(t *testing.T) {
	dir := t.TempDir()
	net := smallCNN(7)
	model := filepath.Join(dir, "cnn.onnx")
	if err := modelfile.SaveCNNONNX(model, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	x := mat.NewDense(80, 784, nil)
	for i := 0; i < 80; i++ {
		for j := 0; j < 784; j++ {
			x.Set(i, j, rng.Float64())
		}
	}
	calib := filepath.Join(dir, "calib.npz")
	if err := dataio.WriteNPZ(calib, map[string]*mat.Dense{"X": x}); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".onnx", ".safetensors"} {
		out := filepath.Join(dir, "small"+ext)
		code, stdout, stderr := cli(t, "compress", "--model", model, "--calib", calib, "--keep", "0.3", "--sequential", "--out", out, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ext, code, stderr)
		}
		v := decodeOne(t, stdout)
		params, budget := int(v["params"].(float64)), int(v["budget"].(float64))
		if budget != int(0.3*float64(net.NumParams())) || params > budget || len(v["modules"].([]any)) != 2 {
			t.Fatalf("%s: params %d, budget %d, modules %v", ext, params, budget, v["modules"])
		}
		got, _, err := loadAnyNetwork(out)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := got.(*nn.CNN)
		if !ok || c.NumParams() != params {
			t.Fatalf("%s: read back %T with %d parameters, want a CNN with %d", ext, got, got.NumParams(), params)
		}
		ranks := c.Ranks()
		if len(ranks) != 2 || ranks[1] == 0 {
			t.Fatalf("%s: ranks %v, want the Linear factored", ext, ranks)
		}
	}
	if code, _, stderr := cli(t, "compress", "--model", model, "--calib", calib, "--holdout", calib, "--out", filepath.Join(dir, "h.onnx")); code != 2 {
		t.Fatalf("--holdout with a CNN: exit %d: %s", code, stderr)
	}
}
