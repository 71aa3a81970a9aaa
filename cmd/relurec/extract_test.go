package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// serveEnv, when set to a model file, makes the test binary a query server
// for extract --query-cmd: .npy queries on stdin, .npy answers on stdout.
// serveModeEnv "nan" answers with a NaN, "rows" with one row too few;
// "huge-rows" and "huge-cols" with a header announcing 2^27 rows (1 GiB) or
// columns, followed by zeros until it is killed; "linger" answers right but
// starts a "sleep 1000" and, at the end of its input, ignores SIGTERM and
// stays.
const (
	serveEnv     = "RELUREC_TEST_SERVE"
	serveModeEnv = "RELUREC_TEST_SERVE_MODE"
)

func serveModel(path, mode string) {
	net, _, err := loadNetwork(path)
	if err != nil {
		os.Exit(3)
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	if mode == "linger" {
		exec.Command("sleep", "1000").Start()
	}
	for answered := 0; ; answered++ {
		X, err := dataio.ReadNPYFrom(context.Background(), in)
		if err != nil { // end of input
			if mode == "linger" {
				signal.Ignore(syscall.SIGTERM)
				time.Sleep(time.Hour)
			}
			os.Exit(0)
		}
		stallServe(mode, answered)
		Y := net.Forward(X)
		switch mode {
		case "nan":
			Y.Set(0, 0, math.NaN())
		case "rows":
			r, c := Y.Dims()
			Y = mat.DenseCopyOf(Y.Slice(0, r-1, 0, c))
		case "huge-rows", "huge-cols":
			r, c := Y.Dims()
			if mode == "huge-rows" {
				r = 1 << 27
			} else {
				c = 1 << 27
			}
			out.Write(npyHeaderOf(r, c))
			for out.Flush() == nil {
				out.Write(make([]byte, 1<<16))
			}
			os.Exit(4)
		}
		if dataio.WriteNPYTo(out, Y) != nil || out.Flush() != nil {
			os.Exit(4)
		}
	}
}

// npyHeaderOf is the .npy header of an r×c float64 array (the bytes before
// its data), built by shape substitution in a 1×1 array's header padding.
func npyHeaderOf(r, c int) []byte {
	var b bytes.Buffer
	dataio.WriteNPYTo(&b, mat.NewDense(1, 1, nil))
	shape := fmt.Sprintf("(%d, %d), }", r, c)
	return bytes.Replace(b.Bytes()[:b.Len()-8], []byte("(1, 1), }"+strings.Repeat(" ", len(shape)-len("(1, 1), }"))), []byte(shape), 1)
}

// genTeacher writes a random depth-2 teacher with output biases (gen
// depth2 with the given flags) to dir/name and returns its path.
func genTeacher(t *testing.T, dir, name string, flags ...string) string {
	t.Helper()
	teacher := filepath.Join(dir, name)
	args := append([]string{"gen", "depth2", "--output-bias", "--n", "200", "--out", filepath.Join(dir, "unused.npz"), "--model-out", teacher, "--quiet"}, flags...)
	if code, _, errs := cli(t, args...); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	return teacher
}

// A network is extracted from queries alone — in-process
// from a model file, and from another process through --query-cmd — with
// its parameters within 1e-9 and the query count reported; a server that
// answers NaN or the wrong shape exits 2 writing nothing.
func TestExtractFromTeacherAndQueryCommand(t *testing.T) {
	dir := t.TempDir()
	teacher := genTeacher(t, dir, "teacher.onnx", "--d", "12", "--m", "4", "--outputs", "3", "--seed", "9")
	out := filepath.Join(dir, "x.safetensors")
	code, stdout, errs := cli(t, "extract", "--teacher", teacher, "--out", out, "--json")
	if code != 0 {
		t.Fatalf("extract --teacher: exit %d: %s", code, errs)
	}
	res := decodeOne(t, stdout)
	if e := res["weights"].(map[string]any)["max_err"].(float64); e > 1e-9 || res["queries"].(float64) <= 0 || res["units"].(float64) != 4 {
		t.Fatalf("extract --teacher: %v", res)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveEnv, teacher)
	served := filepath.Join(dir, "served.safetensors")
	code, stdout, errs = cli(t, "extract", "--query-cmd", exe, "--d", "12", "--out", served, "--json")
	if code != 0 {
		t.Fatalf("extract --query-cmd: exit %d: %s", code, errs)
	}
	if r := decodeOne(t, stdout); r["certificate"].(map[string]any)["met"] != true || r["units"].(float64) != 4 {
		t.Fatalf("extract --query-cmd: %v", r)
	}
	code, stdout, errs = cli(t, "eval", "--model", served, "--truth", teacher, "--json")
	if code != 0 || decodeOne(t, stdout)["weights"].(map[string]any)["max_err"].(float64) > 1e-9 {
		t.Fatalf("eval of the served extraction: exit %d %s %s", code, stdout, errs)
	}
	for mode, want := range map[string]string{"nan": "finite", "rows": "expected"} {
		t.Setenv(serveModeEnv, mode)
		bad := filepath.Join(dir, mode+".safetensors")
		code, _, errs := cli(t, "extract", "--query-cmd", exe, "--d", "12", "--out", bad)
		if code != exitBadInput || !strings.Contains(errs, want) {
			t.Errorf("server answering %s: exit %d, %s", mode, code, errs)
		}
		if _, err := os.Stat(bad); err == nil {
			t.Errorf("server answering %s: %s written", mode, bad)
		}
	}
	t.Setenv(serveModeEnv, "")
	if code, _, errs := cli(t, "extract", "--out", out); code != exitBadInput || !strings.Contains(errs, "--teacher") {
		t.Errorf("no model: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, "extract", "--query-cmd", exe, "--out", out); code != exitBadInput || !strings.Contains(errs, "--d") {
		t.Errorf("--query-cmd without --d: exit %d, %s", code, errs)
	}
}

// The Python server printed in `relurec extract --help` works as printed
// (numpy's read_array on a raw pipe does not, so the help's wrapper is
// load-bearing): the snippet, with a model() that evaluates the teacher's
// network, serves an extraction that is certified. Skipped without a
// python3 that imports numpy.
func TestExtractHelpPythonServer(t *testing.T) {
	py := ""
	for _, c := range []string{os.Getenv("RELUREC_PYTHON"), "python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(c); c != "" && err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with numpy (Debian: apt-get install python3-numpy)")
	}
	start := strings.Index(extractLong, "    import sys")
	end := strings.Index(extractLong, "flush()\n")
	if start < 0 || end < start {
		t.Fatal("extract --help no longer shows the Python server")
	}
	var snippet strings.Builder
	for _, line := range strings.Split(extractLong[start:end+len("flush()")], "\n") {
		snippet.WriteString(strings.TrimPrefix(line, "    ") + "\n")
		if strings.HasPrefix(line, "    from numpy.lib import format") {
			// The teacher: 3 inputs, 2 units, 2 outputs, biases on.
			snippet.WriteString("W = np.array([[1.0, -2.0, 0.5], [0.3, 0.7, -1.1]]); b = np.array([0.2, -0.4])\n")
			snippet.WriteString("A = np.array([[1.5, -0.5], [0.25, 2.0]]); c = np.array([0.1, -0.3])\n")
			snippet.WriteString("def model(X): return np.maximum(X @ W.T + b, 0) @ A.T + c\n")
		}
	}
	dir := t.TempDir()
	server := filepath.Join(dir, "serve.py")
	if err := os.WriteFile(server, []byte(snippet.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.safetensors")
	code, stdout, errs := cli(t, "extract", "--query-cmd", py+" "+server, "--d", "3", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("extract with the help's server: exit %d: %s\n%s", code, errs, snippet.String())
	}
	if r := decodeOne(t, stdout); r["certificate"].(map[string]any)["met"] != true || r["units"].(float64) != 2 {
		t.Fatalf("extract with the help's server: %v", r)
	}
}

// An extraction whose certificate is not met (here a query budget too
// small to find every unit) exits 3, says what it found and writes
// nothing; --approximate writes the partial model and still exits 3.
func TestExtractNotCertifiedExits3(t *testing.T) {
	dir := t.TempDir()
	teacher := genTeacher(t, dir, "teacher.safetensors", "--d", "10", "--m", "8", "--outputs", "2", "--seed", "3")
	out := filepath.Join(dir, "x.safetensors")
	// 600 queries find 6 of the 8 units on the first line.
	args := []string{"extract", "--teacher", teacher, "--hidden", "8", "--max-queries", "600", "--out", out}
	code, stdout, errs := cli(t, append(args, "--json")...)
	if code != exitNotCertified || !strings.Contains(errs, "found 6 hidden units of the 8 given by --hidden") || !strings.Contains(errs, "--approximate") {
		t.Fatalf("budget-stopped extraction: exit %d, want %d; %s", code, exitNotCertified, errs)
	}
	res := decodeOne(t, stdout)
	if res["written"] != false || res["certificate"].(map[string]any)["met"] != false || res["queries"].(float64) > 600 || res["peak_memory_bytes"].(float64) <= 0 {
		t.Errorf("report: %v", res)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written without --approximate", out)
	}
	code, stdout, errs = cli(t, append(args, "--approximate", "--json")...)
	if code != exitNotCertified || !strings.Contains(errs, "was written") {
		t.Fatalf("--approximate: exit %d, %s", code, errs)
	}
	if res := decodeOne(t, stdout); res["written"] != true {
		t.Errorf("--approximate report: %v", res)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("--approximate: %v", err)
	}
	if _, err := os.Stat(dataio.ManifestPath(out)); err != nil {
		t.Errorf("--approximate: manifest: %v", err)
	}
	// The human table says how many of the units were found.
	if code, stdout, _ = cli(t, args...); code != exitNotCertified || !strings.Contains(stdout, "6 of 8 found") || !strings.Contains(stdout, "peak resident") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}
}

// A teacher with two hidden layers is extracted layer by layer, its
// parameters within 1e-8 after alignment and the units and queries per
// layer reported; the same through --query-cmd with --hidden giving the
// depth; a --hidden that contradicts the file's depth exits 2, and a
// teacher that is not Linear–ReLU–…–Linear is refused with exit 2.
func TestExtractTwoHiddenLayersCLI(t *testing.T) {
	dir := t.TempDir()
	net, err := nn.NewMLP([]int{12, 6, 4, 3}, 5)
	if err != nil {
		t.Fatal(err)
	}
	teacher := filepath.Join(dir, "deep.safetensors")
	if err := modelfile.SaveModel(teacher, net, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.safetensors")
	code, stdout, errs := cli(t, "extract", "--teacher", teacher, "--out", out, "--json")
	if code != 0 {
		t.Fatalf("extract: exit %d: %s", code, errs)
	}
	res := decodeOne(t, stdout)
	layers, _ := res["layers"].([]any)
	lw, _ := res["layer_weights"].(map[string]any)
	if len(layers) != 2 || lw == nil || lw["max_rel"].(float64) > 1e-8 || res["certificate"].(map[string]any)["met"] != true {
		t.Fatalf("report: %v", res)
	}
	for i, want := range []float64{6, 4} {
		l := layers[i].(map[string]any)
		if l["units"].(float64) != want || l["queries"].(float64) <= 0 || l["passed"] != true {
			t.Errorf("layer %d: %v", i+1, l)
		}
	}
	got, _, err := loadNetwork(out)
	if err != nil || len(got.Layers) != 3 {
		t.Fatalf("written model: %v, %v", got, err)
	}
	// The human table: units and queries per layer.
	if code, stdout, _ = cli(t, "extract", "--teacher", teacher, "--out", out); code != 0 || !strings.Contains(stdout, "6, 4 per layer") || !strings.Contains(stdout, "layer 2") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}
	// Served by another process: the depth from --hidden.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveEnv, teacher)
	code, stdout, errs = cli(t, "extract", "--query-cmd", self, "--d", "12", "--hidden", "6,4", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("--query-cmd: exit %d: %s", code, errs)
	}
	if res := decodeOne(t, stdout); res["certificate"].(map[string]any)["met"] != true || len(res["layers"].([]any)) != 2 {
		t.Errorf("--query-cmd report: %v", res)
	}
	// A budget too small: exit 3, the units found per layer, nothing
	// written.
	none := filepath.Join(dir, "none.safetensors")
	if code, _, errs = cli(t, "extract", "--teacher", teacher, "--max-queries", "600", "--out", none); code != exitNotCertified || !strings.Contains(errs, "hidden units per layer") {
		t.Errorf("budget: exit %d, %s", code, errs)
	}
	if _, err := os.Stat(none); err == nil {
		t.Errorf("%s written", none)
	}
	if code, _, errs = cli(t, "extract", "--teacher", teacher, "--hidden", "6", "--out", out); code != 2 || !strings.Contains(errs, "--hidden") {
		t.Errorf("--hidden with the wrong depth: exit %d, %s", code, errs)
	}
	if code, _, errs = cli(t, "extract", "--teacher", teacher, "--hidden", "6,x", "--out", out); code != 2 || !strings.Contains(errs, "--hidden") {
		t.Errorf("--hidden 6,x: exit %d, %s", code, errs)
	}
	net.Layers[1].Act = nn.Identity
	bad := filepath.Join(dir, "linear.safetensors")
	if err := modelfile.SaveModel(bad, net, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = cli(t, "extract", "--teacher", bad, "--out", out); code != 2 || !strings.Contains(errs, "ReLU") {
		t.Errorf("non-ReLU teacher: exit %d, %s", code, errs)
	}
}

// A deeper network that does not certify (here: a certificate tolerance
// below any residual) is written with --approximate (exit 3 either way)
// and not without it.
func TestExtractDeepApproximateWritten(t *testing.T) {
	dir := t.TempDir()
	teacher := saveTeacher(t, dir, []int{24, 12, 8, 6, 3}, 3)
	out := filepath.Join(dir, "x.safetensors")
	args := []string{"extract", "--teacher", teacher, "--cert-tol", "1e-30", "--seed", "3", "--out", out}
	if code, _, errs := cli(t, args...); code != exitNotCertified {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s written without --approximate", out)
	}
	if code, _, errs := cli(t, append(args, "--approximate")...); code != exitNotCertified {
		t.Fatalf("--approximate: exit %d: %s", code, errs)
	}
	got, _, err := loadNetwork(out)
	if err != nil || len(got.Layers) != 4 {
		t.Fatalf("written model: %v, %v", got, err)
	}
}

// A --max-queries too small for any extraction exits 2 naming the flag,
// not the library's option.
func TestExtractBudgetTooSmallNamesFlag(t *testing.T) {
	dir := t.TempDir()
	teacher := saveTeacher(t, dir, []int{12, 6, 3}, 1)
	code, _, errs := cli(t, "extract", "--teacher", teacher, "--max-queries", "10", "--out", filepath.Join(dir, "x.safetensors"))
	if code != exitBadInput || !strings.Contains(errs, "--max-queries 10") || strings.Contains(errs, "MaxQueries") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// saveTeacher writes an nn.NewMLP teacher of the given sizes and seed to
// dir as float64 safetensors and returns its path.
func saveTeacher(t *testing.T, dir string, sizes []int, seed uint64) string {
	t.Helper()
	net, err := nn.NewMLP(sizes, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("teacher-%d.safetensors", len(sizes)))
	if err := modelfile.SaveModel(path, net, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	return path
}
