package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// evalNPZFixture writes a bias-free two-layer model (4 inputs, 3 hidden
// units, 3 outputs) and returns it with its path and 6 inputs.
func evalNPZFixture(t *testing.T, dir string) (*nn.MLP, string, *mat.Dense) {
	t.Helper()
	V := mat.NewDense(3, 4, []float64{
		1, 0, 0, 0,
		0, 1, 0, 0,
		0, 0, 1, 1,
	})
	U := mat.NewDense(3, 3, []float64{
		1, 0, 0,
		0, 2, 0,
		0, 0, 1,
	})
	model := nn.NewTwoLayer(V, U)
	path := filepath.Join(dir, "model.safetensors")
	if err := modelfile.SaveModel(path, model, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	X := mat.NewDense(6, 4, []float64{
		3, 1, 0, 0, // outputs (3, 2, 0): class 0
		1, 1, 0, 0, // (1, 2, 0): class 1
		0, 0, 1, 1, // (0, 0, 2): class 2
		0, 1, 0, 0, // (0, 2, 0): class 1
		2, 0, 0, 0, // (2, 0, 0): class 0
		0, 0, 2, 0, // (0, 0, 2): class 2
	})
	return model, path, X
}

func writeNPZ(t *testing.T, path string, arrays map[string]*mat.Dense) string {
	t.Helper()
	if err := dataio.WriteNPZ(path, arrays); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvalTruthNPZ: --truth accepts an .npz of inputs X and true outputs Y:
// the model's own outputs give zero error, perturbed outputs the error
// computed by hand, and the output says the truth was data, not a
// safetensors header error.
func TestEvalTruthNPZ(t *testing.T) {
	dir := t.TempDir()
	model, mp, X := evalNPZFixture(t, dir)
	Y := model.Forward(X)
	own := writeNPZ(t, filepath.Join(dir, "own.npz"), map[string]*mat.Dense{"X": X, "Y": Y})
	code, stdout, stderr := cli(t, "eval", "--model", mp, "--truth", own, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := decodeOne(t, stdout)
	to, _ := r["truth_outputs"].(map[string]any)
	if r["truth_kind"] != "data" || to == nil || to["rel_error"].(float64) > 1e-12 || to["max_abs_error"].(float64) > 1e-12 || to["samples"].(float64) != 6 {
		t.Fatalf("model's own outputs as truth: %v", r)
	}
	if _, ok := r["weights"]; ok {
		t.Errorf("weights compared with a data truth: %v", r)
	}

	// Perturb one output by 0.5: max abs error 0.5, relative 0.5/‖Y‖_F.
	P := mat.DenseCopyOf(Y)
	P.Set(2, 2, P.At(2, 2)+0.5)
	pert := writeNPZ(t, filepath.Join(dir, "pert.npz"), map[string]*mat.Dense{"X": X, "Y": P})
	code, stdout, stderr = cli(t, "eval", "--model", mp, "--truth", pert, "--json")
	if code != 0 {
		t.Fatalf("perturbed: exit %d: %s", code, stderr)
	}
	to, _ = decodeOne(t, stdout)["truth_outputs"].(map[string]any)
	want := 0.5 / mat.Norm(P, 2)
	if got := to["rel_error"].(float64); math.Abs(got-want) > 1e-12 {
		t.Errorf("relative output error %v, want %v", got, want)
	}
	if got := to["max_abs_error"].(float64); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("max abs error %v, want 0.5", got)
	}
	// The human table names the kind of truth.
	code, stdout, stderr = cli(t, "eval", "--model", mp, "--truth", pert)
	if code != 0 || !strings.Contains(stdout, "data (true outputs Y for inputs X)") || !strings.Contains(stdout, "relative output error") {
		t.Errorf("table (exit %d, %s):\n%s", code, stderr, stdout)
	}
	// Any MLP: a three-layer network with biases (neither two-layer nor
	// depth-2) against its own outputs, perturbed the same way.
	deep := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.NewDense(5, 4, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1}), Bias: []float64{0, 0.1, 0, 0, -1}, Act: nn.ReLU},
		{Weight: mat.NewDense(2, 5, []float64{1, 1, 0, 0, 1, 0, 0, 1, 1, 1}), Bias: []float64{0.5, 0}, Act: nn.ReLU},
		{Weight: mat.NewDense(3, 2, []float64{1, 0, 0, 1, 1, -1}), Act: nn.Identity},
	}}
	dp := filepath.Join(dir, "deep.safetensors")
	if err := modelfile.SaveModel(dp, deep, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	DY := deep.Forward(X)
	DY.Set(2, 2, DY.At(2, 2)+0.5)
	dt := writeNPZ(t, filepath.Join(dir, "deep_truth.npz"), map[string]*mat.Dense{"X": X, "Y": DY})
	code, stdout, stderr = cli(t, "eval", "--model", dp, "--truth", dt, "--json")
	if code != 0 {
		t.Fatalf("deep model: exit %d: %s", code, stderr)
	}
	r = decodeOne(t, stdout)
	to, _ = r["truth_outputs"].(map[string]any)
	if got, want := to["rel_error"].(float64), 0.5/mat.Norm(DY, 2); r["truth_kind"] != "data" || math.Abs(got-want) > 1e-12 || math.Abs(to["max_abs_error"].(float64)-0.5) > 1e-12 {
		t.Errorf("deep model against data truth: %v (want rel error %v)", r, want)
	}
	// A model truth still compares weights, and says so.
	code, stdout, _ = cli(t, "eval", "--model", mp, "--truth", mp, "--json")
	if r := decodeOne(t, stdout); code != 0 || r["truth_kind"] != "model" || r["weights"] == nil {
		t.Errorf("model truth: exit %d, %v", code, r)
	}
}

