package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/modelfile"
)

// gen depth2 → learn depth2 → eval: exact recovery with a certificate, the
// PyTorch keys in the model file, and eval's depth-2 comparison.
func TestDepth2RoundTrip(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.npz")
	teacher := filepath.Join(dir, "teacher.safetensors")
	model := filepath.Join(dir, "model.safetensors")
	if code, _, errs := cli(t, "gen", "depth2", "--d", "6", "--m", "3", "--n", "60000", "--seed", "2", "--out", data, "--model-out", teacher, "--quiet"); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	code, out, errs := cli(t, "learn", "depth2", "--data", data, "--out", model, "--json")
	if code != 0 {
		t.Fatalf("learn: exit %d: %s", code, errs)
	}
	res := decodeOne(t, out)
	cert := res["certificate"].(map[string]any)
	if cert["met"] != true || res["route"] != depth2.RouteRefined {
		t.Fatalf("learn result: %v", res)
	}
	if _, err := os.Stat(dataio.ManifestPath(model)); err != nil {
		t.Errorf("no manifest: %v", err)
	}
	tensors, _, err := readSafetensorsFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"0.weight", "0.bias", "2.weight", "2.bias"} {
		if _, ok := tensors[k]; !ok {
			t.Errorf("model file lacks %s (has %v)", k, keys(tensors))
		}
	}
	code, out, errs = cli(t, "eval", "--model", model, "--truth", teacher, "--data", data, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	ev := decodeOne(t, out)
	w := ev["weights"].(map[string]any)
	if e := w["max_err"].(float64); e > 1e-9 {
		t.Errorf("eval max parameter error %v", e)
	}
	if r := ev["residual"].(float64); r > 1e-10 {
		t.Errorf("eval residual %v", r)
	}
	// Human output mentions the parameter error.
	if code, out, _ := cli(t, "eval", "--model", model, "--truth", teacher); code != 0 || !strings.Contains(out, "max parameter error") {
		t.Errorf("eval table: exit %d\n%s", code, out)
	}
	// The moment route's estimate is not certified: with --approximate it
	// is written, and the exit status says it is approximate.
	mom := filepath.Join(dir, "mom.safetensors")
	if code, _, errs := cli(t, "learn", "depth2", "--data", data, "--hidden", "3", "--route", "moments", "--approximate", "--out", mom, "--quiet"); code != exitNotCertified || !exists(mom) {
		t.Fatalf("learn --route moments --approximate: exit %d, written %v: %s", code, exists(mom), errs)
	}
}

// Bad input and too few samples exit 2 and write nothing.
func TestDepth2BadInput(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.npz")
	if code, _, errs := cli(t, "gen", "depth2", "--d", "6", "--m", "3", "--n", "500", "--out", small, "--quiet"); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	nan := filepath.Join(dir, "nan.npz")
	X := mat.NewDense(3000, 2, nil)
	Y := mat.NewDense(3000, 1, nil)
	X.Set(5, 1, 1)
	Y.Set(7, 0, 0)
	if err := dataio.WriteNPZ(nan, map[string]*mat.Dense{"X": X, "Y": Y}); err != nil {
		t.Fatal(err)
	}
	bigD := filepath.Join(dir, "over.npz")
	if code, _, errs := cli(t, "gen", "depth2", "--d", "3", "--m", "4", "--n", "5000", "--out", bigD, "--quiet"); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"learn", "depth2", "--data", small, "--hidden", "3"}, "samples"},
		{[]string{"learn", "depth2", "--data", bigD, "--hidden", "7", "--order", "2"}, "cannot be identified"},
		{[]string{"learn", "depth2", "--data", bigD, "--hidden", "4", "--order", "1"}, "m ≤ C(d+ℓ−1, ℓ) = 3"},
		{[]string{"learn", "depth2", "--data", bigD, "--order", "2"}, "needs the width: set --hidden"},
		{[]string{"learn", "depth2", "--data", small, "--route", "fast"}, "--route must be auto, exact, moments or improper"},
		{[]string{"learn", "depth2", "--data", small, "--order", "3"}, "--order must be 0"},
		{[]string{"learn", "depth2", "--data", small, "--hidden", "-1"}, "--hidden must be ≥ 0"},
		{[]string{"learn", "depth2", "--data", small, "--cert-tol", "-1"}, "--cert-tol must be ≥ 0"},
		{[]string{"gen", "depth2", "--a-min", "2", "--a-max", "1", "--out", filepath.Join(dir, "x.npz")}, "--a-max"},
	} {
		out := filepath.Join(dir, "model.safetensors")
		args := append(append([]string{}, tc.args...), "--out", out)
		if tc.args[0] == "gen" {
			args = tc.args
		}
		code, _, errs := cli(t, args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "Options.") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
		// A bad flag value (not data the flags are checked against) points to --help.
		if strings.Contains(tc.want, " must be ") && !strings.Contains(errs, "--help") {
			t.Errorf("%v: stderr %q lacks the --help hint", tc.args, errs)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v wrote a model", tc.args)
		}
	}
	// NaN in the data is caught while reading.
	X.Set(0, 0, nanValue())
	if err := dataio.WriteNPZ(nan, map[string]*mat.Dense{"X": X, "Y": Y}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := cli(t, "learn", "depth2", "--data", nan, "--out", filepath.Join(dir, "m.safetensors")); code != 2 {
		t.Errorf("NaN data: exit %d, want 2", code)
	}
}

func nanValue() float64 {
	var z float64
	return z / z
}

func keys(m map[string]modelfile.Tensor) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func readSafetensorsFile(path string) (map[string]modelfile.Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	t, m, err := modelfile.ReadSafetensors(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, m, nil
}
