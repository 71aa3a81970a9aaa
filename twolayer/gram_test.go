package twolayer

import (
	"context"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/tensor"
)

// residualizeX is residualizeHermite on a held matrix Z.
func residualizeX(ctx context.Context, Z, S *mat.Dense, degree int) error {
	n, k := Z.Dims()
	return residualizeHermite(ctx, n, k, func(lo, hi int, _ *[]float64) blas64.General { return rowsOf(Z, lo, hi) }, S, degree)
}

// The symmetric-product sums of gram.go agree with the general products of
// the tensor package they replace (to rounding), and give the same bits at
// any GOMAXPROCS. n spans several chunk groups and a ragged last chunk.
func TestGramSumsMatchTensor(t *testing.T) {
	ctx := context.Background()
	const n, d, p = 9000, 7, 3
	rng := synth.NewRand(5)
	X, err := synth.GaussianInputs(n, d, nil, rng)
	if err != nil {
		t.Fatal(err)
	}
	S := mat.NewDense(n, p, nil)
	for i := range S.RawMatrix().Data {
		S.RawMatrix().Data[i] = rng.NormFloat64()
	}
	S.Set(3, 1, 0) // a zero weight goes to neither sign's sum

	relDiff := func(a, b mat.Matrix) float64 {
		var diff mat.Dense
		diff.Sub(a, b)
		return mat.Norm(&diff, math.Inf(1)) / mat.Norm(b, math.Inf(1))
	}
	run := func() (*mat.SymDense, []*mat.SymDense, *mat.Dense, *mat.Dense) {
		cov, err := symOuter(ctx, X, 1/float64(n))
		if err != nil {
			t.Fatal(err)
		}
		M2, err := hermiteMoment2(ctx, X, S, nil)
		if err != nil {
			t.Fatal(err)
		}
		r1, r2 := mat.DenseCopyOf(S), mat.DenseCopyOf(S)
		if err := residualizeX(ctx, X, r1, 1); err != nil {
			t.Fatal(err)
		}
		if err := residualizeX(ctx, X, r2, 2); err != nil {
			t.Fatal(err)
		}
		return cov, M2, r1, r2
	}
	cov, M2, r1, r2 := run()

	want := mat.NewSymDense(d, nil)
	want.SymOuterK(1/float64(n), X.T())
	if e := relDiff(cov, want); e > 1e-13 {
		t.Errorf("symOuter: relative difference %.1e from SymOuterK", e)
	}
	wantM2, err := tensor.HermiteMoment2(ctx, X, S, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range M2 {
		if e := relDiff(M2[i], wantM2[i]); e > 1e-12 {
			t.Errorf("hermiteMoment2 channel %d: relative difference %.1e from tensor.HermiteMoment2", i, e)
		}
	}
	for deg, got := range []*mat.Dense{r1, r2} {
		w := mat.DenseCopyOf(S)
		if _, err := tensor.Residualize(ctx, X, w, deg+1); err != nil {
			t.Fatal(err)
		}
		// residualizeHermite's coefficients are a Jacobi sweep, not the
		// least-squares ones: what it removes must match the least-squares
		// fit to a few percent (the first estimate alone is off by
		// O(√(f/n)), the sweep squares that).
		var diff, fit mat.Dense
		diff.Sub(got, w)
		fit.Sub(S, w)
		if e := mat.Norm(&diff, 2) / mat.Norm(&fit, 2); e > 0.05 {
			t.Errorf("residualize degree %d: difference %.1e (relative to the least-squares fit) from tensor.Residualize", deg+1, e)
		}
		var sd mat.Dense
		sd.Sub(got, S)
		if mat.Norm(&sd, math.Inf(1)) == 0 {
			t.Errorf("residualize degree %d changed nothing", deg+1)
		}
	}

	old := runtime.GOMAXPROCS(1)
	cov1, M21, r11, r21 := run()
	runtime.GOMAXPROCS(3)
	cov3, M23, r13, r23 := run()
	runtime.GOMAXPROCS(old)
	for _, pair := range [][3]mat.Matrix{{cov, cov1, cov3}, {M2[2], M21[2], M23[2]}, {r1, r11, r13}, {r2, r21, r23}} {
		if !mat.Equal(pair[0], pair[1]) || !mat.Equal(pair[0], pair[2]) {
			t.Errorf("results differ between GOMAXPROCS %d, 1 and 3", old)
		}
	}
}
