package linalg

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// sparseProblem returns a (r×c Gaussian), b = a·x* + e with a fraction frac
// of rows of each column corrupted by ±[5, 10], and x*.
func sparseProblem(r, c, q int, frac float64, seed uint64) (*mat.Dense, *mat.Dense, *mat.Dense) {
	rng := rand.New(rand.NewPCG(seed, 7))
	a := mat.NewDense(r, c, nil)
	for i := range a.RawMatrix().Data {
		a.RawMatrix().Data[i] = rng.NormFloat64()
	}
	xs := mat.NewDense(c, q, nil)
	for i := range xs.RawMatrix().Data {
		xs.RawMatrix().Data[i] = rng.NormFloat64()
	}
	b := mat.NewDense(r, q, nil)
	b.Mul(a, xs)
	for j := 0; j < q; j++ {
		for _, i := range rng.Perm(r)[:int(frac*float64(r))] {
			v := 5 + 5*rng.Float64()
			if rng.IntN(2) == 0 {
				v = -v
			}
			b.Set(i, j, b.At(i, j)+v)
		}
	}
	return a, b, xs
}

func maxDiff(a, b *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, math.Inf(1))
}

// ℓ1 regression is exact under sparse corruption, where least squares is
// not; the sparse-noise route of twolayer ([BJW19, §8]) fits U with it.
func TestL1RegressExactUnderSparseCorruption(t *testing.T) {
	for _, frac := range []float64{0, 0.05, 0.2} {
		a, b, xs := sparseProblem(3000, 4, 5, frac, 1)
		x, rep, err := L1Regress(a, b, L1Options{})
		if err != nil {
			t.Fatal(err)
		}
		if e := maxDiff(x, xs); e > 1e-12 {
			t.Errorf("frac %.2f: IRLS error %.1e, want ≤ 1e-12 (report %+v)", frac, e, rep)
		}
		for j, z := range rep.Zeros {
			if want := 3000 - int(frac*3000); z != want || (frac > 0 && !rep.Refit[j]) {
				t.Errorf("frac %.2f column %d: %d exact rows (refit %v), want %d", frac, j, z, rep.Refit[j], want)
			}
		}
		if frac > 0 {
			ls, _ := LstSq(a, b)
			if e := maxDiff(ls, xs); e < 1e-3 {
				t.Errorf("frac %.2f: least squares error %.1e is suspiciously small (test cannot fail)", frac, e)
			}
		}
	}
}

// The exact vertex enumeration and IRLS agree, exactly on sparse corruption and in objective on
// dense noise (where the minimiser is a vertex fitting c rows exactly).
func TestL1RegressVertexAgrees(t *testing.T) {
	a, b, xs := sparseProblem(60, 3, 3, 0.1, 2)
	xl, repL, err := L1Regress(a, b, L1Options{Method: L1Vertex})
	if err != nil {
		t.Fatal(err)
	}
	if e := maxDiff(xl, xs); e > 1e-9 {
		t.Errorf("vertex error %.1e", e)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range b.RawMatrix().Data {
		b.RawMatrix().Data[i] += rng.NormFloat64()
	}
	_, repL, err = L1Regress(a, b, L1Options{Method: L1Vertex})
	if err != nil {
		t.Fatal(err)
	}
	_, repI, err := L1Regress(a, b, L1Options{})
	if err != nil {
		t.Fatal(err)
	}
	for j := range repL.Objective {
		if d := (repI.Objective[j] - repL.Objective[j]) / repL.Objective[j]; d > 1e-6 || d < -1e-9 {
			t.Errorf("dense noise column %d: IRLS objective %.10g vs exact %.10g", j, repI.Objective[j], repL.Objective[j])
		}
	}
}

func TestL1RegressBadInput(t *testing.T) {
	a, b, _ := sparseProblem(20, 3, 1, 0, 1)
	rankDef := mat.DenseCopyOf(a)
	for i := 0; i < 20; i++ {
		rankDef.Set(i, 2, 2*rankDef.At(i, 1))
	}
	nan := mat.DenseCopyOf(b)
	nan.Set(3, 0, math.NaN())
	for name, c := range map[string]struct {
		a, b mat.Matrix
		opt  L1Options
		want error
	}{
		"nil a":         {nil, b, L1Options{}, ErrShape},
		"rows mismatch": {a, mat.NewDense(19, 1, nil), L1Options{}, ErrShape},
		"wide":          {a.Slice(0, 2, 0, 3), mat.NewDense(2, 1, nil), L1Options{}, ErrShape},
		"nan":           {a, nan, L1Options{}, ErrNotFinite},
		"rank":          {rankDef, b, L1Options{}, ErrRankDeficient},
		"method":        {a, b, L1Options{Method: "huber"}, ErrOption},
		"iter":          {a, b, L1Options{MaxIter: -2}, ErrOption},
		"vertex big":    {mat.NewDense(3000, 3, nil), mat.NewDense(3000, 1, nil), L1Options{Method: L1Vertex}, ErrOption},
	} {
		if _, _, err := L1Regress(c.a, c.b, c.opt); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

// BenchmarkL1Regress is the sparse-noise route's U solve: n = 10000 samples,
// k = 3 activations, m = 200 outputs, 5% corruption. Floor: ~20 IRLS
// iterations × 2·n·k² flops per column (the weighted Gram) ≈ 7e8 flops in
// all, plus the refit QR (2·n·k² per column).
func BenchmarkL1Regress(b *testing.B) {
	a, y, _ := sparseProblem(10000, 3, 200, 0.05, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := L1Regress(a, y, L1Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
