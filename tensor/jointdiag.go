package tensor

import (
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// JointDiagonalize refines unit columns W (k×r) so that every slice satisfies
// M_i ≈ W·diag(d_i)·Wᵀ in least squares, by alternating the two exact
// partial minimisations of Yeredor's AC–DC algorithm: DC, the diagonals d_i
// for fixed W (FitDiagonal), and AC, each column w_j for fixed diagonals and
// other columns — the top eigenvector of Σ_i d_ij·(M_i − Σ_{l≠j} d_il w_l w_lᵀ)
// (topEigen: that one eigenpair, not the whole eigendecomposition).
// Each AC–DC run stops after sweeps sweeps (default 100) or when a sweep
// improves the residual by less than 1e-12 relative.
//
// AC–DC is a local method, and a noisy start can leave two columns on the
// same component while another component is missed. After each run, a column
// nearly parallel to another (|cos| > 0.95) is restarted from the top
// eigenvector of Σ_i R_i², R_i being slice i minus every other column's
// contribution: the missing component dominates what is left.
func JointDiagonalize(slices []*mat.SymDense, W0 *mat.Dense, sweeps int) *Decomposition {
	return jointDiagonalize(slices, sliceNorms2(slices), W0, sweeps)
}

// jointDiagonalize is JointDiagonalize with the slices' squared norms given
// (sliceNorms2).
func jointDiagonalize(slices []*mat.SymDense, norms2 []float64, W0 *mat.Dense, sweeps int) *Decomposition {
	W := mat.DenseCopyOf(W0)
	_, r := W.Dims()
	var best *Decomposition
	for restart := 0; restart <= r; restart++ {
		d := acdc(slices, norms2, W, sweeps)
		if best == nil || d.Residual < best.Residual {
			best = d
		}
		// Two nearly parallel columns are usually a noisy start's merged
		// pair, but true components can be that close too: a restart is
		// tried from what AC–DC reached (never from the start itself, which
		// may already fit exactly) and kept only if it fits better.
		j := duplicateColumn(d.W)
		if j < 0 || best.Residual <= exactFit {
			break
		}
		W = mat.DenseCopyOf(d.W)
		W.SetCol(j, missingComponent(slices, norms2, W, j))
	}
	return best
}

// exactFit is the relative residual at which a joint diagonalisation is
// exact to rounding: no restart can improve it.
const exactFit = 1e-12

// duplicateColumn returns a column nearly parallel to an earlier one, or −1.
func duplicateColumn(W *mat.Dense) int {
	_, r := W.Dims()
	for j := 1; j < r; j++ {
		for i := 0; i < j; i++ {
			if math.Abs(mat.Dot(W.ColView(i), W.ColView(j))) > 0.95 {
				return j
			}
		}
	}
	return -1
}

// missingComponent returns the top eigenvector of Σ_i R_i², R_i being slice
// i minus its least-squares fit on every column of W but j.
func missingComponent(slices []*mat.SymDense, norms2 []float64, W *mat.Dense, j int) []float64 {
	k, r := W.Dims()
	others := mat.NewDense(k, r-1, nil)
	for l, at := 0, 0; l < r; l++ {
		if l != j {
			others.SetCol(at, mat.Col(nil, l, W))
			at++
		}
	}
	diag, _, ok := fitDiagonal(slices, norms2, others)
	if !ok {
		return mat.Col(nil, j, W)
	}
	sum := mat.NewSymDense(k, nil)
	R := mat.NewSymDense(k, nil)
	var sq mat.Dense
	for i, M := range slices {
		R.CopySym(M)
		for l := 0; l < r-1; l++ {
			R.SymRankOne(R, -diag[i][l], others.ColView(l))
		}
		sq.Mul(R, R)
		for a := 0; a < k; a++ {
			for b := a; b < k; b++ {
				sum.SetSym(a, b, sum.At(a, b)+(sq.At(a, b)+sq.At(b, a))/2)
			}
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(sum, true) {
		return mat.Col(nil, j, W)
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	return mat.Col(nil, k-1, &vecs)
}

// acdc runs AC–DC sweeps from W (modified in place).
func acdc(slices []*mat.SymDense, norms2 []float64, W *mat.Dense, sweeps int) *Decomposition {
	if sweeps <= 0 {
		sweeps = 100
	}
	k, r := W.Dims()
	diag, res, ok := fitDiagonal(slices, norms2, W)
	if !ok {
		return &Decomposition{W: W, Residual: math.Inf(1)}
	}
	Q := mat.NewSymDense(k, nil)
	var ws eigWork
	for sweep := 0; sweep < sweeps; sweep++ {
		for j := 0; j < r; j++ {
			// Q = Σ_i d_ij·M_i − Σ_{l≠j} (Σ_i d_ij d_il)·w_l w_lᵀ.
			// The upper triangle, entry by entry as Q.AddSym(Q, scaled M_i)
			// would (the same bits), without a k×k matrix per slice.
			Q.Zero()
			q := Q.RawSymmetric()
			for i, M := range slices {
				f, mr := diag[i][j], M.RawSymmetric()
				for a := 0; a < k; a++ {
					// qa[b] += f·ma[b], by f64.AxpyUnitary (on amd64
					// gonum's assembly: a multiply and an add per entry,
					// no FMA, the loop's bits).
					floats.AddScaled(q.Data[a*q.Stride+a:a*q.Stride+k], f, mr.Data[a*mr.Stride+a:a*mr.Stride+k])
				}
			}
			for l := 0; l < r; l++ {
				if l == j {
					continue
				}
				c := 0.0
				for i := range slices {
					c += diag[i][j] * diag[i][l]
				}
				Q.SymRankOne(Q, -c, W.ColView(l))
			}
			lam, v, ok := topEigen(Q, &ws)
			if !ok || lam <= 0 {
				continue
			}
			W.SetCol(j, v)
		}
		nd, nres, ok := fitDiagonal(slices, norms2, W)
		if !ok {
			break
		}
		improved := res - nres
		diag, res = nd, nres
		if improved < 1e-12*math.Max(res, 1e-300) {
			break
		}
	}
	return &Decomposition{W: W, Diag: diag, Residual: res}
}
