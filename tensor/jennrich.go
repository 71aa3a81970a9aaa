package tensor

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/vec"
)

// ErrNoDecomposition is returned when no random pair of slices gave a real,
// separated eigen-decomposition.
var ErrNoDecomposition = errs.New("tensor: Jennrich found no real decomposition", nil)

// Decomposition is the result of Jennrich.
type Decomposition struct {
	// W holds the k components as unit columns (k×k), each up to sign.
	W *mat.Dense
	// Diag[i] are the least-squares weights of slice i on the components:
	// slice i ≈ W·diag(Diag[i])·Wᵀ.
	Diag [][]float64
	// Residual is the relative residual of that fit over all slices,
	// sqrt(Σ_i ‖M_i − W·diag·Wᵀ‖²/Σ_i ‖M_i‖²), of the chosen try.
	Residual float64
	// MinGap is the smallest relative gap between the eigenvalues of the
	// chosen try, min |μ_i − μ_j| / max |μ|; small gaps make eigenvectors unstable.
	MinGap float64
	// Tries is the number of random slice pairs examined.
	Tries int
}

// JennrichOptions tunes Jennrich; the zero value uses the defaults.
type JennrichOptions struct {
	// Tries is the number of random slice pairs (default 10; a practical
	// value, the paper's analysis uses one pair).
	Tries int
	// MinGap is the relative eigenvalue gap below which a try is only used
	// if no try reaches it (default 1e-3).
	MinGap float64
	// Sweeps bounds the joint-diagonalisation sweeps that refine the best
	// try over all slices (default 100).
	Sweeps int
}

