package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// SymInvSqrt returns S^{-1/2} (symmetric) for a symmetric positive definite
// n×n matrix S, together with κ(S) = λ_max/λ_min. It is the whitening map for
// inputs x ~ N(0, S): S^{-1/2}·x ~ N(0, I) ([BJW19, Remark 3]).
//
// It uses the symmetric eigendecomposition S = Q·diag(λ)·Qᵀ. An eigenvalue
// λ_min ≤ n·ε·λ_max cannot be told apart from zero or a negative value by a
// backward-stable eigensolver, so such S is refused with an error wrapping
// ErrNotPositiveDefinite that states the smallest eigenvalue.
func SymInvSqrt(s mat.Symmetric) (*mat.Dense, float64, error) {
	if isNil(s) {
		return nil, 0, fmt.Errorf("linalg.SymInvSqrt: %w: S is nil", ErrShape)
	}
	n := s.SymmetricDim()
	if n <= 0 {
		return nil, 0, fmt.Errorf("linalg.SymInvSqrt: %w: S is empty", ErrShape)
	}
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			if x := s.At(i, j); math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, 0, fmt.Errorf("linalg.SymInvSqrt: %w: S[%d,%d] = %v", ErrNotFinite, i, j, x)
			}
		}
	}
	var e mat.EigenSym
	if !e.Factorize(s, true) {
		return nil, 0, fmt.Errorf("linalg.SymInvSqrt: %w", ErrNoConvergence)
	}
	lam := e.Values(nil) // ascending
	lo, hi := lam[0], lam[n-1]
	const eps = 0x1p-52
	if !(hi > 0) || lo <= float64(n)*eps*hi {
		return nil, 0, fmt.Errorf("linalg.SymInvSqrt: %w: smallest eigenvalue %.6g (largest %.6g)", ErrNotPositiveDefinite, lo, hi)
	}
	var q mat.Dense
	e.VectorsTo(&q)
	qs := mat.DenseCopyOf(&q)
	for j := 0; j < n; j++ {
		f := 1 / math.Sqrt(lam[j])
		for i := 0; i < n; i++ {
			qs.Set(i, j, qs.At(i, j)*f)
		}
	}
	out := mat.NewDense(n, n, nil)
	out.Mul(qs, q.T())
	// Symmetrise exactly: rounding in the product leaves ~ε asymmetry, and
	// callers may hand the result to routines that assume symmetry.
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			m := 0.5 * (out.At(i, j) + out.At(j, i))
			out.Set(i, j, m)
			out.Set(j, i, m)
		}
	}
	return out, hi / lo, nil
}

// RandomOrthogonal returns an n×n orthogonal matrix drawn from the Haar
// (uniform) distribution: the Q factor of the QR decomposition of an n×n
// standard Gaussian matrix (entries drawn row by row from rng.NormFloat64),
// with column j multiplied by sign(R_jj). Without that sign fix, Householder
// QR's sign convention makes Q non-uniform (Mezzadri 2007). It returns nil
// when n < 1 or rng is nil.
func RandomOrthogonal(n int, rng *rand.Rand) *mat.Dense {
	if n < 1 || rng == nil {
		return nil
	}
	g := mat.NewDense(n, n, nil)
	data := g.RawMatrix().Data
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	var f mat.QR
	f.Factorize(g)
	var q, r mat.Dense
	f.QTo(&q)
	f.RTo(&r)
	for j := 0; j < n; j++ {
		if r.At(j, j) < 0 {
			for i := 0; i < n; i++ {
				q.Set(i, j, -q.At(i, j))
			}
		}
	}
	return &q
}
