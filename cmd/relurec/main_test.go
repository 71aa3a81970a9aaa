package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/experiment"
	"github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/twolayer"
)

// cli runs relurec in-process with args and returns the exit status, stdout
// and stderr. Every run checks that what the command printed names no
// library option as Go (libraryOption): its user reads flags.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	for _, s := range []string{out.String(), errb.String()} {
		if ref := libraryOption.FindString(s); ref != "" {
			t.Errorf("%v printed the library option %q where its flag belongs:\n%s", args, ref, s)
		}
	}
	return code, out.String(), errb.String()
}

// libraryOption matches a library message's reference to an options field
// ("Options.Hidden", "WorstCaseOptions.Force").
var libraryOption = regexp.MustCompile(`\b\w*Options\.[A-Z]\w*`)

// decodeOne checks that s is exactly one JSON object and decodes it.
func decodeOne(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, s)
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON value:\n%s", s)
	}
	return v
}

// allCommands walks the command tree.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, allCommands(s)...)
		}
	}
	return out
}

func TestHelpEveryCommand(t *testing.T) {
	root := newRootCmd(&app{})
	cmds := allCommands(root)
	if len(cmds) < 9 {
		t.Fatalf("only %d commands in the tree", len(cmds))
	}
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"relurec"}, path...), "_"), func(t *testing.T) {
			code, out, errs := cli(t, append(path, "--help")...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if !strings.Contains(out, "Examples:") || !strings.Contains(out, "relurec") {
				t.Fatalf("help lacks an Examples block:\n%s", out)
			}
			if !strings.Contains(out, "--json") {
				t.Fatalf("help does not list --json:\n%s", out)
			}
		})
	}
}

func TestFlagsAreLongHyphenatedAndSeeded(t *testing.T) {
	root := newRootCmd(&app{})
	for _, c := range allCommands(root) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != strings.ToLower(f.Name) || strings.Contains(f.Name, "_") || len(f.Name) < 1 {
				t.Errorf("%s: flag --%s is not lower-case hyphenated", c.CommandPath(), f.Name)
			}
			if f.Shorthand != "" && f.Name != "help" {
				t.Errorf("%s: flag --%s has a shorthand -%s", c.CommandPath(), f.Name, f.Shorthand)
			}
		})
	}
	for _, path := range [][]string{{"demo"}, {"gen", "twolayer"}, {"learn", "twolayer"}, {"experiment", "run"}} {
		c, _, err := root.Find(path)
		if err != nil || c.Flags().Lookup("seed") == nil {
			t.Errorf("%v has no --seed flag", path)
		}
	}
}

func TestErrBadInput(t *testing.T) {
	for _, err := range []error{
		usageErrorf("bad flag"),
		inputErrorf("bad shape"),
		fmt.Errorf("reading X: %w", dataio.ErrFormat),
		fmt.Errorf("x: %w", dataio.ErrNonFinite),
		fmt.Errorf("x: %w", dataio.ErrNotFound),
		fmt.Errorf("x: %w", dataio.ErrOutputIsInput),
		fmt.Errorf("x: %w", modelfile.ErrModelFile),
		fmt.Errorf("x: %w", synth.ErrConfig),
		fmt.Errorf("fit: %w", twolayer.ErrInput),
		fmt.Errorf("x: %w", experiment.ErrUnknown),
		fmt.Errorf("x: %w", os.ErrNotExist),
		fmt.Errorf("x: %w", os.ErrPermission),
	} {
		if !errBadInput(err) {
			t.Errorf("errBadInput(%v) = false, want true", err)
		}
	}
	for _, err := range []error{nil, errors.New("numerical failure"), context.Canceled, fmt.Errorf("wrapped: %w", io.ErrShortWrite)} {
		if errBadInput(err) {
			t.Errorf("errBadInput(%v) = true, want false", err)
		}
	}
}

func TestUsageExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // substring of stderr
	}{
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"demo", "--no-such-flag"}, "unknown flag"},
		{[]string{"demo", "--d", "abc"}, "invalid argument"},
		{[]string{"demo", "--k", "30"}, "--k 30 exceeds --d 20"},
		{[]string{"demo", "extra-arg"}, "unknown command"},
		{[]string{"gen"}, "needs a subcommand"},
		{[]string{"gen", "threelayer"}, "unknown subcommand"},
		{[]string{"gen", "twolayer", "--n", "100"}, "no output given"},
		{[]string{"gen", "twolayer", "--out", filepath.Join(dir, "d.txt")}, "expected a .npz"},
		{[]string{"gen", "twolayer", "--noise", "-1", "--out", filepath.Join(dir, "d.npz")}, "--noise"},
		{[]string{"gen", "twolayer", "--out", filepath.Join(dir, "missing", "d.npz")}, "does not exist"},
		{[]string{"learn", "twolayer", "--out", filepath.Join(dir, "m.safetensors")}, "no data given"},
		{[]string{"learn", "twolayer", "--x", filepath.Join(dir, "nope.npy"), "--y", filepath.Join(dir, "nope2.npy"), "--out", filepath.Join(dir, "m.safetensors")}, "no such file"},
		{[]string{"learn", "twolayer", "--data", "d.npz", "--route", "fast", "--out", filepath.Join(dir, "m.safetensors")}, "--route"},
		{[]string{"learn", "twolayer", "--data", "d.npz", "--start", "moments", "--out", filepath.Join(dir, "m.safetensors")}, "--start must be auto, parity or tensor"},
		{[]string{"learn", "twolayer", "--data", "d.npz"}, "--out is required"},
		{[]string{"eval", "--model", filepath.Join(dir, "nope.safetensors"), "--truth", filepath.Join(dir, "nope.safetensors")}, "no such file"},
		{[]string{"eval", "--model", "a.safetensors"}, "nothing to evaluate"},
		{[]string{"experiment", "run"}, "exactly one experiment name"},
		{[]string{"experiment", "run", "no-such-experiment"}, "unknown experiment"},
	} {
		code, out, errs := cli(t, tc.args...)
		if code != exitBadInput {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, code, errs)
			continue
		}
		if out != "" {
			t.Errorf("%v: stdout should be empty on error, got %q", tc.args, out)
		}
		if !strings.HasPrefix(errs, "relurec: ") || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: stderr %q, want 'relurec: …%s…'", tc.args, errs, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed commands left files: %v", entries)
	}
}

