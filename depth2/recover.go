package depth2

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// MaxEll is the largest order ℓ the algorithms accept. ℓ = 1 is the
// full-rank case (m ≤ d, tensors up to order 4), ℓ = 2 the overcomplete case
// (m ≤ d(d+1)/2, tensors up to order 6); higher ℓ needs order-8 moments,
// whose sampling error (∝ √(d⁸·8!/N)) makes them useless in practice.
const MaxEll = 2

// maxBias is the largest |b| RecoverScalars' output is trusted at: φ(8.5)
// ≈ 1e-16, so a larger value can only come from noise.
const maxBias = 8.5

// Unit is one hidden unit recovered from moments: a·ReLU(w·x + b) with
// unit w.
type Unit struct {
	// W is the unit weight vector (input coordinates).
	W []float64 `json:"w"`
	// B is the bias. When SignKnown is false the pair (W, B) is determined
	// only up to the joint flip (W, B) → (−W, −B) (specs/004 §2.4).
	B float64 `json:"b"`
	// A holds the output weights, one per output channel; it carries no
	// sign ambiguity.
	A []float64 `json:"a"`
	// Order is the moment order whose decomposition found the unit
	// (2ℓ+1 or 2ℓ+2).
	Order int `json:"order"`
	// Strength is the unit's term norm |α| in that tensor divided by the
	// rank threshold η₁ used for it (≥ 1 for every kept unit): a
	// signal-to-threshold ratio.
	Strength float64 `json:"strength"`
	// SignKnown reports that FixSigns (Alg 3) fixed the sign of (W, B).
	SignKnown bool `json:"sign_known"`
	// SignMargin is, after FixSigns, |z_i|/Φ(b_i) for the least-squares
	// solution z of Alg 3 (1 in the population case; near 0 the sign is
	// unreliable, which happens for very negative b_i, specs/004 §7.4 (9)).
	SignMargin float64 `json:"sign_margin,omitempty"`
}

// Thresholds are the parameters η₁, η₂, η₃ of Algorithm 4 (specs/004 §3.4).
// The zero value calibrates them from the moments' noise estimates.
type Thresholds struct {
	// Rank is η₁, the absolute singular-value threshold on the flattenings
	// flatten(T_{2ℓ+1}, ℓ, ℓ+1) and flatten(T_{2ℓ+2}, ℓ, ℓ+2). 0 means
	// RankFactor times the spectral norm of the flattening's estimated noise
	// (split-half), or 1e-9 times the largest singular value for
	// population moments.
	Rank float64 `json:"rank"`
	// RankFactor is the multiple of the noise's spectral norm used when Rank
	// is 0. Default 3 (specs/004 §3.4 "η₁ ≈ 3σ").
	RankFactor float64 `json:"rank_factor"`
	// Prune is η₂, the absolute term norm below which a recovered rank-one
	// term is dropped. 0 means the same value as the rank threshold of its
	// tensor.
	Prune float64 `json:"prune"`
	// Dedupe is η₃: a candidate within Dedupe of an earlier one up to sign
	// (min ‖u ∓ v‖) is a duplicate. Default 0.3 (specs/004 §3.4); 1e-6 in
	// RecoverExact, where copies agree to rounding.
	Dedupe float64 `json:"dedupe"`
	// MaxUnits caps the ranks k′, k″ (use the width m when it is known).
	// 0: no cap.
	MaxUnits int `json:"max_units"`
}

func (th Thresholds) withDefaults() Thresholds {
	if th.RankFactor <= 0 {
		th.RankFactor = 3
	}
	if th.Dedupe <= 0 {
		th.Dedupe = 0.3
	}
	return th
}

// RecoverOptions controls RecoverRobust.
type RecoverOptions struct {
	// Ell is the order ℓ (1 or 2; 0 means 1). Moments up to order 2ℓ+2
	// are needed.
	Ell int
	// Thresholds are η₁, η₂, η₃; the zero value calibrates them.
	Thresholds Thresholds
	// Seed seeds the random contractions of Jennrich's algorithm.
	Seed uint64
	// Slices is the number of random slices per tensor (default max(2k′, 8)).
	Slices int
}

// Recovery is the output of Algorithms 1 and 4: the units found, and what
// the algorithm met on the way.
type Recovery struct {
	Units []Unit `json:"units"`
	Ell   int    `json:"ell"`
	// Ranks are k′ and k″, the numerical ranks of the order-(2ℓ+1) and
	// order-(2ℓ+2) flattenings; Spectra their singular values (descending);
	// RankThresholds the η₁ used for each.
	Ranks          [2]int         `json:"ranks"`
	Spectra        [2][]float64   `json:"spectra"`
	RankThresholds [2]float64     `json:"rank_thresholds"`
	Jennrich       [2]JennrichFit `json:"jennrich"`
	// Pruned counts terms dropped by η₂, Duplicates those dropped by η₃.
	Pruned     int `json:"pruned"`
	Duplicates int `json:"duplicates"`
	// ScalarCond are the condition numbers of the Gram matrices
	// G^{(j)} = (ŴŴᵀ)^{∘j} of RecoverScalars, one per order j used.
	ScalarCond []float64 `json:"scalar_cond"`
	// SignsFixed reports that FixSigns ran (ℓ = 1).
	SignsFixed bool     `json:"signs_fixed"`
	Warnings   []string `json:"warnings,omitempty"`
}

