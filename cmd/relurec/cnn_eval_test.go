package main

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// smallCNN is a random 1×28×28 → Conv(1,4,3×3,pad 1) → ReLU → MaxPool 2 →
// Flatten → Linear(784, 10) network.
func smallCNN(seed uint64) *nn.CNN {
	rng := rand.New(rand.NewPCG(seed, 1))
	dense := func(r, c int, scale float64) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				m.Set(i, j, scale*rng.NormFloat64())
			}
		}
		return m
	}
	return &nn.CNN{Input: nn.FeatureShape{C: 1, H: 28, W: 28}, Layers: []nn.CNNLayer{
		&nn.Conv2d{Weight: dense(4, 9, 0.3), Bias: []float64{0.1, -0.1, 0, 0.2}, Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}},
		&nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}}, &nn.Flatten{},
		&nn.Linear{Weight: dense(10, 784, 0.05)},
	}}
}

// eval takes a CNN (ONNX or safetensors) on labelled data, on a --truth
// .npz and on --data fashion-mnist (a small stand-in of the data set's
// files); the commands that need an MLP refuse it, saying so.
func TestEvalCNN(t *testing.T) {
	dir := t.TempDir()
	net := smallCNN(3)
	onnxPath, stPath := filepath.Join(dir, "cnn.onnx"), filepath.Join(dir, "cnn.safetensors")
	if err := modelfile.SaveCNNONNX(onnxPath, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := modelfile.SaveCNNModel(stPath, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 5))
	n := 60
	x := mat.NewDense(n, 784, nil)
	labels := mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < 784; j++ {
			x.Set(i, j, rng.Float64())
		}
		labels.Set(i, 0, float64(i%10))
	}
	data := filepath.Join(dir, "test.npz")
	if err := dataio.WriteNPZ(data, map[string]*mat.Dense{"X": x, "y": labels}); err != nil {
		t.Fatal(err)
	}
	ls := make([]int, n)
	for i := range ls {
		ls[i] = i % 10
	}
	want, err := net.Evaluate(x, ls)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{onnxPath, stPath} {
		code, stdout, stderr := cli(t, "eval", "--model", model, "--data", data, "--json")
		if code != 0 {
			t.Fatalf("eval %s: exit %d: %s", model, code, stderr)
		}
		v := decodeOne(t, stdout)
		test := v["test"].(map[string]any)
		if test["correct"].(float64) != float64(want.Correct) || test["loss"].(float64) != want.Loss ||
			v["parameters"].(float64) != float64(net.NumParams()) || v["multiply_adds"].(float64) != float64(net.MultiplyAdds()) ||
			!strings.Contains(v["layers"].(string), "Conv2d(1, 4, 3×3") {
			t.Fatalf("eval %s: %v, want %+v", model, v, want)
		}
	}
	// Truth as data: the outputs are Forward's, exactly.
	truth := filepath.Join(dir, "truth.npz")
	if err := dataio.WriteNPZ(truth, map[string]*mat.Dense{"X": x, "Y": net.Forward(x)}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "eval", "--model", onnxPath, "--truth", truth, "--json")
	if code != 0 {
		t.Fatalf("eval --truth data: exit %d: %s", code, stderr)
	}
	if to := decodeOne(t, stdout)["truth_outputs"].(map[string]any); to["max_abs_error"].(float64) != 0 {
		t.Fatalf("truth outputs %v", to)
	}
	if code, _, stderr := cli(t, "eval", "--model", onnxPath, "--truth", stPath); code != 2 || !strings.Contains(stderr, "convolutional network") {
		t.Fatalf("weights of a CNN against a model: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "small.safetensors")
	// compress takes a CNN too (compress_cnn.go; tested in compress_cnn_test.go).
	if code, _, stderr := cli(t, "compress", "--model", onnxPath, "--calib", data, "--keep", "0.5", "--out", out); code != 0 {
		t.Fatalf("compress of a CNN: exit %d: %s", code, stderr)
	}
	testutil.FashionMNIST(t, 100, 200)
	code, stdout, stderr = cli(t, "eval", "--model", onnxPath, "--truth", stPath, "--data", "fashion-mnist", "--json")
	if code != 0 {
		t.Fatalf("eval --data fashion-mnist: exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	if v["test"].(map[string]any)["samples"].(float64) != 200 || v["fidelity"].(map[string]any)["agreement"].(float64) != 1 {
		t.Fatalf("eval on Fashion-MNIST: %v", v)
	}
}
