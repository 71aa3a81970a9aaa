package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// TestTrainRefusesStrayLabels: train mlp sizes its output layer by the class
// count, so one stray label of 1e6 would build a network with a million
// outputs (10 GB). A label outside [0, C) — C from --classes, or inferred as
// max+1 ≤ 1000 — exits 2 naming the label, its row and --classes, before any
// network is built, and writes no model.
func TestTrainRefusesStrayLabels(t *testing.T) {
	dir := t.TempDir()
	x := mat.NewDense(20, 3, nil)
	y := mat.NewDense(20, 1, nil)
	for i := 0; i < 20; i++ {
		for j := 0; j < 3; j++ {
			x.Set(i, j, float64((i*5+j*3)%7)-3)
		}
		y.Set(i, 0, float64(i%2))
	}
	write := func(name string, y *mat.Dense) string {
		p := filepath.Join(dir, name)
		if err := dataio.WriteNPZ(p, map[string]*mat.Dense{"X": x, "y": y}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stray := mat.DenseCopyOf(y)
	stray.Set(7, 0, 1e6)
	negative := mat.DenseCopyOf(y)
	negative.Set(4, 0, -1)
	fraction := mat.DenseCopyOf(y)
	fraction.Set(4, 0, 0.5)
	good, strayData := write("good.npz", y), write("stray.npz", stray)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"label 1e6 inferred", []string{"--data", strayData}, []string{"label 1000000 at row 7", "--classes"}},
		{"label 1e6 above --classes", []string{"--data", strayData, "--classes", "2"}, []string{"label 1000000 at row 7", "--classes 2"}},
		{"label 1 above --classes 1", []string{"--data", good, "--classes", "1"}, []string{"label 1 at row 1", "--classes 1"}},
		{"negative label", []string{"--data", write("neg.npz", negative)}, []string{"label 4"}},
		{"non-integer label", []string{"--data", write("frac.npz", fraction)}, []string{"label 4"}},
		{"negative --classes", []string{"--data", good, "--classes", "-3"}, []string{"--classes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".safetensors")
			args := append([]string{"train", "mlp", "--hidden", "4", "--epochs", "1", "--out", out}, tc.args...)
			code, _, stderr := cli(t, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("model %s written on bad labels", out)
			}
			if _, err := os.Stat(dataio.ManifestPath(out)); err == nil {
				t.Errorf("manifest written on bad labels")
			}
		})
	}
	// --classes above the labels' maximum sizes the output layer.
	out := filepath.Join(dir, "wide.safetensors")
	code, stdout, stderr := cli(t, "train", "mlp", "--data", good, "--hidden", "4", "--epochs", "1", "--classes", "5", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("--classes 5: exit %d: %s", code, stderr)
	}
	arch := decodeOne(t, stdout)["architecture"].([]any)
	if last := arch[len(arch)-1].(float64); last != 5 {
		t.Fatalf("--classes 5 built %v outputs", last)
	}
}