// JennrichFit reports one Jennrich decomposition.
type JennrichFit struct {
	// Residual is the relative residual of the slices' joint
	// diagonalisation; MinGap the eigenvalue gap of the chosen pair.
	Residual float64 `json:"residual"`
	MinGap   float64 `json:"min_gap"`
}

// RecoverExact is Algorithm 1 (specs/004 §3.1, Theorem 4.2): from exact
// population moments f_0…f_{2ℓ+2} it recovers every unit (a_i, ξ_i·b_i,
// ξ_i·w_i), and for ℓ = 1 also the signs ξ_i (Algorithm 3). It assumes
// a_i ≠ 0, {w_i^{⊗ℓ}} linearly independent (m ≤ d for ℓ = 1, m ≤ d(d+1)/2
// generically for ℓ = 2) and no two w_i parallel. Ranks are numerical ranks
// at 1e-9 relative; the rest is RecoverRobust. Completeness rests on Lemma
// 4.3: He_{2ℓ−1} and He_{2ℓ} have no common root, so each unit appears in
// f_{2ℓ+1} or f_{2ℓ+2}. FixSigns needs the moments of a network without
// affine term (the paper's model).
func RecoverExact(mo *Moments, ell int, seed uint64) (*Recovery, error) {
	return recoverUnits(mo, RecoverOptions{Ell: ell, Seed: seed}, true, true)
}

// RecoverRobust is Algorithm 4 (specs/004 §3.4, Theorem D.1): from moment
// estimates T_0…T_{2ℓ+2} it returns units (â_i, ξ_i·b̂_i, ξ_i·ŵ_i) for every
// unit visible above the noise. Steps: the numerical ranks k′, k″ of
// flatten(T_{2ℓ+1}, ℓ, ℓ+1) and flatten(T_{2ℓ+2}, ℓ, ℓ+2) at η₁; Jennrich on
// each (random contractions of the last mode, projected on the top-k
// singular space, tensor.Jennrich with its retries and joint
// diagonalisation); terms with norm below η₂ dropped; duplicates up to sign
// removed at η₃, the better-determined copy kept (Strength decides, not the
// order, specs/004 §7.4 (3)); then RecoverScalars. Multi-output moments are
// handled by random output combinations per slice and a stacked flattening
// [M_1 … M_p], whose column span is still span{w_i^{⊗ℓ}}. The flattenings
// are formed in the symmetric basis (tensor.Matricize): same spectrum, a
// fraction of the size. Thresholds default to multiples of the split-half
// noise estimate (specs/004 §3.4 [ENG]); the paper's constants are
// unspecified polynomials. Signs are not fixed; see FixSigns and
// LearnFullRank.
func RecoverRobust(mo *Moments, opt RecoverOptions) (*Recovery, error) {
	return recoverUnits(mo, opt, false, false)
}

