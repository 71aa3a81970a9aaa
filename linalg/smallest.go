package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// smallestDense is the dimension up to which SmallestEigen takes the whole
// eigendecomposition: there it costs milliseconds, and above a few hundred
// gonum's QR iteration with vectors grows to seconds (9.4 s at n = 1275).
const smallestDense = 300

// SmallestEigen returns the r smallest eigenvalues of the symmetric positive
// semidefinite n×n matrix S, ascending (those beyond the k-th only
// approximately, see below), and orthonormal eigenvectors (n×k,
// as columns) for the first k ≤ r of them: an orthonormal basis of the
// invariant subspace of the k smallest eigenvalues (its purpose: the
// near-null space of a Gram matrix).
//
// Above smallestDense it runs shift-and-invert subspace iteration (Saad,
// "Numerical Methods for Large Eigenvalue Problems", §5.1): p = min(n,
// r + 10) columns, each step a Cholesky solve with S + μI (μ = 1e-12·tr S,
// raised tenfold up to 1e-6·tr S while the factorisation fails: it keeps
// the factorisation defined on a singular S) followed by a
// Rayleigh–Ritz projection, until the residual ‖S·q − θ·q‖ of each of the
// k wanted Ritz pairs is below 1e-10·tr S (or 500 steps, after which the
// Ritz pairs reached are returned): the subspace is then within about
// 1e-10·tr S/(λ_{k+1} − λ_k) of the true one — a full eigendecomposition's
// accuracy only when that gap is a fair fraction of tr S. The eigenvalues
// k+1…r returned are the Ritz values at that step: upper bounds (Cauchy
// interlacing), close to the eigenvalues unless the spectrum above the k-th
// is tightly clustered — good for judging the gap, not for more. The subspace of the k
// smallest converges like ((λ_k + μ)/(λ_{p+1} + μ))^step. The random start
// comes from rng. Cost: n³/3 for the Cholesky factor and ~4·n²·p a step.
func SmallestEigen(S *mat.SymDense, k, r int, rng *rand.Rand) ([]float64, *mat.Dense, error) {
	n := S.SymmetricDim()
	if k < 1 || r < k || r > n {
		return nil, nil, fmt.Errorf("linalg.SmallestEigen: %w: need 1 ≤ k ≤ r ≤ n, got k=%d, r=%d, n=%d", ErrShape, k, r, n)
	}
	p := min(n, r+10)
	if n <= smallestDense || p == n {
		var eig mat.EigenSym
		if !eig.Factorize(S, true) {
			return nil, nil, fmt.Errorf("linalg.SmallestEigen: %w", ErrNoConvergence)
		}
		var vecs mat.Dense
		eig.VectorsTo(&vecs)
		return eig.Values(nil)[:r], mat.DenseCopyOf(vecs.Slice(0, n, 0, k)), nil
	}
	trace := mat.Trace(S)
	if !(trace > 0) || math.IsInf(trace, 0) {
		return nil, nil, fmt.Errorf("linalg.SmallestEigen: %w: trace %v (want a positive semidefinite matrix)", ErrNotPositiveDefinite, trace)
	}
	chol, err := shiftedCholesky(S, trace)
	if err != nil {
		return nil, nil, err
	}
	Q := mat.NewDense(n, p, nil)
	for i := range Q.RawMatrix().Data {
		Q.RawMatrix().Data[i] = rng.NormFloat64()
	}
	Sd := mat.DenseCopyOf(S) // general products run faster than symmetric ones
	var (
		SQ, Hd  mat.Dense
		eig     mat.EigenSym
		ritz    mat.Dense
		rotated mat.Dense
		theta   []float64
	)
	H := mat.NewSymDense(p, nil)
	tol := 1e-10 * trace
	for step := 0; step < 500; step++ {
		if err := chol.SolveTo(Q, Q); err != nil {
			return nil, nil, fmt.Errorf("linalg.SmallestEigen: %w", err)
		}
		orthonormalize(Q)
		// Rayleigh–Ritz: the eigenpairs of H = Qᵀ·S·Q, mapped back.
		SQ.Mul(Sd, Q)
		Hd.Mul(Q.T(), &SQ)
		for i := 0; i < p; i++ {
			for j := i; j < p; j++ {
				H.SetSym(i, j, (Hd.At(i, j)+Hd.At(j, i))/2)
			}
		}
		if !eig.Factorize(H, true) {
			return nil, nil, fmt.Errorf("linalg.SmallestEigen: %w", ErrNoConvergence)
		}
		theta = eig.Values(theta)
		eig.VectorsTo(&ritz)
		rotated.Mul(Q, &ritz)
		Q.Copy(&rotated)
		SQ.Mul(&SQ, &ritz) // S·(Q·ritz)
		worst := 0.0
		for j := 0; j < k; j++ {
			res := 0.0
			for i := 0; i < n; i++ {
				d := SQ.At(i, j) - theta[j]*Q.At(i, j)
				res += d * d
			}
			worst = math.Max(worst, math.Sqrt(res))
		}
		if worst <= tol {
			break
		}
	}
	return theta[:r], mat.DenseCopyOf(Q.Slice(0, n, 0, k)), nil
}

// shiftedCholesky factors S + μI for the smallest μ of 1e-12·tr S,
// 1e-11·tr S, … up to 1e-6·tr S that has a Cholesky factor: the shift
// keeps SmallestEigen's inverse iteration defined when S is singular.
func shiftedCholesky(S *mat.SymDense, trace float64) (*mat.Cholesky, error) {
	n := S.SymmetricDim()
	var chol mat.Cholesky
	shifted := mat.NewSymDense(n, nil)
	for mu := 1e-12 * trace; ; mu *= 10 {
		shifted.CopySym(S)
		for i := 0; i < n; i++ {
			shifted.SetSym(i, i, S.At(i, i)+mu)
		}
		if chol.Factorize(shifted) {
			break
		}
		if mu >= 1e-6*trace*(1-1e-9) {
			return nil, fmt.Errorf("linalg.SmallestEigen: %w: S + μI has no Cholesky factor for μ up to 1e-6·tr S", ErrNotPositiveDefinite)
		}
	}
	return &chol, nil
}

// orthonormalize replaces the columns of Q (n×p, n ≥ p, full column rank)
// by an orthonormal basis of their span: modified Gram–Schmidt, twice
// ("twice is enough", Giraud et al. 2005), O(n·p²).
func orthonormalize(Q *mat.Dense) {
	_, p := Q.Dims()
	cols := make([][]float64, p)
	for j := range cols {
		cols[j] = mat.Col(nil, j, Q)
	}
	for pass := 0; pass < 2; pass++ {
		for j, c := range cols {
			for _, prev := range cols[:j] {
				d := 0.0
				for i, v := range prev {
					d += v * c[i]
				}
				for i, v := range prev {
					c[i] -= d * v
				}
			}
			norm := 0.0
			for _, v := range c {
				norm += v * v
			}
			norm = math.Sqrt(norm)
			if norm == 0 {
				// Only a degenerate start gets here (S + μI is positive
				// definite): a unit vector, which the second pass
				// orthogonalises against the others.
				c[j%len(c)], norm = 1, 1
			}
			for i := range c {
				c[i] /= norm
			}
		}
	}
	for j, c := range cols {
		Q.SetCol(j, c)
	}
}
