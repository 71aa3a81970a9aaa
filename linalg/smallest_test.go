package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// SmallestEigen against the full eigendecomposition, on Gram matrices with
// a near-null cluster (the parity start's setting): the k smallest
// eigenvalues agree, the next is bounded closely from above, and the
// subspaces of the k smallest coincide (all principal angles ~0).
func TestSmallestEigen(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{40, 5}, {320, 12}, {400, 20}} {
		// S = Qᵀ·diag(λ)·Q with k eigenvalues in [1e-9, 1e-7] and the rest
		// in [1e-3, 1].
		Q := RandomOrthogonal(c.n, rng)
		lam := make([]float64, c.n)
		for i := range lam {
			if i < c.k {
				lam[i] = 1e-9 * math.Pow(100, rng.Float64())
			} else {
				lam[i] = 1e-3 * math.Pow(1000, rng.Float64())
			}
		}
		var QD mat.Dense
		QD.Mul(Q.T(), mat.NewDiagDense(c.n, lam))
		var Sd mat.Dense
		Sd.Mul(&QD, Q)
		S := mat.NewSymDense(c.n, nil)
		for i := 0; i < c.n; i++ {
			for j := i; j < c.n; j++ {
				S.SetSym(i, j, (Sd.At(i, j)+Sd.At(j, i))/2)
			}
		}
		vals, vecs, err := SmallestEigen(S, c.k, c.k+1, rng)
		if err != nil {
			t.Fatal(err)
		}
		var full mat.EigenSym
		if !full.Factorize(S, true) {
			t.Fatal("EigenSym failed")
		}
		want := full.Values(nil)
		for i, v := range vals[:c.k] {
			if math.Abs(v-want[i]) > 1e-12*want[c.n-1] {
				t.Errorf("n=%d: eigenvalue %d = %.6g, want %.6g", c.n, i, v, want[i])
			}
		}
		// The next one is a Ritz value: an upper bound, close.
		if v := vals[c.k]; v < want[c.k]*(1-1e-12) || v > 1.2*want[c.k] {
			t.Errorf("n=%d: eigenvalue %d = %.6g, want within [1, 1.2]× %.6g", c.n, c.k, v, want[c.k])
		}
		var all mat.Dense
		full.VectorsTo(&all)
		angles, err := PrincipalAngles(vecs, all.Slice(0, c.n, 0, c.k))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range angles {
			if a > 1e-8 {
				t.Errorf("n=%d: principal angle %.2g between the subspaces", c.n, a)
			}
		}
	}
	if _, _, err := SmallestEigen(mat.NewSymDense(3, nil), 2, 1, rng); err == nil {
		t.Error("r < k accepted")
	}
}
