package linalg

import (
	"errors"
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
	// A singular PSD matrix with rounding-level negative eigenvalues, as a
	// Gram matrix of exact equations is: the null space comes back.
	n, r := 400, 380
	A := mat.NewDense(n, r, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	var G mat.Dense
	G.Mul(A, A.T()) // rank r: a 20-dimensional null space
	S := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			S.SetSym(i, j, G.At(i, j))
		}
	}
	vals, vecs, err := SmallestEigen(S, n-r, n-r+1, rng)
	if err != nil {
		t.Fatal(err)
	}
	// The documented accuracy: an angle of at most 1e-10·tr S/λ_{k+1} to
	// the null space (‖Aᵀ·q‖ ≥ √λ_{k+1}·sin(angle) for a unit q).
	var AtV mat.Dense
	AtV.Mul(A.T(), vecs)
	trace := mat.Trace(S)
	angle := mat.Norm(&AtV, 2) / math.Sqrt(vals[n-r])
	if angle > 1e-10*trace/vals[n-r] || vals[n-r-1] > 1e-9*trace || vals[n-r] < 0.1 {
		t.Errorf("singular S: angle to the null space %.2g (bound %.2g), eigenvalues %.3g then %.3g", angle, 1e-10*trace/vals[n-r], vals[n-r-1], vals[n-r])
	}
	if _, _, err := SmallestEigen(mat.NewSymDense(3, nil), 2, 1, rng); err == nil {
		t.Error("r < k accepted")
	}
}

// Above smallestDense, a matrix whose smallest eigenvalues are slightly
// negative (a Gram matrix assembled with rounding can be) makes the first
// shifts' Cholesky fail: SmallestEigen raises the shift tenfold until it
// factors (here from 1e-12 to 1e-10·tr S) and still returns the right
// subspace; eigenvalues too negative for the largest shift (1e-6·tr S) are
// refused as not positive semidefinite.
func TestSmallestEigenRaisesShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, k := 320, 6
	Q := RandomOrthogonal(n, rng)
	build := func(negative float64) *mat.SymDense {
		lam := make([]float64, n)
		for i := range lam {
			lam[i] = 1 + rng.Float64()
		}
		trace := 0.0
		for _, v := range lam[k:] {
			trace += v
		}
		for i := 0; i < k; i++ {
			lam[i] = -negative * trace
		}
		var QD, Sd mat.Dense
		QD.Mul(Q, mat.NewDiagDense(n, lam))
		Sd.Mul(&QD, Q.T())
		S := mat.NewSymDense(n, nil)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				S.SetSym(i, j, (Sd.At(i, j)+Sd.At(j, i))/2)
			}
		}
		return S
	}
	S := build(5e-11)
	var chol mat.Cholesky
	shifted := mat.NewSymDense(n, nil)
	shifted.CopySym(S)
	for i := 0; i < n; i++ {
		shifted.SetSym(i, i, S.At(i, i)+1e-12*mat.Trace(S))
	}
	if chol.Factorize(shifted) {
		t.Fatal("the test matrix factors at the first shift: it does not reach the raising branch")
	}
	vals, vecs, err := SmallestEigen(S, k, k+1, rng)
	if err != nil {
		t.Fatal(err)
	}
	angles, err := PrincipalAngles(vecs, Q.Slice(0, n, 0, k))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range angles {
		if a > 1e-8 {
			t.Errorf("principal angle %.2g to the negative eigenvalues' subspace", a)
		}
	}
	if tr := mat.Trace(S); vals[k-1] > 0 || vals[k-1] < -1e-10*tr || vals[k] < 0.5 {
		t.Errorf("eigenvalues %.3g (k-th) and %.3g (next), tr S = %.3g", vals[k-1], vals[k], tr)
	}
	if _, _, err := SmallestEigen(build(1e-5), k, k+1, rng); !errors.Is(err, ErrNotPositiveDefinite) {
		t.Errorf("eigenvalues of −1e-5·tr S: got %v, want ErrNotPositiveDefinite", err)
	}
}
