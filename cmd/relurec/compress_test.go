package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// smallMLP writes a random 12-32-16-4 ReLU MLP and 300 calibration rows.
func smallMLP(t *testing.T, dir string) (model, calib string) {
	t.Helper()
	net, err := nn.NewMLP([]int{12, 32, 16, 4}, 3)
	if err != nil {
		t.Fatal(err)
	}
	model = filepath.Join(dir, "mlp.safetensors")
	if err := modelfile.SaveModel(model, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	x := mat.NewDense(300, 12, nil)
	x.Apply(func(_, _ int, _ float64) float64 { return rng.NormFloat64() }, x)
	return model, writeNPY(t, dir, "calib.npy", x)
}

func TestCompressCommand(t *testing.T) {
	dir := t.TempDir()
	model, calib := smallMLP(t, dir)
	out := filepath.Join(dir, "small.safetensors")
	code, stdout, stderr := cli(t, "compress", "--model", model, "--calib", calib, "--keep", "0.3", "--sequential", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	params, budget := v["params"].(float64), v["budget"].(float64)
	if params > budget || budget == 0 {
		t.Fatalf("params %v budget %v", params, budget)
	}
	layers := v["layers"].([]any)
	if len(layers) != 3 {
		t.Fatalf("%d layer reports", len(layers))
	}
	for _, l := range layers {
		m := l.(map[string]any)
		if _, ok := m["error"]; !ok {
			t.Fatalf("layer report lacks the calibration error: %v", m)
		}
	}
	m, meta, err := modelfile.LoadModel(out)
	if err != nil {
		t.Fatal(err)
	}
	if float64(m.NumParams()) != params || meta["method"] != "data" {
		t.Fatalf("model has %d parameters (report %v), metadata %v", m.NumParams(), params, meta)
	}
	if _, err := os.Stat(dataio.ManifestPath(out)); err != nil {
		t.Fatal("no manifest")
	}
	// The measured allocation reports its per-layer profiles.
	code, stdout, stderr = cli(t, "compress", "--model", model, "--calib", calib, "--keep", "0.3", "--allocation", "sensitivity", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("--allocation sensitivity: exit %d: %s", code, stderr)
	}
	v = decodeOne(t, stdout)
	if v["params"].(float64) > v["budget"].(float64) || len(v["profiles"].([]any)) == 0 || !strings.Contains(v["selection"].(string), "sensitivity") {
		t.Fatalf("--allocation sensitivity: params %v budget %v selection %v profiles %v", v["params"], v["budget"], v["selection"], v["profiles"])
	}
	// --distill reports the distillation, in JSON and in the table.
	code, stdout, stderr = cli(t, "compress", "--model", model, "--calib", calib, "--keep", "0.3", "--distill", "3", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("--distill: exit %d: %s", code, stderr)
	}
	d, ok := decodeOne(t, stdout)["distill"].(map[string]any)
	if !ok || d["epochs"].(float64) != 3 || d["holdout_rows"].(float64) != 30 {
		t.Fatalf("--distill: report %v", d)
	}
	code, stdout, stderr = cli(t, "compress", "--model", model, "--calib", calib, "--keep", "0.3", "--distill", "2", "--out", out)
	if code != 0 || !strings.Contains(stdout, "distillation") || !strings.Contains(stdout, "before distillation") {
		t.Fatalf("--distill: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	// The human report prints the budget and the per-layer table.
	code, stdout, stderr = cli(t, "compress", "--model", model, "--calib", calib, "--ranks", "4,0,2", "--method", "svd", "--out", out)
	if code != 0 || !strings.Contains(stdout, "weights and biases counted") || !strings.Contains(stdout, "dense") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
}

func TestCompressBadInputExitTwoAndNoOutput(t *testing.T) {
	dir := t.TempDir()
	model, calib := smallMLP(t, dir)
	// A model whose shapes do not chain: layers 12→32 then 16→4.
	a, _ := nn.NewMLP([]int{12, 32}, 1)
	b, _ := nn.NewMLP([]int{16, 4}, 1)
	a.Layers[0].Act = nn.ReLU
	broken := filepath.Join(dir, "broken.safetensors")
	f, err := os.Create(broken)
	if err != nil {
		t.Fatal(err)
	}
	tensors := map[string]modelfile.Tensor{
		"0.weight": {Shape: []int{32, 12}, F64: a.Layers[0].Weight.RawMatrix().Data},
		"2.weight": {Shape: []int{4, 16}, F64: b.Layers[0].Weight.RawMatrix().Data},
	}
	if err := modelfile.WriteSafetensors(f, tensors, nil, ""); err != nil {
		t.Fatal(err)
	}
	f.Close()
	corrupt := filepath.Join(dir, "corrupt.safetensors")
	os.WriteFile(corrupt, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{not json at all"), 0o644)
	corruptNPY := filepath.Join(dir, "corrupt.npy")
	os.WriteFile(corruptNPY, []byte("\x93NUMPY garbage"), 0o644)
	wide := writeNPY(t, dir, "wide.npy", mat.NewDense(10, 13, nil))
	out := filepath.Join(dir, "out.safetensors")
	cases := map[string][]string{
		"shapes do not chain": {"--model", broken, "--calib", calib},
		"calibration width":   {"--model", model, "--calib", wide},
		"keep 0":              {"--model", model, "--calib", calib, "--keep", "0"},
		"keep 1.5":            {"--model", model, "--calib", calib, "--keep", "1.5"},
		"corrupt model":       {"--model", corrupt, "--calib", calib},
		"corrupt calibration": {"--model", model, "--calib", corruptNPY},
		"missing model":       {"--model", filepath.Join(dir, "nope.safetensors"), "--calib", calib},
		"unknown method":      {"--model", model, "--calib", calib, "--method", "zip"},
		"unknown allocation":  {"--model", model, "--calib", calib, "--allocation", "sensitive"},
		"two selections":      {"--model", model, "--calib", calib, "--keep", "0.5", "--energy", "0.9"},
		"budget too small":    {"--model", model, "--calib", calib, "--keep", "0.0001"},
		"output is input":     {"--model", model, "--calib", calib, "--out", calib},
		"negative distill":    {"--model", model, "--calib", calib, "--distill", "-1"},
		"distill rate":        {"--model", model, "--calib", calib, "--distill", "2", "--distill-lr", "0"},
	}
	for name, args := range cases {
		o := out
		for i, a := range args {
			if a == "--out" {
				o = args[i+1]
			}
		}
		if !contains(args, "--out") {
			args = append(args, "--out", out)
		}
		code, stdout, stderr := cli(t, append([]string{"compress"}, args...)...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (stderr %q)", name, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: printed %q", name, stdout)
		}
		if o == out {
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s: wrote %s", name, out)
				os.Remove(out)
			}
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func TestTrainMLPCommand(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2, 2))
	x := mat.NewDense(400, 6, nil)
	y := mat.NewDense(400, 1, nil)
	for i := 0; i < 400; i++ {
		s := 0.0
		for j := 0; j < 6; j++ {
			v := rng.NormFloat64()
			x.Set(i, j, v)
			s += v
		}
		if s > 0 {
			y.Set(i, 0, 1)
		}
	}
	data := filepath.Join(dir, "d.npz")
	if err := dataio.WriteNPZ(data, map[string]*mat.Dense{"X": x, "y": y}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.safetensors")
	code, stdout, stderr := cli(t, "train", "mlp", "--data", data, "--hidden", "8", "--epochs", "30", "--batch-size", "16", "--lr", "0.01", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	if acc := v["train"].(map[string]any)["accuracy"].(float64); acc < 0.9 {
		t.Fatalf("training accuracy %g on a linearly separable problem", acc)
	}
	if _, _, err := modelfile.LoadModel(out); err != nil {
		t.Fatal(err)
	}
	// Bad labels: exit 2, no model.
	y.Set(0, 0, 0.5)
	bad := filepath.Join(dir, "bad.npz")
	dataio.WriteNPZ(bad, map[string]*mat.Dense{"X": x, "y": y})
	out2 := filepath.Join(dir, "m2.safetensors")
	if code, _, _ := cli(t, "train", "mlp", "--data", bad, "--out", out2); code != 2 {
		t.Fatalf("non-integer label: exit %d", code)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Fatal("model written on bad input")
	}
	if code, _, _ := cli(t, "train", "mlp", "--data", data, "--hidden", "8,x", "--out", out2); code != 2 {
		t.Fatalf("bad --hidden: exit %d", code)
	}
}

// TestFashionCommands exercises --data fashion-mnist on a small stand-in of
// the data set's files (dataio's tests read the installed data set).
func TestFashionCommands(t *testing.T) {
	testutil.FashionMNIST(t, 1000, 300)
	dir := t.TempDir()
	net, _ := nn.NewMLP([]int{784, 32, 10}, 1)
	model := filepath.Join(dir, "m.safetensors")
	if err := modelfile.SaveModel(model, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "eval", "--model", model, "--data", "fashion-mnist", "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	v := decodeOne(t, stdout)
	if v["parameters"].(float64) != float64(net.NumParams()) || v["test"].(map[string]any)["samples"].(float64) != 300 {
		t.Fatalf("eval report %v", v)
	}
	out := filepath.Join(dir, "s.safetensors")
	code, stdout, stderr = cli(t, "compress", "--model", model, "--data", "fashion-mnist", "--calib-samples", "500", "--keep", "0.5", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("compress: exit %d: %s", code, stderr)
	}
	v = decodeOne(t, stdout)
	if v["compressed"] == nil || v["original"] == nil {
		t.Fatalf("no accuracies in %v", v)
	}
	// The compressed model against the original: fidelity and the paired
	// test; the model against itself agrees everywhere.
	code, stdout, stderr = cli(t, "eval", "--model", out, "--truth", model, "--data", "fashion-mnist", "--json")
	if code != 0 {
		t.Fatalf("eval --truth: exit %d: %s", code, stderr)
	}
	fid := decodeOne(t, stdout)["fidelity"].(map[string]any)
	if a := fid["agreement"].(float64); !(a > 0.5 && a <= 1) || fid["logit_error"].(float64) <= 0 {
		t.Fatalf("fidelity %v", fid)
	}
	code, stdout, _ = cli(t, "eval", "--model", model, "--truth", model, "--data", "fashion-mnist", "--json")
	if fid = decodeOne(t, stdout)["fidelity"].(map[string]any); code != 0 || fid["agreement"].(float64) != 1 || fid["logit_error"].(float64) != 0 || fid["mcnemar_p"].(float64) != 1 {
		t.Fatalf("a model against itself: exit %d, fidelity %v", code, fid)
	}
	// A model of the wrong input width is bad input.
	wrong, _ := nn.NewMLP([]int{10, 10}, 1)
	wp := filepath.Join(dir, "w.safetensors")
	modelfile.SaveModel(wp, wrong, nil, "")
	if code, _, _ := cli(t, "eval", "--model", wp, "--data", "fashion-mnist"); code != 2 {
		t.Fatalf("wrong width: exit %d", code)
	}
	if code, _, stderr := cli(t, "eval", "--model", model, "--truth", wp, "--data", "fashion-mnist"); code != 2 || !strings.Contains(stderr, "--truth maps 10 inputs") {
		t.Fatalf("reference of the wrong width: exit %d: %s", code, stderr)
	}
}

// Without flags compress runs compress.DefaultOptions (sequential, the
// sensitivity allocation, distillation at ≤ 25% kept) and says so with an
// estimated time before it starts; --fast is compress.FastOptions; a flag
// given overrides either; a method that whitens with the original inputs
// (svd-llm-v2) is not made sequential behind the user's back, so it does
// not warn.
func TestCompressDefaultsAndFast(t *testing.T) {
	dir := t.TempDir()
	model, calib := smallMLP(t, dir)
	out := filepath.Join(dir, "small.safetensors")
	run := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := cli(t, append([]string{"compress", "--model", model, "--calib", calib, "--keep", "0.2", "--out", out}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return stdout + stderr
	}
	text := run()
	for _, want := range []string{"compress: sequential data fit on 300 rows, keep 0.2, sensitivity allocation, 30 epochs of distillation; estimated", "(--fast: ", "distillation   30 epochs"} {
		if !strings.Contains(text, want) {
			t.Fatalf("defaults: output lacks %q:\n%s", want, text)
		}
	}
	opts, err := os.ReadFile(dataio.ManifestPath(out))
	if err != nil {
		t.Fatal(err)
	}
	opts = bytes.ReplaceAll(bytes.ReplaceAll(opts, []byte(" "), nil), []byte("\n"), nil)
	for _, want := range []string{`"sequential":true`, `"allocation":"auto"`, `"distill":30`, `"distill_auto":true`} {
		if !strings.Contains(string(opts), want) {
			t.Fatalf("manifest options %s lack %s", opts, want)
		}
	}
	text = run("--fast")
	if !strings.Contains(text, "compress: non-sequential data fit on 300 rows, keep 0.2, global allocation; estimated") ||
		!strings.Contains(text, "(without --fast: ") || strings.Contains(text, "distillation ") {
		t.Fatalf("--fast:\n%s", text)
	}
	text = run("--fast", "--distill", "2")
	if !strings.Contains(text, "distillation   2 epochs") {
		t.Fatalf("--fast --distill 2:\n%s", text)
	}
	text = run("--method", "svd-llm-v2", "--allocation", "svd-llm-v2")
	if strings.Contains(text, "warning") || !strings.Contains(text, "non-sequential svd-llm-v2 fit") {
		t.Fatalf("svd-llm-v2:\n%s", text)
	}
}