// TestEvalTruthUnreadable: a --truth that is neither a model nor an .npz
// of X and Y exits 2, prints nothing on stdout, and says what --truth takes.
func TestEvalTruthUnreadable(t *testing.T) {
	dir := t.TempDir()
	_, mp, X := evalNPZFixture(t, dir)
	junk := []byte("this is not a model nor an archive, just some bytes")
	corrupt := filepath.Join(dir, "corrupt.npz")
	unknown := filepath.Join(dir, "truth.bin")
	for _, p := range []string{corrupt, unknown} {
		if err := os.WriteFile(p, junk, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noY := writeNPZ(t, filepath.Join(dir, "noY.npz"), map[string]*mat.Dense{"X": X})
	wrong := writeNPZ(t, filepath.Join(dir, "wrong.npz"), map[string]*mat.Dense{"X": X, "Y": mat.NewDense(6, 2, nil)})
	lone := filepath.Join(dir, "Y.npy")
	for _, tc := range []struct{ truth, want string }{
		{corrupt, "not a readable .npz"},
		{unknown, "invalid model file"},
		{noY, "noY.npz"},
		{wrong, "Y with 2"},
		{lone, "single array"},
	} {
		code, stdout, stderr := cli(t, "eval", "--model", mp, "--truth", tc.truth)
		if code != 2 || stdout != "" {
			t.Errorf("--truth %s: exit %d, want 2; stdout %q", tc.truth, code, stdout)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("--truth %s: stderr %q does not say %q", tc.truth, stderr, tc.want)
		}
		if tc.truth != wrong && !strings.Contains(stderr, "a model (.safetensors or .onnx) or an .npz holding arrays X") {
			t.Errorf("--truth %s: stderr %q does not say what --truth takes", tc.truth, stderr)
		}
	}
}

// TestEvalClassifierNPZ: --data with X and integer labels y (train mlp's
// convention) scores the model as a classifier: accuracy is the fraction of
// rows whose largest output is the label, computed here by hand.
func TestEvalClassifierNPZ(t *testing.T) {
	dir := t.TempDir()
	_, mp, X := evalNPZFixture(t, dir)
	// True classes 0 1 2 1 0 2; the labels get rows 1 and 4 wrong: 4/6.
	y := mat.NewDense(6, 1, []float64{0, 2, 2, 1, 1, 2})
	for _, name := range []string{"y", "labels", "Y"} {
		data := writeNPZ(t, filepath.Join(dir, "cls_"+name+".npz"), map[string]*mat.Dense{"X": X, name: y})
		code, stdout, stderr := cli(t, "eval", "--model", mp, "--data", data, "--json")
		if code != 0 {
			t.Fatalf("labels %s: exit %d: %s", name, code, stderr)
		}
		r := decodeOne(t, stdout)
		m, _ := r["test"].(map[string]any)
		if m == nil || m["accuracy"].(float64) != 4.0/6 || m["correct"].(float64) != 4 || m["samples"].(float64) != 6 || r["labels"] != name {
			t.Errorf("labels %s: %v", name, r)
		}
	}
	// The table, and separate --x/--y files.
	xp, yp := filepath.Join(dir, "X.npy"), filepath.Join(dir, "y.npy")
	if err := dataio.WriteNPY(xp, X); err != nil {
		t.Fatal(err)
	}
	if err := dataio.WriteNPY(yp, y); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "eval", "--model", mp, "--x", xp, "--y", yp)
	if code != 0 || !strings.Contains(stdout, "0.6667 (4 of 6 correct") || !strings.Contains(stdout, "6 samples") {
		t.Errorf("--x/--y table: exit %d %s\n%s", code, stderr, stdout)
	}
}

// TestEvalClassifierBadLabels: labels outside [0, outputs), negative or
// fractional exit 2 naming the label and its row, printing nothing.
func TestEvalClassifierBadLabels(t *testing.T) {
	dir := t.TempDir()
	_, mp, X := evalNPZFixture(t, dir)
	for _, tc := range []struct {
		name  string
		label float64
		want  []string
	}{
		{"too_big", 3, []string{"label 3 at row 4", "[0, 3)", "3 outputs"}},
		{"huge", 1e6, []string{"label 1000000 at row 4", "[0, 3)"}},
		{"negative", -1, []string{"label 4 is -1"}},
		{"fraction", 0.5, []string{"label 4 is 0.5"}},
	} {
		y := mat.NewDense(6, 1, []float64{0, 1, 2, 1, 0, 2})
		y.Set(4, 0, tc.label)
		data := writeNPZ(t, filepath.Join(dir, tc.name+".npz"), map[string]*mat.Dense{"X": X, "y": y})
		code, stdout, stderr := cli(t, "eval", "--model", mp, "--data", data)
		if code != 2 || stdout != "" {
			t.Errorf("%s: exit %d, want 2; stdout %q", tc.name, code, stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", tc.name, stderr, w)
			}
		}
	}
}
