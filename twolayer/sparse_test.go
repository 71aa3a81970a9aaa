package twolayer

import (
	"context"
	"errors"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/rpca"
	"github.com/relurec/relurec/synth"
)

// sparseInstance: V* from synth (d×k, κ ≤ 2), U* m×k orthonormal and
// incoherent, Gaussian X, and Y with a fraction frac of its entries
// corrupted by ±[5, 10]·rms(Y).
func sparseInstance(t testing.TB, seed uint64, d, k, m, n int, frac float64) (teacher *nn.MLP, X, Y *mat.Dense, mask []bool) {
	t.Helper()
	rng := synth.NewRand(seed)
	tv, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: d, K: k, M: k, CondV: 2}, rng)
	if err != nil {
		t.Fatal(err)
	}
	U, _, err := synth.IncoherentOrthonormal(m, k, 0, rng)
	if err != nil {
		t.Fatal(err)
	}
	teacher = nn.NewTwoLayer(tv.Layers[0].Weight, U)
	X, err = synth.GaussianInputs(n, d, nil, rng)
	if err != nil {
		t.Fatal(err)
	}
	clean, _, err := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)
	if err != nil {
		t.Fatal(err)
	}
	Y, mask, err = synth.CorruptSparse(clean, synth.SparseCorruption{Frac: frac}, rng)
	if err != nil {
		t.Fatal(err)
	}
	return teacher, X, Y, mask
}

// [BJW19, §8, Cor 8]: 5% of the entries of Y corrupted by large values,
// m = 200, k = 3, orthonormal incoherent U*: the weights are recovered
// to ≤ 1e-6 (we get ~1e-13) and the corrupted entries are exactly the flagged
// ones. d = 10, n = 5000 (one seed here; slow_sparse_test.go runs more at
// n = 10000).
func TestFitSparseRecoversWeights(t *testing.T) {
	checkSparseRecovery(t, []uint64{1}, 5000)
}

func checkSparseRecovery(t *testing.T, seeds []uint64, n int) {
	for _, seed := range seeds {
		teacher, X, Y, mask := sparseInstance(t, seed, 10, 3, 200, n, 0.05)
		res, err := FitSparse(context.Background(), X, Y, SparseOptions{Options: Options{Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		e := compare(t, teacher, res.Model)
		t.Logf("seed %d: weight error %.1e, certificate %+v, flagged %d (%.3f), PCP %d iterations, full residual %.2f, %v",
			seed, e.MaxRelErr, res.Certificate, res.Sparse.Flagged, res.Sparse.FlaggedFraction, res.Sparse.PCPIterations, res.Sparse.FullResidual, res.Elapsed)
		if e.MaxRelErr > 1e-6 || !res.Certificate.Met || res.Route != RouteSparse {
			t.Errorf("seed %d: weight error %.1e, certificate %+v, route %s", seed, e.MaxRelErr, res.Certificate, res.Route)
		}
		wrong := 0
		for i := range mask {
			if mask[i] != res.Sparse.Mask[i] {
				wrong++
			}
		}
		if wrong != 0 {
			t.Errorf("seed %d: %d entries flagged wrongly", seed, wrong)
		}
	}
}

// Without the robust PCA, the plain exact route cannot certify these data,
// so the sparse route is what makes the difference (the test above cannot
// pass by accident).
func TestFitSparsePlainRouteFails(t *testing.T) {
	_, X, Y, _ := sparseInstance(t, 1, 10, 3, 200, 5000, 0.05)
	if _, err := Fit(context.Background(), X, Y, Options{Hidden: 3, Route: "exact"}); !errors.Is(err, ErrNotExact) {
		t.Errorf("plain exact route on corrupted data: err = %v, want ErrNotExact", err)
	}
}

func TestFitSparseBadInput(t *testing.T) {
	_, X, Y, _ := sparseInstance(t, 1, 5, 2, 20, 2000, 0.05)
	for name, c := range map[string]struct {
		X, Y *mat.Dense
		opt  SparseOptions
	}{
		"nil":          {nil, Y, SparseOptions{}},
		"rows":         {X.Slice(0, 100, 0, 5).(*mat.Dense), Y, SparseOptions{}},
		"k ≥ m":        {X, Y, SparseOptions{Options: Options{Hidden: 20}}},
		"maxcorrupted": {X, Y, SparseOptions{MaxCorrupted: 1.5}},
		"rpca option":  {X, Y, SparseOptions{RPCA: rpcaBad()}},
	} {
		if _, err := FitSparse(context.Background(), c.X, c.Y, c.opt); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", name, err)
		}
	}
}

func rpcaBad() rpca.Options { return rpca.Options{Rho: 0.5} }

// BenchmarkFitSparse is TestFitSparseRecoversWeights' instance at n = 10000
// (d = 10, k = 3, m = 200, 5% corruption). Floor: the PCP Gram products
// (~20 × n·m² = 8e9 flops), the tensor start on the cleaned outputs and the
// ℓ1 regression (~20 IRLS passes × 2·n·k²·m ≈ 7e8 flops).
func BenchmarkFitSparse(b *testing.B) {
	_, X, Y, _ := sparseInstance(b, 1, 10, 3, 200, 10000, 0.05)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FitSparse(context.Background(), X, Y, SparseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAlg8Select(b *testing.B) {
	_, X, Y, S, _ := alg8Instance(b, 1, 10, 3, 20, 8, 20000)
	rng := synth.NewRand(5)
	var cands []*mat.Dense
	for i := 0; i < 10; i++ {
		D := mat.NewDense(3, 8, nil)
		for j := range D.RawMatrix().Data {
			D.RawMatrix().Data[j] = rng.NormFloat64()
		}
		cands = append(cands, D)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Alg8Select(context.Background(), X, Y, S, cands, Alg8Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