func TestVersionAndRootHelp(t *testing.T) {
	code, out, _ := cli(t, "--version")
	if code != 0 || !strings.Contains(out, relurecVersion()) || !strings.Contains(out, "BLAS: "+blasbackend.Name()) {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
	code, out, _ = cli(t)
	if code != 0 || !strings.Contains(out, "demo") {
		t.Fatalf("bare relurec: exit %d, %q", code, out)
	}
}

func TestExperimentList(t *testing.T) {
	code, out, _ := cli(t, "experiment", "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	v := decodeOne(t, out)
	if !strings.Contains(fmt.Sprint(v["experiments"]), "twolayer-samples") {
		t.Fatalf("list lacks twolayer-samples: %v", v)
	}
}

func TestFiniteJSON(t *testing.T) {
	type inner struct {
		A float64 `json:"a"`
		B float64 `json:"b,omitempty"`
	}
	v := struct {
		X  float64            `json:"x"`
		Y  []float64          `json:"y"`
		In inner              `json:"in"`
		M  map[string]float64 `json:"m"`
		P  *float64           `json:"p,omitempty"`
		S  []string           `json:"s,omitempty"`
		H  string             `json:"-"`
	}{X: math.Inf(1), Y: []float64{1, math.NaN()}, In: inner{A: 2}, M: map[string]float64{"z": math.Inf(-1)}, S: []string{}, H: "hidden"}
	b, err := json.Marshal(jsonsafe.Finite(v))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"x":null,"y":[1,null],"in":{"a":2},"m":{"z":null}}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// writeNPY writes m to dir/name and returns the path.
func writeNPY(t *testing.T, dir, name string, m *mat.Dense) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := dataio.WriteNPY(p, m); err != nil {
		t.Fatal(err)
	}
	return p
}

// genSmall generates a small noiseless problem into dir and returns the
// paths of X.npy, Y.npy and the teacher.
func genSmall(t *testing.T, dir string, extra ...string) (x, y, teacher string) {
	t.Helper()
	x, y, teacher = filepath.Join(dir, "X.npy"), filepath.Join(dir, "Y.npy"), filepath.Join(dir, "teacher.safetensors")
	args := append([]string{"gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--seed", "4",
		"--x", x, "--y", y, "--model-out", teacher}, extra...)
	if code, _, errs := cli(t, args...); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	return x, y, teacher
}

func TestBadDataExitTwoAndNoOutput(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	X, err := dataio.ReadMatrix(x, "")
	if err != nil {
		t.Fatal(err)
	}
	Y, err := dataio.ReadMatrix(y, "")
	if err != nil {
		t.Fatal(err)
	}
	n, d := X.Dims()

	// Mismatched rows.
	short := writeNPY(t, dir, "Xshort.npy", mat.DenseCopyOf(X.Slice(0, n-1, 0, d)))
	// NaN in X.
	nanX := mat.DenseCopyOf(X)
	nanX.Set(17, 3, math.NaN())
	nanPath := writeNPY(t, dir, "Xnan.npy", nanX)
	// Corrupt file.
	corrupt := filepath.Join(dir, "corrupt.npy")
	if err := os.WriteFile(corrupt, []byte("\x93NUMPY garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Y with a single output column: k=3 > min(d, m) = 1.
	y1 := writeNPY(t, dir, "Y1.npy", mat.DenseCopyOf(Y.Slice(0, n, 0, 1)))
	// An .npz without a "Y" array.
	onlyX := filepath.Join(dir, "onlyx.npz")
	if err := dataio.WriteNPZ(onlyX, map[string]*mat.Dense{"X": X}); err != nil {
		t.Fatal(err)
	}
	// An unreadable (directory) input.
	sub := filepath.Join(dir, "adir.npy")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "model.safetensors")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mismatched rows", []string{"--x", short, "--y", y}, "rows"},
		{"NaN in X", []string{"--x", nanPath, "--y", y}, "NaN"},
		{"corrupt file", []string{"--x", corrupt, "--y", y}, "corrupt.npy"},
		// A named route keeps the two-layer learner (the front door would
		// take one output to the depth-2 learner).
		{"k > min(d,m)", []string{"--x", x, "--y", y1, "--hidden", "3", "--route", "exact"}, "--route fpt, or use the depth-2 learner"},
		{"directory as input", []string{"--x", sub, "--y", y}, "adir.npy"},
		{"npz member missing", []string{"--data", onlyX}, "Y"},
	} {
		args := append([]string{"learn", "twolayer", "--out", out}, tc.args...)
		code, stdout, errs := cli(t, args...)
		if code != exitBadInput {
			t.Errorf("%s: exit %d, want 2; stderr %q", tc.name, code, errs)
		}
		if stdout != "" {
			t.Errorf("%s: stdout %q on error", tc.name, stdout)
		}
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%s: stderr %q lacks %q", tc.name, errs, tc.want)
		}
		for _, p := range []string{out, dataio.ManifestPath(out)} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("%s: %s was written despite the error", tc.name, p)
			}
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

func TestOutputEqualsInputRefused(t *testing.T) {
	dir := t.TempDir()
	x, y, teacher := genSmall(t, dir)
	before, err := dataio.DigestFile(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{x, y, filepath.Join(dir, ".", "X.npy")} {
		code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", out)
		if code != exitBadInput || !strings.Contains(errs, "overwrite an input") {
			t.Fatalf("--out %s: exit %d, stderr %q", out, code, errs)
		}
	}
	after, _ := dataio.DigestFile(x)
	if before != after {
		t.Fatal("input changed")
	}
	// gen refuses two identical outputs.
	code, _, errs := cli(t, "gen", "twolayer", "--n", "2000", "--x", x, "--y", x)
	if code != exitBadInput || !strings.Contains(errs, "same file") {
		t.Fatalf("gen --x == --y: exit %d, %q", code, errs)
	}
	_ = teacher
}

// TestRoundTrip is the newcomer's path: gen → learn → eval on a small
// noiseless problem, which must be recovered exactly.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.npz")
	teacher := filepath.Join(dir, "teacher.safetensors")
	code, out, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--seed", "7",
		"--out", data, "--model-out", teacher, "--json")
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	g := decodeOne(t, out)
	if fmt.Sprint(g["x_shape"]) != "[20000 8]" || fmt.Sprint(g["y_shape"]) != "[20000 5]" {
		t.Fatalf("gen shapes: %v", g)
	}
	for _, p := range []string{data, teacher, dataio.ManifestPath(data), dataio.ManifestPath(teacher)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("gen did not write %s", p)
		}
	}

	model := filepath.Join(dir, "model.safetensors")
	code, out, errs = cli(t, "learn", "twolayer", "--data", data, "--hidden", "3", "--seed", "1", "--out", model, "--json")
	if code != 0 {
		t.Fatalf("learn: exit %d: %s", code, errs)
	}
	if errs != "" {
		t.Errorf("learn --json wrote to stderr: %q", errs)
	}
	l := decodeOne(t, out)
	cert, _ := l["certificate"].(map[string]any)
	if cert["met"] != true {
		t.Fatalf("noiseless learn did not certify exact recovery: %v", l)
	}
	_, meta, err := modelfile.LoadModel(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"route", "certificate_residual", "seed", "relurec_version"} {
		if meta[k] == "" {
			t.Errorf("model metadata lacks %q: %v", k, meta)
		}
	}
	var man map[string]any
	b, err := os.ReadFile(dataio.ManifestPath(model))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	if ins, _ := man["inputs"].([]any); len(ins) != 1 {
		t.Errorf("manifest inputs: %v", man["inputs"])
	}

	code, out, errs = cli(t, "eval", "--model", model, "--truth", teacher, "--data", data, "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	e := decodeOne(t, out)
	w, _ := e["weights"].(map[string]any)
	if w == nil {
		t.Fatalf("eval JSON lacks weights: %v", e)
	}
	var maxRel float64
	for k, v := range w {
		if strings.EqualFold(k, "MaxRelErr") || k == "max_rel_err" {
			maxRel, _ = v.(float64)
		}
	}
	if !(maxRel <= 1e-9) {
		t.Fatalf("round trip max relative error %v > 1e-9: %v", maxRel, w)
	}
	if r, _ := e["residual"].(float64); !(r <= 1e-9) {
		t.Fatalf("residual %v", e["residual"])
	}

	// The human table mentions the route and the certificate.
	code, out, _ = cli(t, "learn", "twolayer", "--data", data, "--out", model, "--quiet")
	if code != 0 || !strings.Contains(out, "route") || !strings.Contains(out, "certificate") {
		t.Fatalf("learn table: exit %d\n%s", code, out)
	}
}

func TestGenDirectoryAndFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	outDir := filepath.Join(dir, "set") + string(filepath.Separator)
	code, _, errs := cli(t, "gen", "twolayer", "--d", "4", "--k", "2", "--m", "3", "--n", "500", "--noise", "0.1", "--out", outDir)
	if code != 0 {
		t.Fatalf("gen to dir: exit %d: %s", code, errs)
	}
	for _, f := range []string{"X.npy", "Y.npy", "X.npy.manifest.json", "Y.npy.manifest.json"} {
		if _, err := os.Stat(filepath.Join(outDir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	// --model-out into a missing directory fails before writing anything.
	d2 := filepath.Join(dir, "d2.npz")
	code, _, _ = cli(t, "gen", "twolayer", "--n", "500", "--out", d2, "--model-out", filepath.Join(dir, "no", "t.safetensors"))
	if code != exitBadInput {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(d2); err == nil {
		t.Fatal("data written although the model output was invalid")
	}
}

// --start tensor runs the paper's start alone, --start parity the parity
// start first; the default starts from the zero-set start. All are exact,
// and the JSON diagnostics say which ran.
func TestLearnStartFlag(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--out", data); code != 0 {
		t.Fatalf("gen: %s", errs)
	}
	for _, c := range []struct{ flag, want string }{{"auto", "zero-set"}, {"parity", "parity"}, {"tensor", "tensor"}} {
		code, out, errs := cli(t, "learn", "twolayer", "--data", data, "--start", c.flag, "--json", "--out", filepath.Join(dir, c.flag+".safetensors"))
		if code != 0 {
			t.Fatalf("--start %s: exit %d: %s", c.flag, code, errs)
		}
		v := decodeOne(t, out)
		diag, _ := v["diagnostics"].(map[string]any)
		cert, _ := v["certificate"].(map[string]any)
		if diag["start"] != c.want || cert["met"] != true {
			t.Errorf("--start %s: diagnostics.start %v, certificate %v; want %q and met", c.flag, diag["start"], cert, c.want)
		}
	}
}

func TestExactRouteFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "noisy.npz")
	code, _, errs := cli(t, "gen", "twolayer", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--noise", "0.2", "--out", data)
	if code != 0 {
		t.Fatalf("gen: %s", errs)
	}
	out := filepath.Join(dir, "m.safetensors")
	code, stdout, errs := cli(t, "learn", "twolayer", "--data", data, "--hidden", "3", "--route", "exact", "--out", out)
	if code == 0 {
		t.Fatalf("--route exact on noisy data succeeded:\n%s", stdout)
	}
	if code != exitNotCertified {
		t.Errorf("exit %d, want 3 (not certified, not bad input); stderr %q", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("model written although learn failed")
	}
}

func TestDemoSmallJSON(t *testing.T) {
	code, out, errs := cli(t, "demo", "--d", "8", "--k", "3", "--m", "5", "--n", "20000", "--json")
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errs)
	}
	if errs != "" {
		t.Errorf("demo --json wrote to stderr: %q", errs)
	}
	v := decodeOne(t, out)
	if v["route"] == "" || v["certificate"] == nil {
		t.Fatalf("demo JSON: %v", v)
	}
	code, out, _ = cli(t, "demo", "--d", "8", "--k", "3", "--m", "5", "--n", "20000")
	if code != 0 || !strings.Contains(out, "max relative weight error") || !strings.Contains(out, "recovered V row") {
		t.Fatalf("demo table:\n%s", out)
	}
}

