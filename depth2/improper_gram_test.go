package depth2

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/internal/testutil"
)

// FitImproper's normal equations (with one refinement step) reproduce
// exact data to rounding and agree with the QR solution; a unit that is
// never active sends it to the QR/minimum-norm fallback, which still fits.
func TestFitImproperNormalEquationsMatchQR(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	n, d := 30000, 6
	X := testutil.RandDense(rng, n, d)
	truth := randomNet(d, 4, []float64{0.4, -1.1, 0, 2}, rng)
	truth.C = []float64{0.7}
	truth.L = mat.NewDense(1, d, []float64{0.1, 0, -0.2, 0.3, 0, 0.05})
	Y := truth.Forward(X)
	got, err := FitImproper(context.Background(), X, Y, truth.W, truth.B)
	if err != nil {
		t.Fatal(err)
	}
	if r := certify.RelResidual(Y, got.Forward(X)); r > 1e-14 {
		t.Errorf("exact units: relative residual %.2e", r)
	}
	coef, err := improperQR(context.Background(), X, Y, truth.W, truth.B)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if dif := math.Abs(got.A.At(0, i) - coef.At(i, 0)); dif > 1e-12 {
			t.Errorf("A[%d] differs from QR by %.2e", i, dif)
		}
	}

	// Noisy targets: the same minimiser as QR within the problem's
	// sensitivity.
	noisy := mat.DenseCopyOf(Y)
	for i := 0; i < n; i++ {
		noisy.Set(i, 0, noisy.At(i, 0)+0.3*rng.NormFloat64())
	}
	got, err = FitImproper(context.Background(), X, noisy, truth.W, truth.B)
	if err != nil {
		t.Fatal(err)
	}
	coef, _ = improperQR(context.Background(), X, noisy, truth.W, truth.B)
	for i := 0; i < 4; i++ {
		if dif := math.Abs(got.A.At(0, i) - coef.At(i, 0)); dif > 1e-10 {
			t.Errorf("noisy: A[%d] differs from QR by %.2e", i, dif)
		}
	}

	// A dead unit (never active on the samples).
	B := append([]float64(nil), truth.B...)
	B[3] = -50
	got, err = FitImproper(context.Background(), X, Y, truth.W, B)
	if err != nil {
		t.Fatal(err)
	}
	if r := certify.RelResidual(Y, got.Forward(X)); !(r < 0.5) {
		t.Errorf("dead unit: relative residual %.2e", r)
	}
	if a := got.A.At(0, 3); a != 0 && math.Abs(a) > 1e-6 {
		t.Errorf("dead unit: output weight %g, want the minimum-norm 0", a)
	}
}

// problem.eval agrees with certify.RelResidual on the full forward pass,
// falls back to the scaled sums for tiny data, and gives the same bits at
// any GOMAXPROCS.
func TestProblemEvalMatchesCertificate(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 2))
	n, d := 5000, 5
	X := testutil.RandDense(rng, n, d)
	truth := randomNet(d, 3, []float64{0.2, -0.5, 1}, rng)
	truth.C = []float64{0.3}
	Y := truth.Forward(X)
	est := truth.Clone()
	est.B[1] += 1e-3
	est.L = mat.NewDense(1, d, []float64{1e-4, 0, 0, 0, -2e-4})
	var ref evaluation
	for _, procs := range []int{1, 2, 5} {
		prev := runtime.GOMAXPROCS(procs)
		pr := &problem{X: X, Y: Y, n: n, d: d, p: 1}
		e := pr.eval(est)
		runtime.GOMAXPROCS(prev)
		want := certify.RelResidual(Y, est.Forward(X))
		if math.Abs(e.resid-want) > 1e-12*want {
			t.Fatalf("GOMAXPROCS=%d: residual %.17g, certify %.17g", procs, e.resid, want)
		}
		if math.Abs(e.loss-lossOn(X, Y, est, n)) > 1e-12*e.loss {
			t.Fatalf("loss %.17g, lossOn %.17g", e.loss, lossOn(X, Y, est, n))
		}
		if procs == 1 {
			ref = e
		} else if e.loss != ref.loss || e.resid != ref.resid {
			t.Fatalf("GOMAXPROCS=%d changes the sums", procs)
		}
		// The cache answers for equal parameters, not for changed ones.
		again := est.Clone()
		if pr.eval(again).resid != e.resid || len(pr.evals) != 1 {
			t.Fatal("equal parameters evaluated twice")
		}
		again.A.Set(0, 0, again.A.At(0, 0)+1e-9)
		if pr.eval(again).resid == e.resid {
			t.Fatal("changed parameters served from the cache")
		}
	}

	// Data at 1e-200: the squares underflow, the scaled sums do not.
	tiny := mat.DenseCopyOf(Y)
	tiny.Scale(1e-200, tiny)
	small := est.Clone()
	small.A.Scale(1e-200, small.A)
	small.C[0] *= 1e-200
	small.L.Scale(1e-200, small.L)
	pr := &problem{X: X, Y: tiny, n: n, d: d, p: 1}
	if got, want := pr.residual(small), certify.RelResidual(Y, est.Forward(X)); math.Abs(got-want) > 1e-9*want {
		t.Errorf("tiny data: residual %g, want %g", got, want)
	}
}
