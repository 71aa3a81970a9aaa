package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/generative"
	"github.com/relurec/relurec/robust"
)

func TestGenerativeAndRecoverCLI(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen.npz")
	if code, _, errs := cli(t, "gen", "generative", "--d", "40", "--k", "2", "--n", "200", "--bias", "gaussian:0.5,1", "--seed", "3", "--out", gen); code != 0 {
		t.Fatalf("gen generative: exit %d: %s", code, errs)
	}
	code, out, errs := cli(t, "learn", "generative", "--y", gen, "--rank", "2", "--truth", gen, "--bias", "gaussian:0.5,1",
		"--out", filepath.Join(dir, "A.npy"), "--m-out", filepath.Join(dir, "fit.npz"), "--json")
	if code != 0 {
		t.Fatalf("learn generative: exit %d: %s", code, errs)
	}
	v := decodeOne(t, out)
	if r, ok := v["sin_theta_restricted"].(float64); !ok || r > 1e-4 {
		t.Errorf("restricted sinΘ %v", v["sin_theta_restricted"])
	}
	basis, err := dataio.ReadMatrix(filepath.Join(dir, "A.npy"), "")
	if err != nil || basis.RawMatrix().Rows != 40 || basis.RawMatrix().Cols != 2 {
		t.Fatalf("basis: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "A.npy.manifest.json")); err != nil {
		t.Error("no manifest next to the basis")
	}

	rob := filepath.Join(dir, "rob.npz")
	if code, _, errs := cli(t, "gen", "robust", "--d", "1000", "--k", "5", "--n", "6", "--s", "20", "--seed", "4", "--out", rob); code != 0 {
		t.Fatalf("gen robust: exit %d: %s", code, errs)
	}
	code, out, errs = cli(t, "recover", "latent", "--a", rob, "--v", rob, "--truth", rob, "--bias", "gaussian:0,0.5", "--rescale",
		"--out", filepath.Join(dir, "C.npy"), "--e-out", filepath.Join(dir, "E.npy"), "--json")
	if code != 0 {
		t.Fatalf("recover latent: exit %d: %s", code, errs)
	}
	v = decodeOne(t, out)
	if v["all_certified"] != true || v["mean_error"].(float64) > 0.3 {
		t.Errorf("recover: %v", v)
	}
	C, _ := dataio.ReadMatrix(filepath.Join(dir, "C.npy"), "")
	if r, c := C.Dims(); r != 6 || c != 5 {
		t.Errorf("C is %d×%d", r, c)
	}
	// A fixed λ and the human table.
	code, out, _ = cli(t, "recover", "latent", "--a", rob, "--v", rob, "--lambda", "0.002", "--out", filepath.Join(dir, "C2.npy"))
	if code != 0 || !strings.Contains(out, "rule lambda") {
		t.Errorf("fixed λ: exit %d\n%s", code, out)
	}
}

func TestGenerativeBadInput(t *testing.T) {
	dir := t.TempDir()
	in := t.TempDir()
	y := mat.NewDense(30, 10, nil)
	for i := range y.RawMatrix().Data {
		y.RawMatrix().Data[i] = math.Max(math.Sin(float64(i)), 0)
	}
	yp := filepath.Join(in, "Y.npy")
	dataio.WriteNPY(yp, y)
	yNaN := mat.DenseCopyOf(y)
	yNaN.Set(2, 2, math.NaN())
	nanp := filepath.Join(in, "nan.npy")
	dataio.WriteNPY(nanp, yNaN)
	yNeg := mat.DenseCopyOf(y)
	yNeg.Set(1, 1, -3)
	negp := filepath.Join(in, "neg.npy")
	dataio.WriteNPY(negp, yNeg)
	a := mat.NewDense(12, 3, nil)
	for i := range a.RawMatrix().Data {
		a.RawMatrix().Data[i] = math.Cos(float64(i * i))
	}
	ap := filepath.Join(in, "A.npy")
	dataio.WriteNPY(ap, a)
	wide := mat.NewDense(10, 12, nil)
	for i := range wide.RawMatrix().Data {
		wide.RawMatrix().Data[i] = math.Cos(float64(3 * i))
	}
	wp := filepath.Join(in, "wide.npy")
	dataio.WriteNPY(wp, wide)
	out := filepath.Join(dir, "o.npy")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"learn", "generative", "--y", yp, "--out", out}, "--rank"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "2", "--bias", "cauchy:0,1", "--out", out}, "unknown density"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "2", "--bias", "gaussian:0,-1", "--out", out}, "standard deviation"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "10", "--out", out}, "below min"},
		{[]string{"learn", "generative", "--y", nanp, "--rank", "2", "--out", out}, "NaN"},
		{[]string{"learn", "generative", "--y", negp, "--rank", "2", "--out", out}, "negative"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "2", "--solver", "admm", "--out", out}, "needs --bias"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "2", "--solver", "admm", "--bias", "gaussian:0,1", "--gamma", "0.01", "--out", out}, "increase γ"},
		{[]string{"learn", "generative", "--y", yp, "--rank", "2", "--out", yp}, "overwrite an input"},
		{[]string{"recover", "latent", "--a", ap, "--v", yp, "--out", out}, "columns but A has"},
		{[]string{"recover", "latent", "--a", wp, "--v", nanp, "--out", out}, "NaN"},
		{[]string{"recover", "latent", "--a", ap, "--v", yp, "--lambda", "-1", "--out", out}, "--lambda"},
		{[]string{"recover", "latent", "--a", ap, "--v", yp, "--rule", "plugin", "--out", out}, "needs --bias"},
		{[]string{"recover", "latent", "--a", wp, "--v", yp, "--out", out}, "more observations than unknowns"},
		{[]string{"gen", "generative", "--k", "0", "--out", filepath.Join(dir, "g.npz")}, "--k"},
		{[]string{"gen", "robust", "--bias", "laplace:0,0", "--out", filepath.Join(dir, "r.npz")}, "scale > 0"},
		{[]string{"recover"}, "needs a subcommand"},
	} {
		code, stdout, errs := cli(t, tc.args...)
		if code != exitBadInput || stdout != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want 2 and %q)", tc.args, code, errs, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed commands left files: %v", entries)
	}
}

func TestErrBadInputGenerative(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("fit: %w", generative.ErrInput),
		fmt.Errorf("fit: %w", generative.ErrInfeasible),
		fmt.Errorf("recover: %w", robust.ErrInput),
		fmt.Errorf("bias: %w", density.ErrInvalid),
	} {
		if !errBadInput(err) {
			t.Errorf("errBadInput(%v) = false, want true", err)
		}
	}
}