// TestExitCodeFollowsErrorKind: a package the CLI has never heard of exits 2
// for its bad-input errors as long as it uses the shared kind, and 1 for its
// other failures.
func TestExitCodeFollowsErrorKind(t *testing.T) {
	newPkgBad := errs.New("newpkg: width must be positive", errs.ErrInput)
	newPkgFail := errs.New("newpkg: solver diverged", nil)
	if !errBadInput(fmt.Errorf("learning: %w", newPkgBad)) {
		t.Error("an errs.ErrInput sentinel of an unknown package is not bad input")
	}
	if errBadInput(fmt.Errorf("learning: %w", newPkgFail)) {
		t.Error("a failure without the ErrInput kind was classified as bad input")
	}
	if !errBadInput(errs.Inputf("k = %d is negative", -1)) {
		t.Error("errs.Inputf is not bad input")
	}
}

// Options rejected by a library's Validate reach the user as usage errors:
// exit 2, the flag named (not the option field), and the --help hint.
func TestOptionsValidateErrorsNameFlags(t *testing.T) {
	dir := t.TempDir()
	y := filepath.Join(dir, "Y.npy")
	out := filepath.Join(dir, "A.npy")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"learn", "generative", "--y", y, "--rank", "0", "--out", out}, "--rank (the rank k) must be ≥ 1"},
		{[]string{"learn", "generative", "--y", y, "--rank", "2", "--solver", "sgd", "--out", out}, "--solver must be als or admm"},
		{[]string{"learn", "generative", "--y", y, "--rank", "2", "--gamma", "-1", "--out", out}, "--gamma -1 must be finite"},
		{[]string{"recover", "latent", "--a", y, "--v", y, "--solver", "cg", "--out", out}, "--solver must be ssn, bcd or fista"},
		{[]string{"recover", "latent", "--a", y, "--v", y, "--delta", "-1", "--out", out}, "--delta -1 (the noise bound δ)"},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		if code != exitBadInput || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help") || strings.Contains(stderr, "Options.") {
			t.Errorf("%v: exit %d, stderr %q (want 2, %q and the --help hint)", tc.args, code, stderr, tc.want)
		}
	}
}
