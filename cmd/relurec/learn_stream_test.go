package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// .npy data larger than --max-memory are fitted on a random sample of
// their rows and certified on all of them: the same exact network as the
// in-memory run, the certificate counting every row; bad values anywhere in
// the files exit 2 and noise exits 3, writing nothing.
func TestLearnStreamsDataLargerThanMemory(t *testing.T) {
	dir := t.TempDir()
	x, y, teacher := genSmall(t, dir) // 20000 rows of d + m = 13: 2.08 MB
	out := filepath.Join(dir, "m.safetensors")
	code, stdout, stderr := cli(t, "--max-memory", "1MB", "learn", "twolayer", "--x", x, "--y", y, "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	l := decodeOne(t, stdout)
	st, _ := l["streamed"].(map[string]any)
	cert, _ := l["certificate"].(map[string]any)
	// The fit's sample is what 1 MB holds four times over: 1e6/(4·13·8).
	if st["rows"] != 20000.0 || st["sample_rows"] != 2403.0 || l["samples"] != 20000.0 {
		t.Fatalf("streamed %v, samples %v; want all 20000 rows certified from a sample of 2403", st, l["samples"])
	}
	if cert["met"] != true || cert["samples"] != 20000.0 {
		t.Fatalf("certificate %v; want met on 20000 rows", cert)
	}
	code, stdout, stderr = cli(t, "eval", "--model", out, "--truth", teacher, "--x", x, "--y", y, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if w, _ := decodeOne(t, stdout)["weights"].(map[string]any); w["max_rel_err"].(float64) > 1e-9 {
		t.Fatalf("weights %v; want the teacher's within 1e-9", w)
	}

	// A NaN in the last row, which the sample need not contain.
	X, err := dataio.ReadMatrix(x, "")
	if err != nil {
		t.Fatal(err)
	}
	X.Set(19999, 2, math.NaN())
	bad := filepath.Join(dir, "bad.npy")
	if err := dataio.WriteNPY(bad, X); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "m2.safetensors")
	code, _, stderr = cli(t, "--max-memory", "1MB", "learn", "twolayer", "--x", bad, "--y", y, "--out", out2)
	if code != exitBadInput || !strings.Contains(stderr, "X has NaN at row 19999, column 2") {
		t.Fatalf("NaN: exit %d, stderr %q; want 2 naming the row", code, stderr)
	}
	// Fewer rows in Y than in X.
	short := filepath.Join(dir, "short.npy")
	Y, err := dataio.ReadMatrix(y, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := dataio.WriteNPY(short, Y.Slice(0, 19000, 0, 5).(*mat.Dense)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cli(t, "--max-memory", "1MB", "learn", "twolayer", "--x", x, "--y", short, "--out", out2)
	if code != exitBadInput || !strings.Contains(stderr, "20000 rows but Y has 19000") {
		t.Fatalf("row mismatch: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Fatal("a model was written from bad data")
	}

	// Noisy outputs: not certified, exit 3, nothing written.
	nx, ny, _ := genSmall(t, t.TempDir(), "--noise-kind", "gaussian", "--noise", "0.05")
	code, _, stderr = cli(t, "--max-memory", "1MB", "learn", "twolayer", "--x", nx, "--y", ny, "--out", out2)
	if code != exitNotCertified {
		t.Fatalf("noisy: exit %d, stderr %q; want 3", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Fatal("a model was written from noisy data")
	}
}
