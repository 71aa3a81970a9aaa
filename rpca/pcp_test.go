package rpca

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/synth"
)

// lowRankPlusSparse returns M (n×m, rank k, incoherent Gaussian factors),
// A = M + S with a fraction frac of entries corrupted by ±[5, 10]·rms, and
// the corruption mask.
func lowRankPlusSparse(t testing.TB, n, m, k int, frac float64, seed uint64) (M, A *mat.Dense, mask []bool) {
	t.Helper()
	rng := synth.NewRand(seed)
	P := mat.NewDense(n, k, nil)
	Q := mat.NewDense(m, k, nil)
	for _, d := range [][]float64{P.RawMatrix().Data, Q.RawMatrix().Data} {
		for i := range d {
			d[i] = rng.NormFloat64()
		}
	}
	M = mat.NewDense(n, m, nil)
	M.Mul(P, Q.T())
	A, mask, err := synth.CorruptSparse(M, synth.SparseCorruption{Frac: frac}, rng)
	if err != nil {
		t.Fatal(err)
	}
	return M, A, mask
}

// [BJW19, §8, Theorem 14] (the PCP step of the sparse-noise route): 5% large
// corruptions of a rank-3 matrix are separated; PCP alone is accurate to ~its
// tolerance, and the debias step makes L exact and flags exactly the
// corrupted entries.
func TestPCPRecoversLowRankPlusSparse(t *testing.T) {
	for _, sz := range []struct{ n, m int }{{2000, 100}, {100, 1500}} {
		M, A, mask := lowRankPlusSparse(t, sz.n, sz.m, 3, 0.05, 1)
		plain, err := PCP(context.Background(), A, Options{NoDebias: true})
		if err != nil {
			t.Fatal(err)
		}
		if !plain.Converged || plain.Rank != 3 {
			t.Fatalf("%d×%d: PCP converged %v in %d iterations, rank %d (want 3)", sz.n, sz.m, plain.Converged, plain.Iterations, plain.Rank)
		}
		ePlain := testutil.RelDiff(plain.L, M)
		if ePlain > 1e-6 {
			t.Errorf("%d×%d: plain PCP ‖L − M‖/‖M‖ = %.1e, want ≤ 1e-6", sz.n, sz.m, ePlain)
		}
		res, err := PCP(context.Background(), A, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := testutil.RelDiff(res.L, M)
		t.Logf("%d×%d: %d iterations, plain error %.1e, debiased %.1e (%d sweeps, %d rounds), nnz %d", sz.n, sz.m, res.Iterations, ePlain, e, res.Debias.Sweeps, res.Debias.Rounds, res.NNZ)
		if e > 1e-12 {
			t.Errorf("%d×%d: debiased ‖L − M‖/‖M‖ = %.1e, want ≤ 1e-12", sz.n, sz.m, e)
		}
		wrong := 0
		for i := range mask {
			if mask[i] != res.Flagged[i] {
				wrong++
			}
		}
		if wrong != 0 {
			t.Errorf("%d×%d: %d entries flagged wrongly", sz.n, sz.m, wrong)
		}
		var sum mat.Dense
		sum.Add(res.L, res.S)
		if !mat.EqualApprox(&sum, A, 1e-12) {
			t.Errorf("%d×%d: L + S ≠ A", sz.n, sz.m)
		}
	}
}

// Without corruption PCP returns L = A and S = 0.
func TestPCPCleanInput(t *testing.T) {
	M, _, _ := lowRankPlusSparse(t, 500, 60, 2, 0, 2)
	res, err := PCP(context.Background(), M, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e := testutil.RelDiff(res.L, M); e > 1e-12 || res.NNZ != 0 || res.Rank != 2 {
		t.Errorf("clean input: error %.1e, nnz %d, rank %d", e, res.NNZ, res.Rank)
	}
}

// A full-rank dense matrix is not low rank plus sparse: the debias step
// must not pretend it is.
func TestPCPDenseNoise(t *testing.T) {
	rng := synth.NewRand(5)
	A := mat.NewDense(300, 40, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	res, err := PCP(context.Background(), A, Options{Rank: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Debias == nil || res.Debias.Accepted {
		t.Errorf("dense noise: debias accepted (%+v)", res.Debias)
	}
	if len(res.Warnings) == 0 {
		t.Error("dense noise: no warning")
	}
}

func TestPCPDeterministicAndCancel(t *testing.T) {
	_, A, _ := lowRankPlusSparse(t, 400, 50, 2, 0.05, 3)
	r1, err := PCP(context.Background(), A, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := PCP(context.Background(), A, Options{})
	if !mat.Equal(r1.L, r2.L) {
		t.Error("two runs differ")
	}
	calls := 0
	if _, err := PCP(context.Background(), A, Options{Progress: func(it, max int, r float64) { calls++ }}); err != nil || calls != r1.Iterations {
		t.Errorf("progress called %d times for %d iterations (err %v)", calls, r1.Iterations, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PCP(ctx, A, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	// Too few iterations: not converged, and said so.
	r3, err := PCP(context.Background(), A, Options{MaxIter: 3, NoDebias: true})
	if err != nil || r3.Converged || len(r3.Warnings) == 0 {
		t.Errorf("MaxIter 3: converged %v, warnings %v, err %v", r3.Converged, r3.Warnings, err)
	}
}

func TestPCPBadInput(t *testing.T) {
	good := mat.NewDense(5, 4, nil)
	good.Set(0, 0, 1)
	nan := mat.DenseCopyOf(good)
	nan.Set(1, 1, math.NaN())
	for name, c := range map[string]struct {
		A   *mat.Dense
		opt Options
	}{
		"nil":        {nil, Options{}},
		"empty":      {&mat.Dense{}, Options{}},
		"nan":        {nan, Options{}},
		"neg lambda": {good, Options{Lambda: -1}},
		"rho < 1":    {good, Options{Rho: 0.5}},
		"inf tol":    {good, Options{Tol: math.Inf(1)}},
		"rank big":   {good, Options{Rank: 4}},
		"neg iter":   {good, Options{MaxIter: -1}},
	} {
		if _, err := PCP(context.Background(), c.A, c.opt); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", name, err)
		}
	}
	z, err := PCP(context.Background(), mat.NewDense(3, 3, nil), Options{})
	if err != nil || z.Rank != 0 || !z.Converged {
		t.Errorf("zero matrix: %+v, %v", z, err)
	}
	if _, _, err := Debias(context.Background(), good, mat.NewDense(4, 4, nil), 1, DebiasOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("Debias shape mismatch: err = %v", err)
	}
}
