package dataio

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestNumpyInterop is the Go half of bench/numpy_roundtrip.py, which runs it
// with RELUREC_INTEROP_DIR set (it is skipped otherwise, so `go test` needs
// no Python). It reads every in_*.npy / in_*.npz (array "X") / in_*.csv file
// numpy wrote into that directory and writes each back as out_*.npy with
// WriteNPY, and writes go_matrix.npy and go_arrays.npz for numpy to load.
func TestNumpyInterop(t *testing.T) {
	dir := os.Getenv("RELUREC_INTEROP_DIR")
	if dir == "" {
		t.Skip("set RELUREC_INTEROP_DIR (bench/numpy_roundtrip.py does) to run")
	}
	m := mat.NewDense(3, 4, nil)
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			m.Set(i, j, float64(10*i+j)+0.125)
		}
	}
	m.Set(2, 3, math.Inf(-1))
	m.Set(2, 2, math.Copysign(0, -1))
	m.Set(1, 3, 1e-310)
	if err := WriteNPY(filepath.Join(dir, "go_matrix.npy"), m); err != nil {
		t.Fatal(err)
	}
	y := mat.NewDense(3, 1, []float64{-1, 0, 1})
	if err := WriteNPZ(filepath.Join(dir, "go_arrays.npz"), map[string]*mat.Dense{"X": m, "Y": y}); err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "in_") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		got, err := ReadMatrix(filepath.Join(dir, name), "X")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		out := "out_" + strings.TrimSuffix(strings.TrimPrefix(name, "in_"), filepath.Ext(name)) + ".npy"
		if err := WriteNPY(filepath.Join(dir, out), got); err != nil {
			t.Fatal(err)
		}
		r, c := got.Dims()
		t.Logf("%s → %s (%d×%d)", name, out, r, c)
	}
}
