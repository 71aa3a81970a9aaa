package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// mlpData writes X (n×sizes[0], standard Gaussian) and Y = net(X) for a
// PyTorch-default network of the given sizes (nn.NewMLP) whose weights are
// scaled by wscale (larger weights, as training leaves them), as data.npz
// in dir.
func mlpData(t *testing.T, dir string, sizes []int, n int, wscale float64, seed uint64) string {
	t.Helper()
	net, err := nn.NewMLP(sizes, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range net.Layers {
		l.Weight.Scale(wscale, l.Weight)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	X := mat.NewDense(n, sizes[0], nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = rng.NormFloat64()
	}
	return writeNPZ(t, filepath.Join(dir, "data.npz"), map[string]*mat.Dense{"X": X, "Y": net.Forward(X)})
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// An answer that is not certified exits with status 3 and writes nothing;
// --approximate writes the model (and its manifest) with the same status,
// and the model file says the certificate was not met.
func TestNotCertifiedExitsThree(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "noisy.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--noise", "0.2", "--out", data); code != 0 {
		t.Fatalf("gen: %s", errs)
	}
	model := filepath.Join(dir, "m.safetensors")
	args := []string{"learn", "twolayer", "--data", data, "--hidden", "3", "--route", "noisy", "--out", model}
	code, stdout, stderr := cli(t, args...)
	if code != exitNotCertified {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitNotCertified, stderr)
	}
	if exists(model) || exists(dataio.ManifestPath(model)) {
		t.Fatal("a model or manifest was written for an answer that is not certified")
	}
	for _, want := range []string{"answer not certified", "--approximate", "--refine"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "not written") {
		t.Errorf("the table does not say the model was not written:\n%s", stdout)
	}

	code, stdout, stderr = cli(t, append(args, "--refine", "--approximate", "--json")...)
	if code != exitNotCertified {
		t.Fatalf("--approximate: exit %d, want %d; stderr %q", code, exitNotCertified, stderr)
	}
	v := decodeOne(t, stdout)
	diag, _ := v["diagnosis"].(map[string]any)
	if v["written"] != true || diag == nil || diag["structured"] != false {
		t.Errorf("--approximate --json: written %v, diagnosis %v; want written and a noise-like residual", v["written"], diag)
	}
	if !strings.Contains(stderr, "looks like noise") {
		t.Errorf("the refined noisy answer is not diagnosed as noise:\n%s", stderr)
	}
	_, meta, err := readSafetensorsFile(model)
	if err != nil {
		t.Fatalf("--approximate wrote no readable model: %v", err)
	}
	if meta["certificate_met"] != "false" || !exists(dataio.ManifestPath(model)) {
		t.Errorf("metadata certificate_met %q, manifest written %v", meta["certificate_met"], exists(dataio.ManifestPath(model)))
	}
}

// Data of a network with two hidden layers: the front door ends with exit
// status 3, no model, and a message that names the cause (structure one
// hidden layer does not explain) and relurec extract.
func TestDeeperNetworkNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	data := mlpData(t, dir, []int{8, 6, 6, 3}, 10_000, 1, 3)
	model := filepath.Join(dir, "m.safetensors")
	code, stdout, stderr := cli(t, "learn", "--data", data, "--out", model, "--json")
	if code != exitNotCertified {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitNotCertified, stderr)
	}
	if exists(model) {
		t.Fatal("model written")
	}
	v := decodeOne(t, stdout)
	diag, _ := v["diagnosis"].(map[string]any)
	if diag == nil || diag["structured"] != true {
		t.Errorf("diagnosis %v; want a structured residual", diag)
	}
	for _, want := range []string{"structure, not noise", "deeper network", "relurec extract"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// A certified answer of a trained-like biased network prints no warning:
// what the learner met on the way (a sign FixSigns could not settle) is a
// note, listed by --json.
func TestCertifiedAnswerWarnsOfNothing(t *testing.T) {
	dir := t.TempDir()
	data := mlpData(t, dir, []int{6, 4, 2}, 20_000, 2, 7)
	model := filepath.Join(dir, "m.safetensors")
	code, stdout, stderr := cli(t, "learn", "--data", data, "--out", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "certificate") || !strings.Contains(stdout, "exact") {
		t.Fatalf("not certified:\n%s", stdout)
	}
	var warnings []string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "warnings") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.HasSuffix(strings.TrimSpace(warnings[0]), "none") || strings.Contains(stdout, "bad input") {
		t.Errorf("warnings next to a met certificate:\n%s", stdout)
	}
	code, stdout, _ = cli(t, "learn", "--data", data, "--out", model, "--json")
	v := decodeOne(t, stdout)
	if notes, _ := v["notes"].([]any); code != 0 || len(notes) == 0 || len(v["warnings"].([]any)) != 0 {
		t.Errorf("--json: exit %d, warnings %v, notes %v; want no warning and the notes", code, v["warnings"], v["notes"])
	}
}

