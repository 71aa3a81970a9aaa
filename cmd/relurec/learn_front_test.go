package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// "relurec learn" with data and an output only picks the learner
// from the data and says why: biased data (gen depth2 with output biases)
// go to the depth-2 learner and come back exact with 0.bias and 2.bias,
// bias-free data with several outputs to the two-layer learner, and one
// output through "learn twolayer" to the depth-2 learner.
func TestLearnFrontDoorChoosesTheLearner(t *testing.T) {
	dir := t.TempDir()
	biased := filepath.Join(dir, "biased.npz")
	teacher := filepath.Join(dir, "biased-teacher.safetensors")
	if code, _, errs := cli(t, "gen", "depth2", "--d", "6", "--m", "3", "--outputs", "4", "--output-bias", "--n", "30000", "--seed", "5", "--out", biased, "--model-out", teacher, "--quiet"); code != 0 {
		t.Fatalf("gen depth2: exit %d: %s", code, errs)
	}
	x, y, _ := genSmall(t, dir)
	x1 := filepath.Join(dir, "x1.npy")
	y1 := filepath.Join(dir, "y1.npy")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "1", "--n", "20000", "--seed", "6", "--x", x1, "--y", y1); code != 0 {
		t.Fatalf("gen m=1: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		learner string
		keys    []string
	}{
		{"biases", []string{"learn", "--data", biased}, "depth2", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"bias-free", []string{"learn", "--x", x, "--y", y}, "twolayer", []string{"0.weight", "2.weight"}},
		{"one output via learn twolayer", []string{"learn", "twolayer", "--x", x1, "--y", y1}, "depth2", []string{"0.bias"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".safetensors")
			code, out, errs := cli(t, append(tc.args, "--out", model, "--json")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			res := decodeOne(t, out)
			ch, _ := res["learner"].(map[string]any)
			if ch["learner"] != tc.learner || res["certificate"].(map[string]any)["met"] != true {
				t.Fatalf("learner %v (want %s), certificate %v", ch, tc.learner, res["certificate"])
			}
			if h := res["hidden"].(float64); h != 3 {
				t.Errorf("hidden %v, want 3", h)
			}
			tensors, meta, err := readSafetensorsFile(model)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.keys {
				if _, ok := tensors[k]; !ok {
					t.Errorf("model lacks %s (has %v)", k, keys(tensors))
				}
			}
			if meta["learner"] != tc.learner {
				t.Errorf("metadata learner %q", meta["learner"])
			}
		})
	}
	// The biased model is the teacher's, parameter by parameter.
	code, out, errs := cli(t, "eval", "--model", filepath.Join(dir, "biases.safetensors"), "--truth", teacher, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	if e := decodeOne(t, out)["weights"].(map[string]any)["max_err"].(float64); e > 1e-9 {
		t.Errorf("max parameter error %v", e)
	}
}

// "relurec learn" with nothing to learn from says what it needs.
func TestLearnWithoutDataSaysWhatItNeeds(t *testing.T) {
	code, _, errs := cli(t, "learn")
	if code != exitBadInput || !strings.Contains(errs, "--data") || !strings.Contains(errs, "twolayer") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
