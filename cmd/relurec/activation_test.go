package main

import (
	"path/filepath"
	"testing"

	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// gen twolayer --activation and learn twolayer --activation: the teacher's
// and the learned model's files record the activation, eval's Forward and
// weight comparison use it, and a wrong or unknown --activation fails
// cleanly.
func TestActivationRoundTrip(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.npz")
	teacher := filepath.Join(dir, "teacher.safetensors")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--seed", "7",
		"--activation", "relupow2", "--out", data, "--model-out", teacher); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	tm, _, err := modelfile.LoadModel(teacher)
	if err != nil || tm.Layers[0].Act != nn.RectPow(2) {
		t.Fatalf("teacher activation %v, err %v", tm.Layers[0].Act, err)
	}
	model := filepath.Join(dir, "model.safetensors")
	code, out, errs := cli(t, "learn", "twolayer", "--data", data, "--activation", "ReLUPow2", "--seed", "1", "--out", model, "--json")
	if code != 0 {
		t.Fatalf("learn: exit %d: %s", code, errs)
	}
	l := decodeOne(t, out)
	if cert, _ := l["certificate"].(map[string]any); cert["met"] != true {
		t.Fatalf("noiseless x² data not certified: %v", l)
	}
	if opts, _ := l["options"].(map[string]any); opts["activation"] != "relupow2" {
		t.Fatalf("options %v", l["options"])
	}
	m, _, err := modelfile.LoadModel(model)
	if err != nil || m.Layers[0].Act != nn.RectPow(2) {
		t.Fatalf("model activation %v, err %v", m.Layers[0].Act, err)
	}
	code, out, errs = cli(t, "eval", "--model", model, "--truth", teacher, "--data", data, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	e := decodeOne(t, out)
	w, _ := e["weights"].(map[string]any)
	if r, _ := e["residual"].(float64); r > 1e-10 || w["max_rel_err"].(float64) > 1e-9 {
		t.Fatalf("eval: %v", e)
	}
	// The ReLU learner cannot certify x² data, and an unknown activation is
	// a usage error (exit 2) that writes nothing.
	if code, _, _ := cli(t, "learn", "twolayer", "--data", data, "--route", "exact", "--out", filepath.Join(dir, "relu.safetensors")); code != exitNotCertified {
		t.Errorf("exact ReLU route on x² data: exit %d, want %d", code, exitNotCertified)
	}
	if code, _, _ := cli(t, "learn", "twolayer", "--data", data, "--activation", "tanh", "--out", filepath.Join(dir, "x.safetensors")); code != 2 {
		t.Errorf("--activation tanh: exit %d, want 2", code)
	}
	if code, _, _ := cli(t, "gen", "twolayer", "--activation", "relupow0", "--out", filepath.Join(dir, "g.npz")); code != 2 {
		t.Errorf("gen --activation relupow0: exit %d, want 2", code)
	}
}
