package extract

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

func deepTeacher(t *testing.T, sizes []int, seed uint64) *nn.MLP {
	t.Helper()
	net, err := nn.NewMLP(sizes, seed)
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// checkDeep extracts a deeper teacher and asserts every parameter within
// tol after alignment and a met certificate.
func checkDeep(t *testing.T, net *nn.MLP, opt Options, tol float64) *Result {
	t.Helper()
	return checkDeepWith(t, net, FromMLP(net), opt, tol)
}

// checkDeepWith is checkDeep with the teacher answering through oracle o.
func checkDeepWith(t *testing.T, net *nn.MLP, o Oracle, opt Options, tol float64) *Result {
	t.Helper()
	res, err := Extract(context.Background(), o, net.In(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layers %+v, queries %d, certificate %.1e, warnings %v", res.Layers, res.Queries, res.Certificate.Residual, res.Warnings)
	if res.Network == nil {
		t.Fatalf("no network")
	}
	cmp, err := metrics.CompareMLP(net, res.Network)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("max relative parameter error %.1e", cmp.MaxRel)
	if cmp.MaxRel > tol {
		t.Errorf("max relative parameter error %.2e > %.0e (%+v)", cmp.MaxRel, tol, cmp.Layers)
	}
	if !res.Certificate.Met {
		t.Errorf("certificate %+v not met", res.Certificate)
	}
	return res
}

func TestExtractTwoHiddenLayers(t *testing.T) {
	cases := [][]int{{10, 6, 4, 3}, {20, 8, 6, 3}}
	for _, sizes := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			net := deepTeacher(t, sizes, seed)
			checkDeep(t, net, Options{Seed: seed, Widths: sizes[1 : len(sizes)-1]}, 1e-8)
		}
	}
}

// A query budget too small for the first layer ends the extraction with
// an error wrapping errs.ErrNotExact (Exact) that lists the units found
// per layer.
func TestExtractDeepBudgetNotExact(t *testing.T) {
	net := deepTeacher(t, []int{10, 6, 4, 3}, 1)
	res, err := Extract(context.Background(), FromMLP(net), 10, Options{Seed: 1, Widths: []int{6, 4}, MaxQueries: 600, Exact: true})
	if !errors.Is(err, errs.ErrNotExact) || !strings.Contains(err.Error(), "units per layer") || res == nil || res.Certificate.Met {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if res.Queries > 600 || len(res.Layers) != 2 || res.Layers[0].Passed && res.Layers[1].Passed {
		t.Errorf("result %+v", res)
	}
}

// One Gauss–Newton step of the whole-network polish takes a three-layer
// network with every parameter off by 1e-5 to the teacher's answers.
func TestGaussNewtonMLPRestoresPrecision(t *testing.T) {
	net := deepTeacher(t, []int{12, 8, 6, 5, 3}, 1)
	X := gaussianRows(600, 12, 7)
	Y := net.Forward(X)
	rng := synth.NewRand(8)
	off := &nn.MLP{}
	for _, l := range net.Layers {
		W := mat.DenseCopyOf(l.Weight)
		raw := W.RawMatrix().Data
		for i := range raw {
			raw[i] += 1e-5 * rng.NormFloat64()
		}
		b := append([]float64(nil), l.Bias...)
		for i := range b {
			b[i] += 1e-5 * rng.NormFloat64()
		}
		off.Layers = append(off.Layers, nn.Layer{Weight: W, Bias: b, Act: l.Act})
	}
	before := certify.RelResidual(Y, off.Forward(X))
	after := certify.RelResidual(Y, gaussNewtonMLP(off, X, Y).Forward(X))
	if !(after < 1e-3*before) {
		t.Errorf("relative residual %.1e → %.1e", before, after)
	}
}

// complete lets a last layer that failed its check through to the
// whole-network polish only behind a coarse oracle and with every unit of
// the width given found; earlier layers must pass.
func TestDeepRunComplete(t *testing.T) {
	passed := LayerResult{Units: 32, Width: 32, Passed: true}
	lastFull := LayerResult{Units: 16, Width: 16}
	lastShort := LayerResult{Units: 15, Width: 16}
	lastNoWidth := LayerResult{Units: 16}
	cases := []struct {
		layers []LayerResult
		noise  float64
		want   bool
	}{
		{[]LayerResult{passed, {Units: 16, Width: 16, Passed: true}}, 0, true},
		{[]LayerResult{passed, lastFull}, 0, false},
		{[]LayerResult{passed, lastFull}, 3e-7, true},
		{[]LayerResult{passed, lastShort}, 3e-7, false},
		{[]LayerResult{passed, lastNoWidth}, 3e-7, false},
		{[]LayerResult{{Units: 31, Width: 32}, lastFull}, 3e-7, false},
		{nil, 3e-7, false},
	}
	for i, c := range cases {
		r := &deepRun{layers: c.layers, diag: Diagnostics{Noise: c.noise}}
		if got := r.complete(); got != c.want {
			t.Errorf("case %d: complete() = %v, want %v", i, got, c.want)
		}
	}
}

// An oracle whose answer for a point changes with the batch it comes in
// (behind float64: a single row comes back 1e-15 relative off, as
// PyTorch's products round rows differently by batch shape; behind
// float32: rows rounded by their position in the batch, as PyTorch's
// float32 Linear does) is told from a deterministic one, and the network
// is extracted behind either.
func TestBatchRoundingDetected(t *testing.T) {
	net := deepTeacher(t, []int{20, 8, 4, 3}, 1)
	plain := FromMLP(net)
	batchy := func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		Y, err := plain(ctx, X)
		if err != nil {
			return nil, err
		}
		if n, _ := Y.Dims(); n == 1 {
			Y.Scale(1+1e-15, Y)
		}
		return Y, err
	}
	net32 := deepTeacher(t, []int{40, 12, 8, 5}, 1)
	net1 := teacher(t, 20, 5, 3, 1)
	for _, c := range []struct {
		name   string
		o      Oracle
		d      int
		widths []int
		varies bool
	}{
		{"deterministic", plain, 20, []int{8, 4}, false},
		{"batch-dependent", batchy, 20, []int{8, 4}, true},
		{"float32", float32Oracle(net32), 40, []int{12, 8}, false},
		{"float32 by batch position", batchedFloat32Oracle(net32), 40, []int{12, 8}, true},
		{"float32, one hidden layer", float32Oracle(net1), 20, nil, false},
		{"float32 by batch position, one hidden layer", batchedFloat32Oracle(net1), 20, nil, true},
	} {
		res, err := Extract(context.Background(), c.o, c.d, Options{Seed: 1, Widths: c.widths})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Diagnostics.BatchRounding != c.varies {
			t.Errorf("%s: BatchRounding %v", c.name, res.Diagnostics.BatchRounding)
		}
		if !res.Certificate.Met {
			t.Errorf("%s: certificate %+v not met", c.name, res.Certificate)
		}
	}
}

// The certificate of a deeper network is measured on the inputs, so its
// tolerance follows the rounding the first layer's search measured there,
// not a later frame's (which the affine map into it magnifies).
func TestDeepCertificateToleranceFromFirstLayer(t *testing.T) {
	zeros := func(_ context.Context, X *mat.Dense) (*mat.Dense, error) {
		n, _ := X.Dims()
		return mat.NewDense(n, 1, nil), nil
	}
	r := &deepRun{d: 3, opt: Options{CertQueries: 4}, root: &counted{f: zeros, d: 3},
		layers: []LayerResult{{Noise: 2e-7}, {Noise: 3.6e-6}}, diag: Diagnostics{Noise: 3.6e-6}}
	tol, err := r.certify(context.Background(), nil, &Result{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(tol-2e-5) > 1e-12 {
		t.Errorf("certificate tolerance %.3g, want 100 × the first layer's 2e-7", tol)
	}
}
