package depth2

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/tensor"
)

// solveGram solves the normal equations of T_t ≈ Σ_i ζ_{it}·u_i^{⊗j} for
// every channel t (unit rows u_i of U): G^{(j)}·ζ = r with G^{(j)} =
// (UUᵀ)^{∘j} and r_{it} = T_t(u_i, …, u_i): [ATV21, Alg 2] step 1 in a
// tensor-free form, since (Ŵ^{⊙j})ᵀŴ^{⊙j} = (ŴŴᵀ)^{∘j}. It returns ζ (m′×p) and κ(G^{(j)}).
func solveGram(U *mat.Dense, j int, T []*tensor.Symmetric) (*mat.Dense, float64, error) {
	m, _ := U.Dims()
	G := tensor.KhatriRaoGram(U, j)
	R := mat.NewDense(m, len(T), nil)
	for i := 0; i < m; i++ {
		u := U.RawRowView(i)
		for t, x := range T {
			R.Set(i, t, x.Apply(u))
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(G, true) {
		return nil, math.Inf(1), fmt.Errorf("eigen-decomposition of the %d×%d Gram matrix failed", m, m)
	}
	vals := eig.Values(nil)
	cond := math.Inf(1)
	if vals[0] > 0 {
		cond = vals[m-1] / vals[0]
	}
	// Pseudo-inverse with a relative cutoff (not in the paper): a
	// rank-deficient Gram (parallel units, or m beyond C(k+j−1, j)) gives
	// the minimum-norm solution instead of garbage.
	var V mat.Dense
	eig.VectorsTo(&V)
	var VtR mat.Dense
	VtR.Mul(V.T(), R)
	for a := 0; a < m; a++ {
		inv := 0.0
		if vals[a] > 1e-13*vals[m-1] {
			inv = 1 / vals[a]
		}
		row := VtR.RawRowView(a)
		for t := range row {
			row[t] *= inv
		}
	}
	var Z mat.Dense
	Z.Mul(&V, &VtR)
	return &Z, cond, nil
}

// RecoverScalars is Algorithm 2 ([ATV21, Alg 2]; Claim 4.6, Lemmas 4.5,
// D.10, D.11): given the unit directions ŵ_i (rows of W, in the moments'
// coordinates, each up to sign) it returns b̂_i = ξ_i·b_i and the output
// weights â_i (p per unit, no sign ambiguity, as columns of A).
//
// For each order j (j ∈ {2, 3} when ℓ = 1, j ∈ {ℓ, …, ℓ+3} when ℓ ≥ 2) it
// solves T_j = Σ_i ζ_j(i)·ŵ_i^{⊗j} by the tensor-free normal equations
// (solveGram); then γ_h(i) = ζ_{h+2}(i) = (−1)^h·He_h(z)·β_i with
// β_i = a_i·φ(b_i) and z = ξ_i·b_i. For ℓ = 1: ẑ = −γ₁/γ₀ (Lemma D.11). For
// ℓ ≥ 2: q = argmax_{h∈{ℓ−1,ℓ}} |γ_h| (the separation of Lemma 4.3), ẑ =
// −(γ_{q+1} + q·γ_{q−1})/γ_q by the recurrence z·He_q = He_{q+1} + q·He_{q−1},
// β̂ = (−1)^q·γ_q/He_q(ẑ). Finally â = √(2π)·β̂·e^{ẑ²/2}. With several
// output channels the γ_h(i) are vectors parallel to (a_{ti})_t, and each
// ratio is their least-squares ratio (projection on γ_q). It also returns
// the condition numbers of the Gram matrices.
func RecoverScalars(ell int, W *mat.Dense, mo *Moments) (B []float64, A *mat.Dense, cond []float64, err error) {
	if ell < 1 || ell > MaxEll {
		return nil, nil, nil, fmt.Errorf("%w: order ℓ = %d", ErrInput, ell)
	}
	m, k := W.Dims()
	if k != mo.Dim() {
		return nil, nil, nil, fmt.Errorf("%w: directions have %d coordinates, moments %d", ErrInput, k, mo.Dim())
	}
	lo, hi := ell, ell+3
	if ell == 1 {
		lo, hi = 2, 3
	}
	if mo.MaxOrder() < hi {
		return nil, nil, nil, fmt.Errorf("%w: RecoverScalars with ℓ = %d needs moments up to order %d", ErrInput, ell, hi)
	}
	p := mo.Channels()
	gamma := make(map[int]*mat.Dense) // h → m×p
	for j := lo; j <= hi; j++ {
		T := make([]*tensor.Symmetric, p)
		for t := range T {
			T[t] = mo.T[t][j]
		}
		Z, c, err := solveGram(W, j, T)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("depth2: RecoverScalars order %d: %w", j, err)
		}
		cond = append(cond, c)
		gamma[j-2] = Z
	}
	B = make([]float64, m)
	A = mat.NewDense(p, m, nil)
	for i := 0; i < m; i++ {
		z, a := invertScalars(ell, func(h int) []float64 { return gamma[h].RawRowView(i) })
		B[i] = z
		A.SetCol(i, a)
	}
	return B, A, cond, nil
}

// invertScalars is the per-unit step of RecoverScalars (Lemmas 4.5, D.10,
// D.11): from γ_h = (−1)^h·He_h(z)·β (vectors over the channels), h =
// ℓ−2…ℓ+1 (h = 0, 1 for ℓ = 1), it returns z and a = √(2π)·β·e^{z²/2}.
func invertScalars(ell int, gamma func(h int) []float64) (z float64, a []float64) {
	var beta []float64
	if ell == 1 {
		g0, g1 := gamma(0), gamma(1)
		z = -vec.Dot(g1, g0) / vec.Dot(g0, g0)
		beta = g0
	} else {
		q := ell - 1
		if g, h := gamma(ell), gamma(ell-1); vec.Dot(g, g) > vec.Dot(h, h) {
			q = ell
		}
		gq, gp, gm := gamma(q), gamma(q+1), gamma(q-1)
		num := make([]float64, len(gq))
		for t := range num {
			num[t] = gp[t] + float64(q)*gm[t]
		}
		z = -vec.Dot(num, gq) / vec.Dot(gq, gq)
		he := hermite.He(q, z)
		sign := 1.0
		if q%2 == 1 {
			sign = -1
		}
		beta = make([]float64, len(gq))
		for t := range beta {
			beta[t] = sign * gq[t] / he
		}
	}
	if math.IsNaN(z) || math.IsInf(z, 0) {
		z = 0
	}
	scale := math.Sqrt(2*math.Pi) * math.Exp(z*z/2)
	a = make([]float64, len(beta))
	for t := range a {
		a[t] = scale * beta[t]
	}
	return z, a
}