// LearnFullRank is Algorithm 6 (specs/004 §3.6, Theorem 3.1): Algorithm 4
// with ℓ = 1, then FixSigns (Algorithm 3) with T_1, giving (â_i, b̂_i, ŵ_i)
// with no sign ambiguity. It needs m ≤ d, W of full rank and moments up to
// order 4 of a network without affine term.
func LearnFullRank(mo *Moments, opt RecoverOptions) (*Recovery, error) {
	opt.Ell = 1
	return recoverUnits(mo, opt, mo.N == 0 && allZero(mo.Noise), true)
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// recoverUnits runs Algorithm 4 (exact: numerical-rank thresholds) and,
// when fixSigns and ℓ = 1, FixSigns.
func recoverUnits(mo *Moments, opt RecoverOptions, exact, fixSigns bool) (*Recovery, error) {
	ell := opt.Ell
	if ell == 0 {
		ell = 1
	}
	if ell < 1 || ell > MaxEll {
		return nil, fmt.Errorf("%w: order ℓ = %d; this implementation supports ℓ = 1 (full rank) and ℓ = 2 (overcomplete)", ErrInput, ell)
	}
	if mo == nil || len(mo.T) == 0 {
		return nil, fmt.Errorf("%w: no moments", ErrInput)
	}
	if need := 2*ell + 2; mo.MaxOrder() < need {
		return nil, fmt.Errorf("%w: ℓ = %d needs moments up to order %d, got %d", ErrInput, ell, need, mo.MaxOrder())
	}
	if exact && opt.Thresholds.Dedupe == 0 {
		// Exact moments give exact directions: copies of one unit agree to
		// rounding, while distinct units may be close.
		opt.Thresholds.Dedupe = 1e-6
	}
	th := opt.Thresholds.withDefaults()
	rng := rand.New(rand.NewPCG(opt.Seed, 0xdee9_2b1a5))
	rec := &Recovery{Ell: ell}
	k := mo.Dim()
	type cand struct {
		u        []float64
		order    int
		strength float64
	}
	var cands []cand
	for which, order := range []int{2*ell + 1, 2*ell + 2} {
		T := make([]*tensor.Symmetric, mo.Channels())
		for t := range T {
			T[t] = mo.T[t][order]
		}
		var noise []*tensor.Symmetric
		if mo.HalfDiff != nil {
			noise = make([]*tensor.Symmetric, mo.Channels())
			for t := range noise {
				noise[t] = mo.HalfDiff[t][order]
			}
		}
		dec, err := decomposeOrder(T, noise, ell, th, exact, opt.Slices, rng)
		if err != nil {
			return nil, err
		}
		rec.Ranks[which] = len(dec.units)
		rec.Spectra[which] = dec.spectrum
		rec.RankThresholds[which] = dec.eta1
		rec.Jennrich[which] = dec.fit
		rec.Pruned += dec.pruned
		for i, u := range dec.units {
			cands = append(cands, cand{u: u, order: order, strength: dec.strength[i]})
		}
	}
	if len(cands) == 0 {
		return rec, fmt.Errorf("%w: both flattenings have every singular value below the rank threshold (%.3g, %.3g)", ErrNoUnits, rec.RankThresholds[0], rec.RankThresholds[1])
	}
	// P6: dedupe up to sign, stronger candidates first.
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].strength > cands[b].strength })
	var kept []cand
	for _, c := range cands {
		dup := false
		for _, h := range kept {
			if signDistance(c.u, h.u) < th.Dedupe {
				dup = true
				break
			}
		}
		if dup {
			rec.Duplicates++
			continue
		}
		kept = append(kept, c)
	}
	if th.MaxUnits > 0 && len(kept) > th.MaxUnits {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("%d distinct components found; kept the %d strongest (the width cap)", len(kept), th.MaxUnits))
		kept = kept[:th.MaxUnits]
	}
	U := mat.NewDense(len(kept), k, nil)
	for i, c := range kept {
		U.SetRow(i, c.u)
	}
	B, A, cond, err := RecoverScalars(ell, U, mo)
	if err != nil {
		return nil, err
	}
	rec.ScalarCond = cond
	for i, c := range kept {
		a := mat.Col(nil, i, A)
		// A bias beyond maxBias leaves φ(b) < 1e-16 of signal: the scalar
		// inversion met noise, and e^{b²/2} would blow â up.
		if math.Abs(B[i]) > maxBias || !finiteSlice(a) {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("dropped a component whose scalar inversion gave b = %.3g (|b| > %g or a non-finite weight: noise, not a unit)", B[i], maxBias))
			rec.Pruned++
			continue
		}
		rec.Units = append(rec.Units, Unit{W: c.u, B: B[i], A: a, Order: c.order, Strength: c.strength})
	}
	if len(rec.Units) == 0 {
		return rec, fmt.Errorf("%w: every component's scalars were implausible", ErrNoUnits)
	}
	if ell == 1 && fixSigns {
		if err := FixSigns(rec.Units, mo); err != nil {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("signs not fixed: %v", err))
		} else {
			rec.SignsFixed = true
			for _, u := range rec.Units {
				if u.SignMargin < 0.5 {
					rec.Warnings = append(rec.Warnings, fmt.Sprintf("unit with b = %.3g has an unreliable sign (FixSigns margin %.2f)", u.B, u.SignMargin))
				}
			}
		}
	}
	for _, c := range cond {
		if c > 1e8 {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("the scalar systems are ill-conditioned (κ = %.1e): units nearly parallel, or m close to the limit C(d+ℓ−1, ℓ)", c))
			break
		}
	}
	// Lift to input coordinates.
	if mo.Basis != nil {
		for i := range rec.Units {
			w := make([]float64, mo.Basis.RawMatrix().Rows)
			mat.NewVecDense(len(w), w).MulVec(mo.Basis, mat.NewVecDense(k, rec.Units[i].W))
			normalize(w)
			rec.Units[i].W = w
		}
	}
	return rec, nil
}

