package tensor

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// JointDiagonalize refines unit columns W (k×r) so that every slice satisfies
// M_i ≈ W·diag(d_i)·Wᵀ in least squares, by alternating the two exact
// partial minimisations of Yeredor's AC–DC algorithm: DC, the diagonals d_i
// for fixed W (FitDiagonal), and AC, each column w_j for fixed diagonals and
// other columns — the top eigenvector of Σ_i d_ij·(M_i − Σ_{l≠j} d_il w_l w_lᵀ).
// The residual never increases. It stops after sweeps sweeps (default 100) or
// when a sweep improves the residual by less than 1e-12 relative.
func JointDiagonalize(slices []*mat.SymDense, W0 *mat.Dense, sweeps int) *Decomposition {
	if sweeps <= 0 {
		sweeps = 100
	}
	k, r := W0.Dims()
	W := mat.DenseCopyOf(W0)
	diag, res, ok := FitDiagonal(slices, W)
	if !ok {
		return &Decomposition{W: W, Residual: math.Inf(1)}
	}
	Q := mat.NewSymDense(k, nil)
	var eig mat.EigenSym
	var vecs mat.Dense
	for sweep := 0; sweep < sweeps; sweep++ {
		for j := 0; j < r; j++ {
			// Q = Σ_i d_ij·M_i − Σ_{l≠j} (Σ_i d_ij d_il)·w_l w_lᵀ.
			Q.Zero()
			for i, M := range slices {
				Q.AddSym(Q, scaledSym(diag[i][j], M))
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
			if !eig.Factorize(Q, true) {
				continue
			}
			vals := eig.Values(nil)
			if vals[k-1] <= 0 {
				continue
			}
			eig.VectorsTo(&vecs)
			W.SetCol(j, mat.Col(nil, k-1, &vecs))
		}
		nd, nres, ok := FitDiagonal(slices, W)
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

func scaledSym(a float64, M *mat.SymDense) *mat.SymDense {
	n := M.SymmetricDim()
	out := mat.NewSymDense(n, nil)
	out.ScaleSym(a, M)
	return out
}