// Jennrich finds the common components of symmetric slices M_i ≈ W·D_i·Wᵀ
// (W k×k invertible, D_i diagonal) by simultaneous diagonalisation — the
// decomposition step of [BJW19, Alg 4] (in place of its whitened tensor
// power method, docs/twolayer.md) and of [ATV21, Alg 4]. Two random combinations M_a, M_b of the slices give
// M_a·M_b⁻¹ = W·D_a·D_b⁻¹·W⁻¹, whose eigenvectors are the components. The
// slices come from a sample moment, so several random pairs are tried; pairs
// with complex eigenvalues are rejected, and among the rest the one whose
// components fit all slices with the smallest residual wins (preferring pairs
// whose eigenvalue gap is at least MinGap). The winner is refined by
// JointDiagonalize over all slices: a pair of slices uses a fraction of the
// data's information, the least-squares fit to all of them uses it all.
func Jennrich(slices []*mat.SymDense, rng *rand.Rand, opt JennrichOptions) (*Decomposition, error) {
	if len(slices) < 2 {
		return nil, fmt.Errorf("tensor: Jennrich needs at least two slices, got %d", len(slices))
	}
	if opt.Tries <= 0 {
		opt.Tries = 10
	}
	if opt.MinGap <= 0 {
		opt.MinGap = 1e-3
	}
	k := slices[0].SymmetricDim()
	total2 := 0.0
	for _, m := range slices {
		f := mat.Norm(m, 2)
		total2 += f * f
	}
	combo := func() *mat.Dense {
		M := mat.NewDense(k, k, nil)
		var tmp mat.Dense
		for _, s := range slices {
			tmp.Scale(rng.NormFloat64(), s)
			M.Add(M, &tmp)
		}
		return M
	}
	norms2 := sliceNorms2(slices)
	var best *Decomposition
	for try := 1; try <= opt.Tries; try++ {
		Ma, Mb := combo(), combo()
		d, ok := jennrichPair(slices, norms2, Ma, Mb)
		if !ok {
			continue
		}
		gap := d.MinGap
		bestGood := best != nil && best.MinGap >= opt.MinGap
		good := gap >= opt.MinGap
		if best == nil || (good && !bestGood) || (good == bestGood && d.Residual < best.Residual) {
			best = d
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w in %d tries: every pair of slices was singular (are the components dependent, or does a weight vanish?)", ErrNoDecomposition, opt.Tries)
	}
	refined := jointDiagonalize(slices, norms2, best.W, opt.Sweeps)
	refined.MinGap, refined.Tries = best.MinGap, opt.Tries
	return refined, nil
}

// jennrichPair is one try of Jennrich: the components of the pair of
// combinations Ma, Mb, the eigenvectors of Ma·Mb⁻¹ (unit columns of W),
// fitted to all slices (fitDiagonal). MinGap is the eigenvalues' smallest
// relative gap. ok is false when Mb is singular, the eigendecomposition
// fails, every eigenvalue is zero or the fit fails.
func jennrichPair(slices []*mat.SymDense, norms2 []float64, Ma, Mb *mat.Dense) (*Decomposition, bool) {
	k, _ := Ma.Dims()
	// Ma·Mb⁻¹ = (Mb⁻¹·Ma)ᵀ because both are symmetric.
	var sol mat.Dense
	if err := sol.Solve(Mb, Ma); err != nil {
		return nil, false
	}
	var eig mat.Eigen
	if !eig.Factorize(sol.T(), mat.EigenRight) {
		return nil, false
	}
	vals := eig.Values(nil)
	maxAbs := 0.0
	for _, v := range vals {
		maxAbs = math.Max(maxAbs, cmplx.Abs(v))
	}
	if maxAbs == 0 {
		return nil, false
	}
	gap := math.Inf(1)
	for i := range vals {
		for j := i + 1; j < len(vals); j++ {
			gap = math.Min(gap, cmplx.Abs(vals[i]-vals[j])/maxAbs)
		}
	}
	var vecs mat.CDense
	eig.VectorsTo(&vecs)
	W := mat.NewDense(k, k, nil)
	for j := 0; j < k; j++ {
		// A complex conjugate pair (noise merged two real eigenvalues)
		// spans a real 2-D invariant subspace: keep its real and imaginary
		// parts as two columns and let the joint diagonalisation rotate
		// within it.
		col := make([]float64, k)
		useImag := j > 0 && imag(vals[j]) != 0 && vals[j] == cmplx.Conj(vals[j-1])
		for i := range col {
			if useImag {
				col[i] = imag(vecs.At(i, j))
			} else {
				col[i] = real(vecs.At(i, j))
			}
		}
		vec.Normalize(col)
		W.SetCol(j, col)
	}
	diag, res, ok := fitDiagonal(slices, norms2, W)
	if !ok {
		return nil, false
	}
	return &Decomposition{W: W, Diag: diag, Residual: res, MinGap: gap}, true
}

// FitDiagonal returns, for each slice M_i, the diagonal D_i minimising
// ‖M_i − W·D_i·Wᵀ‖_F for fixed unit columns w_j of W, and the relative
// residual over all slices. It uses ⟨w_a w_aᵀ, w_b w_bᵀ⟩ = (w_a·w_b)², so the
// fit is a k×k positive definite solve per slice.
func FitDiagonal(slices []*mat.SymDense, W *mat.Dense) (diag [][]float64, residual float64, ok bool) {
	return fitDiagonal(slices, sliceNorms2(slices), W)
}

// sliceNorms2 returns ‖M_i‖²_F of every slice (mat.Norm's value, squared),
// which fitDiagonal needs on every call: AC–DC fits the same slices once a
// sweep.
func sliceNorms2(slices []*mat.SymDense) []float64 {
	out := make([]float64, len(slices))
	for i, M := range slices {
		m := mat.Norm(M, 2)
		out[i] = m * m
	}
	return out
}

// fitDiagonal is FitDiagonal with the slices' squared norms given. The
// quadratic forms w_aᵀ·M_i·w_a are summed as mat.Inner sums them (the same
// f64.DotUnitary calls over the same upper-triangle rows, in the same
// order, reached through floats.Dot): the same bits, without Inner's
// per-entry interface calls.
func fitDiagonal(slices []*mat.SymDense, norms2 []float64, W *mat.Dense) (diag [][]float64, residual float64, ok bool) {
	_, r := W.Dims()
	G := mat.NewSymDense(r, nil)
	cols := make([]*mat.VecDense, r)
	for j := range cols {
		cols[j] = mat.VecDenseCopyOf(W.ColView(j))
	}
	for a := 0; a < r; a++ {
		for b := a; b < r; b++ {
			c := mat.Dot(cols[a], cols[b])
			G.SetSym(a, b, c*c)
		}
	}
	var chol mat.Cholesky
	if !chol.Factorize(G) {
		return nil, math.Inf(1), false
	}
	res2, total2 := 0.0, 0.0
	diag = make([][]float64, len(slices))
	// Work matrices shared by the slices (the same operations, the same
	// bits, without four allocations per slice).
	rhs := mat.NewVecDense(r, nil)
	var fit mat.Dense
	scaled := mat.DenseCopyOf(W)
	for i, M := range slices {
		for a := 0; a < r; a++ {
			rhs.SetVec(a, innerSym(cols[a].RawVector().Data, M.RawSymmetric()))
		}
		var d mat.VecDense
		if err := chol.SolveVecTo(&d, rhs); err != nil {
			return nil, math.Inf(1), false
		}
		// Form the residual explicitly: the expanded quadratic form loses
		// all accuracy once the residual is below ~1e-8.
		scaled.Copy(W)
		for j := 0; j < r; j++ {
			col := scaled.ColView(j).(*mat.VecDense)
			col.ScaleVec(d.AtVec(j), col)
		}
		fit.Mul(scaled, W.T())
		fit.Sub(M, &fit)
		f := mat.Norm(&fit, 2)
		res2 += f * f
		total2 += norms2[i]
		diag[i] = d.RawVector().Data
	}
	if total2 == 0 {
		return diag, 0, true
	}
	return diag, math.Sqrt(res2 / total2), true
}

// innerSym is mat.Inner(x, M, x) for a symmetric M stored in its upper
// triangle and a unit-stride x, operation for operation: for each row i,
// x_i·(M[i, i:]·x[i:]) and then x_i·(M[i, i+1:]·x[i+1:]), each dot by
// f64.DotUnitary (floats.Dot), skipping zero x_i as Inner does.
func innerSym(x []float64, m blas64.Symmetric) float64 {
	n := m.N
	sum := 0.0
	for i := 0; i < n; i++ {
		xi := x[i]
		if xi == 0 {
			continue
		}
		row := m.Data[i*m.Stride+i : i*m.Stride+n]
		sum += xi * floats.Dot(row, x[i:n])
		if i != n-1 {
			sum += xi * floats.Dot(row[1:], x[i+1:n])
		}
	}
	return sum
}