// signDistance is min(‖u − v‖, ‖u + v‖).
func signDistance(u, v []float64) float64 {
	var dm, dp float64
	for i := range u {
		dm += (u[i] - v[i]) * (u[i] - v[i])
		dp += (u[i] + v[i]) * (u[i] + v[i])
	}
	return math.Sqrt(math.Min(dm, dp))
}

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
	l3 := K - 2*ell
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
		slices := make([]*mat.SymDense, nslices)
		p := len(T)
		for i := range slices {
			Tc := tensor.NewSymmetric(k, K)
			for t := 0; t < p; t++ {
				Tc.AddScaled(rng.NormFloat64(), T[t])
			}
			var C *tensor.Symmetric
			if l3 == 1 {
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
	// Term weights: least squares of T on {u_j^{⊗K}} per channel.
	Uu := mat.NewDense(rank, k, nil)
	for j, u := range units {
		Uu.SetRow(j, u)
	}
	lam, _, err := solveGram(Uu, K, T)
	if err != nil {
		return nil, fmt.Errorf("depth2: order-%d term weights: %w", K, err)
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
	return out, nil
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
// (specs/004 §3.0, P5): v itself for ℓ = 1, the eigenvector of the largest
// |eigenvalue| of the symmetric matrix v represents for ℓ = 2.
func extractDirection(v []float64, k, ell int) []float64 {
	if ell == 1 {
		u := append([]float64(nil), v...)
		normalize(u)
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
	normalize(u)
	return u
}

// solveGram solves the normal equations of T_t ≈ Σ_i ζ_{it}·u_i^{⊗j} for
// every channel t (unit rows u_i of U): G^{(j)}·ζ = r with G^{(j)} =
// (UUᵀ)^{∘j} and r_{it} = T_t(u_i, …, u_i) (specs/004 §3.2, tensor-free
// form). It returns ζ (m′×p) and κ(G^{(j)}).
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
	// Pseudo-inverse with a relative cutoff (specs/004 §7.4 (8)): a
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

// RecoverScalars is Algorithm 2 (specs/004 §3.2; Claim 4.6, Lemmas 4.5,
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
		z = -dot(g1, g0) / dot(g0, g0)
		beta = g0
	} else {
		q := ell - 1
		if g, h := gamma(ell), gamma(ell-1); dot(g, g) > dot(h, h) {
			q = ell
		}
		gq, gp, gm := gamma(q), gamma(q+1), gamma(q-1)
		num := make([]float64, len(gq))
		for t := range num {
			num[t] = gp[t] + float64(q)*gm[t]
		}
		z = -dot(num, gq) / dot(gq, gq)
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

// FixSigns is Algorithm 3 (specs/004 §3.3, proof of Theorem 3.1): in the
// full-rank case it resolves the joint sign of (w_i, b_i) from the
// first-order moment. With M's column i = vec(ŵ_i·â_iᵀ) (ŵ_i in the
// moments' coordinates, â_i over the channels), the least-squares solution
// of M·z = T_1 is z_i = ξ_i·Φ(b_i) in the population case, and Φ > 0, so
// ξ_i = sign(z_i); the units are flipped in place and marked SignKnown, with
// SignMargin = |z_i|/Φ(b̂_i). The appendix's system uses T_1 (T_0, a
// scalar, cannot fix m signs). It needs the w_i linearly independent and no
// affine term in the network; units must be in the moments' coordinates.
func FixSigns(units []Unit, mo *Moments) error {
	if len(units) == 0 {
		return nil
	}
	k, p := mo.Dim(), mo.Channels()
	if mo.MaxOrder() < 1 {
		return fmt.Errorf("%w: FixSigns needs the order-1 moment", ErrInput)
	}
	m := len(units)
	if m > k {
		return fmt.Errorf("%w: FixSigns needs m ≤ d linearly independent units, got m = %d in %d dimensions", ErrInput, m, k)
	}
	M := mat.NewDense(k*p, m, nil)
	rhs := mat.NewDense(k*p, 1, nil)
	for t := 0; t < p; t++ {
		for j := 0; j < k; j++ {
			rhs.Set(t*k+j, 0, mo.T[t][1].Data[j])
			for i, u := range units {
				M.Set(t*k+j, i, u.W[j]*u.A[t])
			}
		}
	}
	z, err := linalg.LstSq(M, rhs)
	if err != nil {
		return fmt.Errorf("depth2: FixSigns: %w", err)
	}
	for i := range units {
		zi := z.At(i, 0)
		if zi < 0 {
			for j := range units[i].W {
				units[i].W[j] = -units[i].W[j]
			}
			units[i].B = -units[i].B
		}
		units[i].SignKnown = true
		units[i].SignMargin = math.Abs(zi) / hermite.NormCDF(units[i].B)
	}
	return nil
}

func normalize(v []float64) {
	s := math.Sqrt(dot(v, v))
	if s == 0 {
		return
	}
	for i := range v {
		v[i] /= s
	}
}
