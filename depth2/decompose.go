package depth2

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// orderDecomposition is the result of one Jennrich step.
type orderDecomposition struct {
	units    [][]float64 // unit vectors in the moments' coordinates
	strength []float64
	spectrum []float64
	eta1     float64
	fit      JennrichFit
	pruned   int
}

// decomposeOrder runs steps 2–4 of Algorithm 4 on one order K = 2ℓ+ℓ₃
// (ℓ₃ ∈ {1, 2}) for all channels.
func decomposeOrder(T, noise []*tensor.Symmetric, ell int, th Thresholds, exact bool, nslices int, rng *rand.Rand) (*orderDecomposition, error) {
	K := T[0].Order
	k := T[0].Dim
	// Flattening [M_1 … M_p], D_ℓ × p·D_{K−ℓ}, in the symmetric basis.
	M := stackMatricize(T, ell)
	U, s, _, err := linalg.ThinSVD(M)
	if err != nil {
		return nil, fmt.Errorf("depth2: SVD of the order-%d flattening: %w", K, err)
	}
	out := &orderDecomposition{spectrum: s}
	switch {
	case th.Rank > 0:
		out.eta1 = th.Rank
	case exact || noise == nil:
		out.eta1 = 1e-9 * s[0]
	default:
		_, sn, _, err := linalg.ThinSVD(stackMatricize(noise, ell))
		if err != nil {
			return nil, fmt.Errorf("depth2: SVD of the order-%d noise: %w", K, err)
		}
		out.eta1 = th.RankFactor * sn[0]
	}
	if s[0] == 0 {
		return out, nil
	}
	rank := 0
	for _, v := range s {
		if v >= out.eta1 {
			rank++
		}
	}
	if th.MaxUnits > 0 {
		rank = min(rank, th.MaxUnits)
	}
	if rank == 0 {
		return out, nil
	}
	D := SymLenEll(k, ell)
	P := mat.DenseCopyOf(U.Slice(0, D, 0, rank))
	var comps *mat.Dense // D×rank, unit columns ∝ ±w_i^{⊗ℓ} (embedded)
	if rank == 1 {
		comps = P
		out.fit = JennrichFit{MinGap: 1}
	} else {
		if nslices <= 0 {
			nslices = max(2*rank, 8)
		}
		slices := randomSlices(T, P, ell, nslices, rng)
		dec, err := tensor.Jennrich(slices, rng, tensor.JennrichOptions{})
		if err != nil {
			if errors.Is(err, tensor.ErrNoDecomposition) {
				return nil, fmt.Errorf("depth2: order-%d tensor of rank %d: %w", K, rank, err)
			}
			return nil, err
		}
		out.fit = JennrichFit{Residual: dec.Residual, MinGap: dec.MinGap}
		comps = mat.NewDense(D, rank, nil)
		comps.Mul(P, dec.W)
	}
	units := make([][]float64, rank)
	for j := 0; j < rank; j++ {
		units[j] = extractDirection(mat.Col(nil, j, comps), k, ell)
	}
	if err := out.keepStrong(units, T, th); err != nil {
		return nil, err
	}
	return out, nil
}

// keepStrong is step 4's pruning: the term weights of the units (least
// squares of T on {u_j^{⊗K}} per channel), and the units whose weight norm
// reaches η₂ kept in out with their strength (norm/η₁).
func (out *orderDecomposition) keepStrong(units [][]float64, T []*tensor.Symmetric, th Thresholds) error {
	K, k := T[0].Order, T[0].Dim
	rank := len(units)
	Uu := mat.NewDense(rank, k, nil)
	for j, u := range units {
		Uu.SetRow(j, u)
	}
	lam, _, err := solveGram(Uu, K, T)
	if err != nil {
		return fmt.Errorf("depth2: order-%d term weights: %w", K, err)
	}
	prune := th.Prune
	if prune <= 0 {
		prune = out.eta1
	}
	for j, u := range units {
		norm := mat.Norm(lam.RowView(j), 2)
		if norm < prune {
			out.pruned++
			continue
		}
		out.units = append(out.units, u)
		out.strength = append(out.strength, norm/out.eta1)
	}
	return nil
}

