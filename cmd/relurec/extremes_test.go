package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// Flag values that take generated data beyond float64 exit 2 naming the
// flag, and write nothing: no file ever holds Inf or NaN, no manifest an
// infinite κ = 1/a.
func TestGenRefusesValuesBeyondFloat64(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.npz")
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"gen", "twolayer", "--n", "200", "--noise", "1e308"}, "--noise"},
		{[]string{"gen", "twolayer", "--n", "200", "--activation", "relupow1e308"}, "--activation"},
		{[]string{"gen", "twolayer", "--n", "200", "--cov-cond", "1e308"}, "--cov-cond"},
		{[]string{"gen", "twolayer", "--instance", "lemma16", "--n", "200", "--a", "1e-320"}, "--a"},
		{[]string{"gen", "depth2", "--n", "200", "--noise", "1e308"}, "--noise"},
		{[]string{"gen", "depth2", "--n", "200", "--a-max", "1e308"}, "--a-max"},
		{[]string{"gen", "generative", "--noise", "1e308"}, "--noise"},
		{[]string{"gen", "generative", "--bias", "gaussian:0,1e308"}, "--bias"},
	} {
		code, _, errs := cli(t, append(tc.args, "--out", out)...)
		if code != exitBadInput || !strings.Contains(errs, tc.flag+" ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, errs, tc.flag)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused runs left files: %v", entries)
	}
}

// Samples scaled to 1e±160 are refused with exit 2 and a hint to rescale,
// and so is an activation whose Hermite coefficients overflow.
func TestLearnRefusesExtremeScaleAndActivation(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "6", "--k", "3", "--m", "4", "--n", "2000", "--out", data); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	X, _ := dataio.ReadMatrix(data, "X")
	Y, _ := dataio.ReadMatrix(data, "Y")
	for _, s := range []float64{1e160, 1e-160} {
		var xs, ys mat.Dense
		xs.Scale(s, X)
		ys.Scale(s, Y)
		scaled := filepath.Join(dir, "scaled.npz")
		if err := dataio.WriteNPZ(scaled, map[string]*mat.Dense{"X": &xs, "Y": &ys}); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"twolayer", "depth2"} {
			code, _, errs := cli(t, "learn", cmd, "--data", scaled, "--out", filepath.Join(dir, "m.safetensors"))
			if code != exitBadInput || !strings.Contains(errs, "X's largest entry") {
				t.Errorf("learn %s on data scaled by %g: exit %d, stderr %q; want 2 saying how to rescale", cmd, s, code, errs)
			}
		}
	}
	code, _, errs := cli(t, "learn", "twolayer", "--data", data, "--activation", "relupow1e308", "--out", filepath.Join(dir, "m.safetensors"))
	if code != exitBadInput || !strings.Contains(errs, "relupow1e+308") {
		t.Errorf("--activation relupow1e308: exit %d, stderr %q; want 2", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "m.safetensors")); err == nil {
		t.Error("a refused run wrote the model")
	}
}