// The exact route's table names the start that ran, not the route's
// historical name.
func TestLearnRouteSaysWhatRan(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--out", data); code != 0 {
		t.Fatalf("gen: %s", errs)
	}
	code, stdout, stderr := cli(t, "learn", "twolayer", "--data", data, "--out", filepath.Join(dir, "m.safetensors"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "zero-set start + exact polish") || strings.Contains(stdout, "tensor+polish") {
		t.Errorf("route row:\n%s", stdout)
	}
}

// An .npz without the array asked for names the flags that choose it.
func TestMissingArrayNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	data := writeNPZ(t, filepath.Join(dir, "q.npz"), map[string]*mat.Dense{"X": mat.NewDense(10, 2, nil), "y": mat.NewDense(10, 1, nil)})
	code, _, stderr := cli(t, "learn", "--data", data, "--out", filepath.Join(dir, "m.safetensors"))
	if code != exitBadInput || !strings.Contains(stderr, `"y"`) || !strings.Contains(stderr, "--y-name") {
		t.Errorf("exit %d, stderr %q; want 2, the names present and --y-name", code, stderr)
	}
}

// demo --noise: exit status 3 (the answer is approximate), and the hint to
// refine names the flag, not the library option.
func TestDemoNoiseNamesRefineFlag(t *testing.T) {
	code, stdout, stderr := cli(t, "demo", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--noise", "0.1")
	if code != exitNotCertified {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitNotCertified, stderr)
	}
	if !strings.Contains(stdout, "--refine") || strings.Contains(stdout+stderr, "Options.") {
		t.Errorf("demo --noise output:\n%s\n%s", stdout, stderr)
	}
}

// diagnoseResidual on wide inputs (d > structureDirs, a model with fewer
// units than that): noise independent of X is noise, the part of a
// deeper network the model lacks is structure.
func TestDiagnoseResidualWideInputs(t *testing.T) {
	const n, d = 5000, 40
	rng := rand.New(rand.NewPCG(1, 2))
	X := mat.NewDense(n, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = rng.NormFloat64()
	}
	model, err := nn.NewMLP([]int{d, 3, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	noisy := model.Forward(X)
	for i := range noisy.RawMatrix().Data {
		noisy.RawMatrix().Data[i] += 0.1 * rng.NormFloat64()
	}
	if diag := diagnoseResidual(X, noisy, model, 3, 0.1, ""); diag.Structured || diag.Directions != 3 {
		t.Errorf("noise: %+v", diag)
	}
	deeper, err := nn.NewMLP([]int{d, 3, 3, 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// One hidden layer on the deeper network's first layer.
	fit := &nn.MLP{Layers: []nn.Layer{deeper.Layers[0], model.Layers[1]}}
	if diag := diagnoseResidual(X, deeper.Forward(X), fit, 3, 0.5, ""); !diag.Structured || !strings.Contains(diag.Text, "deeper network") {
		t.Errorf("a deeper network: %+v", diag)
	}
}