// SymLenEll is the dimension C(k+ℓ−1, ℓ) of the symmetric subspace holding
// the w^{⊗ℓ}: the most units order ℓ can separate in k dimensions.
func SymLenEll(k, ell int) int { return tensor.SymLen(k, ell) }

// stackMatricize returns [Matricize_ℓ(T_1) … Matricize_ℓ(T_p)].
func stackMatricize(T []*tensor.Symmetric, ell int) *mat.Dense {
	blocks := make([]*mat.Dense, len(T))
	cols := 0
	for t, x := range T {
		blocks[t] = x.Matricize(ell)
		_, c := blocks[t].Dims()
		cols += c
	}
	r, _ := blocks[0].Dims()
	M := mat.NewDense(r, cols, nil)
	at := 0
	for _, b := range blocks {
		_, c := b.Dims()
		M.Slice(0, r, at, at+c).(*mat.Dense).Copy(b)
		at += c
	}
	return M
}

// extractDirection returns the unit vector u with v ∝ ±SymEmbed(u, ℓ)
// (a rank-one term of [ATV21, Alg 4] step 2): v itself for ℓ = 1, the
// eigenvector of the largest
// |eigenvalue| of the symmetric matrix v represents for ℓ = 2.
func extractDirection(v []float64, k, ell int) []float64 {
	if ell == 1 {
		u := append([]float64(nil), v...)
		vec.Normalize(u)
		return u
	}
	S := tensor.SymUnembed2(v, k)
	var eig mat.EigenSym
	if !eig.Factorize(S, true) {
		u := make([]float64, k)
		u[0] = 1
		return u
	}
	vals := eig.Values(nil)
	best := 0
	for i, x := range vals {
		if math.Abs(x) > math.Abs(vals[best]) {
			best = i
		}
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	u := mat.Col(nil, best, &vecs)
	vec.Normalize(u)
	return u
}

// randomSlices returns nslices projected slices of the order-K tensors T
// (Jennrich's input, [ATV21, Alg 4] steps 2–3): a random combination of the
// channels, contracted in its last K − 2ℓ modes with a random vector (ℓ₃ = 1)
// or symmetric matrix (ℓ₃ = 2), flattened to D_ℓ × D_ℓ and projected on the
// top singular space P (D_ℓ × rank), symmetrised.
func randomSlices(T []*tensor.Symmetric, P *mat.Dense, ell, nslices int, rng *rand.Rand) []*mat.SymDense {
	K, k := T[0].Order, T[0].Dim
	_, rank := P.Dims()
	slices := make([]*mat.SymDense, nslices)
	for i := range slices {
		Tc := tensor.NewSymmetric(k, K)
		for t := range T {
			Tc.AddScaled(rng.NormFloat64(), T[t])
		}
		var C *tensor.Symmetric
		if K-2*ell == 1 {
			g := make([]float64, k)
			for j := range g {
				g[j] = rng.NormFloat64()
			}
			C = Tc.Contract(g)
		} else {
			G := mat.NewSymDense(k, nil)
			for a := 0; a < k; a++ {
				for b := a; b < k; b++ {
					G.SetSym(a, b, rng.NormFloat64())
				}
			}
			C = Tc.ContractSym(G)
		}
		var S mat.Dense
		S.Product(P.T(), C.Matricize(ell), P)
		sym := mat.NewSymDense(rank, nil)
		for a := 0; a < rank; a++ {
			for b := a; b < rank; b++ {
				sym.SetSym(a, b, (S.At(a, b)+S.At(b, a))/2)
			}
		}
		slices[i] = sym
	}
	return slices
}
