package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// sameNetwork fails unless a and b have the same layers, bit for bit.
func sameNetwork(t *testing.T, label string, a, b *nn.MLP) {
	t.Helper()
	if len(a.Layers) != len(b.Layers) {
		t.Fatalf("%s: %d layers vs %d", label, len(a.Layers), len(b.Layers))
	}
	for i, la := range a.Layers {
		lb := b.Layers[i]
		if la.Act != lb.Act || (la.Bias == nil) != (lb.Bias == nil) || len(la.Bias) != len(lb.Bias) {
			t.Fatalf("%s: layer %d: act %q bias %v vs act %q bias %v", label, i, la.Act, la.Bias, lb.Act, lb.Bias)
		}
		for j := range la.Bias {
			if math.Float64bits(la.Bias[j]) != math.Float64bits(lb.Bias[j]) {
				t.Fatalf("%s: layer %d bias[%d]: %v vs %v", label, i, j, la.Bias[j], lb.Bias[j])
			}
		}
		r, c := la.Weight.Dims()
		if rb, cb := lb.Weight.Dims(); r != rb || c != cb {
			t.Fatalf("%s: layer %d weight %d×%d vs %d×%d", label, i, r, c, rb, cb)
		}
		for x := 0; x < r; x++ {
			for y := 0; y < c; y++ {
				if math.Float64bits(la.Weight.At(x, y)) != math.Float64bits(lb.Weight.At(x, y)) {
					t.Fatalf("%s: layer %d weight[%d,%d]: %v vs %v", label, i, x, y, la.Weight.At(x, y), lb.Weight.At(x, y))
				}
			}
		}
	}
}

// learn --out x.onnx writes the same network as --out x.safetensors (in F64
// and in F32), with a manifest; eval reads the ONNX file back.
func TestLearnOutONNX(t *testing.T) {
	dir := t.TempDir()
	x, y, teacher := genSmall(t, dir)
	learn := func(out string, extra ...string) {
		t.Helper()
		args := append([]string{"learn", "twolayer", "--x", x, "--y", y, "--hidden", "3", "--seed", "1", "--out", out, "--quiet"}, extra...)
		if code, _, errs := cli(t, args...); code != 0 {
			t.Fatalf("learn --out %s: exit %d: %s", out, code, errs)
		}
		if _, err := os.Stat(dataio.ManifestPath(out)); err != nil {
			t.Fatalf("no manifest next to %s: %v", out, err)
		}
	}
	for _, dtype := range []string{"f64", "f32"} {
		st := filepath.Join(dir, "m_"+dtype+".safetensors")
		ox := filepath.Join(dir, "m_"+dtype+".onnx")
		learn(st, "--dtype", dtype)
		learn(ox, "--dtype", dtype)
		want, _, err := modelfile.LoadModel(st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := modelfile.LoadONNX(ox)
		if err != nil {
			t.Fatalf("%s: %v", ox, err)
		}
		sameNetwork(t, dtype, got, want)
	}

	// The extension is case-insensitive.
	upper := filepath.Join(dir, "M.ONNX")
	learn(upper)
	if _, err := modelfile.LoadONNX(upper); err != nil {
		t.Fatalf("--out M.ONNX did not write ONNX: %v", err)
	}

	// eval reads .onnx for --model and --truth.
	code, out, errs := cli(t, "eval", "--model", filepath.Join(dir, "m_f64.onnx"), "--truth", teacher, "--x", x, "--y", y, "--json")
	if code != 0 {
		t.Fatalf("eval --model m.onnx: exit %d: %s", code, errs)
	}
	if r, ok := decodeOne(t, out)["residual"].(float64); !ok || r > 1e-8 {
		t.Fatalf("eval of the ONNX model: residual %v in %s", r, out)
	}
	code, _, errs = cli(t, "eval", "--model", filepath.Join(dir, "m_f64.safetensors"), "--truth", filepath.Join(dir, "m_f64.onnx"), "--quiet")
	if code != 0 {
		t.Fatalf("eval --truth m.onnx: exit %d: %s", code, errs)
	}
}

// --out with any other extension exits 2 before any work, naming the
// accepted formats, and writes nothing.
func TestModelOutUnsupportedFormat(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	for _, name := range []string{"m.pt", "m.npz", "model"} {
		out := filepath.Join(dir, name)
		code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--hidden", "3", "--out", out)
		if code != 2 {
			t.Fatalf("--out %s: exit %d, want 2: %s", name, code, errs)
		}
		if !strings.Contains(errs, ".safetensors") || !strings.Contains(errs, ".onnx") {
			t.Errorf("--out %s: the error does not name the accepted formats: %s", name, errs)
		}
		if ext := filepath.Ext(name); ext != "" && !strings.Contains(errs, `unsupported model format "`+ext+`"`) {
			t.Errorf("--out %s: the error does not name the format: %s", name, errs)
		}
		for _, p := range []string{out, dataio.ManifestPath(out)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("--out %s: %s was written", name, p)
			}
		}
	}
}
