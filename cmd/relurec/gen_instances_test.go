package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/synth"
)

func readXY(t *testing.T, path string) (X, Y *mat.Dense) {
	t.Helper()
	X, err := dataio.ReadMatrix(path, "X")
	if err != nil {
		t.Fatal(err)
	}
	Y, err = dataio.ReadMatrix(path, "Y")
	if err != nil {
		t.Fatal(err)
	}
	return X, Y
}

// gen twolayer --instance lemma16: the two networks of the pair give the same
// X and outputs that differ exactly on the distinguishing samples, whose
// number the JSON reports.
func TestGenLemma16(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.npz"), filepath.Join(dir, "b.npz")
	code, out, errs := cli(t, "gen", "twolayer", "--instance", "lemma16", "--a", "0.1", "--n", "3000", "--seed", "4", "--out", p1, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res := decodeOne(t, out)
	inst, ok := res["instance"].(map[string]any)
	if !ok {
		t.Fatalf("no instance block: %s", out)
	}
	if code, _, errs := cli(t, "gen", "twolayer", "--instance", "lemma16", "--a", "0.1", "--second", "--n", "3000", "--seed", "4", "--out", p2, "--quiet"); code != 0 {
		t.Fatalf("--second: exit %d: %s", code, errs)
	}
	X1, Y1 := readXY(t, p1)
	X2, Y2 := readXY(t, p2)
	if r, c := X1.Dims(); r != 3000 || c != 2 || !mat.Equal(X1, X2) {
		t.Fatalf("X is %d×%d, or differs between the pair", r, c)
	}
	differ := 0
	for q := 0; q < 3000; q++ {
		if math.Abs(Y1.At(q, 0)-Y2.At(q, 0)) > 1e-12 {
			differ++
			if !synth.Lemma16Distinguishes(X1.At(q, 0), X1.At(q, 1), 0.1) {
				t.Fatalf("sample %d differs outside |x1| < 2a|x2|", q)
			}
		}
	}
	if got := inst["distinguishing_samples"].(float64); int(got) != differ {
		t.Fatalf("JSON reports %v distinguishing samples, the files differ on %d", got, differ)
	}
	// ≈ 3000·(2/π)·arctan(0.2) = 376.
	if differ < 300 || differ > 460 {
		t.Fatalf("%d distinguishing samples, expected ≈ 376", differ)
	}
}

// gen twolayer --instance sat6: Y is 0 on the clause rows and 1 elsewhere,
// and the written witness network reproduces it exactly (the reduction of [BJW19, Thm 2], end to end).
func TestGenSAT6(t *testing.T) {
	dir := t.TempDir()
	for _, varAlpha := range []bool{false, true} {
		data, model := filepath.Join(dir, "s.npz"), filepath.Join(dir, "w.safetensors")
		args := []string{"gen", "twolayer", "--instance", "sat6", "--vars", "9", "--clauses", "5", "--seed", "2", "--out", data, "--model-out", model, "--quiet"}
		if varAlpha {
			args = append(args, "--variable-alpha")
		}
		if code, _, errs := cli(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		X, Y := readXY(t, data)
		rows, d := X.Dims()
		wantD, wantRows := 11, 10+2*9+5
		if varAlpha {
			wantD, wantRows = 12, wantRows+2
		}
		if d != wantD || rows != wantRows {
			t.Fatalf("X is %d×%d, want %d×%d", rows, d, wantRows, wantD)
		}
		for q := 0; q < rows; q++ {
			if want := map[bool]float64{true: 0, false: 1}[q < 10]; Y.At(q, 0) != want {
				t.Fatalf("Y[%d] = %v, want %v", q, Y.At(q, 0), want)
			}
		}
		net, _, err := modelfile.LoadModel(model)
		if err != nil {
			t.Fatal(err)
		}
		if got := net.Forward(X); !mat.Equal(got, Y) {
			t.Fatalf("variable-α %v: the witness does not reproduce Y exactly", varAlpha)
		}
	}
}

func TestGenInstanceBadFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.npz")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--instance", "lemma17"}, "--instance"},
		{[]string{"--instance", "lemma16", "--a", "0"}, "--a"},
		{[]string{"--instance", "lemma16", "--a", "1.5"}, "--a"},
		{[]string{"--instance", "lemma16", "--d", "3"}, "--d"},
		{[]string{"--instance", "lemma16", "--vars", "9"}, "--vars"},
		{[]string{"--instance", "sat6", "--n", "50"}, "--n"},
		{[]string{"--instance", "sat6", "--vars", "5"}, "--vars"},
		{[]string{"--instance", "sat6", "--clauses", "0"}, "--clauses"},
		{[]string{"--instance", "sat6", "--second"}, "--second"},
		{[]string{"--a", "0.3"}, "--a"},
		{[]string{"--variable-alpha"}, "--variable-alpha"},
	} {
		code, _, errs := cli(t, append(append([]string{"gen", "twolayer"}, tc.args...), "--out", out)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want 2 mentioning %s)", tc.args, code, errs, tc.want)
		}
	}
	code, help, _ := cli(t, "gen", "twolayer", "--help")
	if code != 0 || !strings.Contains(help, "--instance lemma16") || !strings.Contains(help, "--instance sat6") {
		t.Errorf("help lacks the instance examples:\n%s", help)
	}
}
