package depth2

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/vec"
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
	// only up to the joint flip (W, B) → (−W, −B) ([ATV21, Claim 4.7]).
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
	// unreliable, which happens for very negative b_i, where Φ(b_i) ≈ 0).
	SignMargin float64 `json:"sign_margin,omitempty"`
}

// Thresholds are the parameters η₁, η₂, η₃ of [ATV21, Alg 4].
// The zero value calibrates them from the moments' noise estimates.
type Thresholds struct {
	// Rank is η₁, the absolute singular-value threshold on the flattenings
	// flatten(T_{2ℓ+1}, ℓ, ℓ+1) and flatten(T_{2ℓ+2}, ℓ, ℓ+2). 0 means
	// RankFactor times the spectral norm of the flattening's estimated noise
	// (split-half), or 1e-9 times the largest singular value for
	// population moments.
	Rank float64 `json:"rank"`
	// RankFactor is the multiple of the noise's spectral norm used when Rank
	// is 0. Default 3 (η₁ ≈ 3σ; the paper's η₁ is an unspecified polynomial).
	RankFactor float64 `json:"rank_factor"`
	// Prune is η₂, the absolute term norm below which a recovered rank-one
	// term is dropped. 0 means the same value as the rank threshold of its
	// tensor.
	Prune float64 `json:"prune"`
	// Dedupe is η₃: a candidate within Dedupe of an earlier one up to sign
	// (min ‖u ∓ v‖) is a duplicate. Default 0.3 (a practical value; the
	// paper's is an unspecified polynomial); 1e-6 in
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

// RecoverExact is Algorithm 1 ([ATV21, Alg 1, Theorem 4.2]): from exact
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

// RecoverRobust is Algorithm 4 ([ATV21, Alg 4, Theorem D.1]): from moment
// estimates T_0…T_{2ℓ+2} it returns units (â_i, ξ_i·b̂_i, ξ_i·ŵ_i) for every
// unit visible above the noise. Steps: the numerical ranks k′, k″ of
// flatten(T_{2ℓ+1}, ℓ, ℓ+1) and flatten(T_{2ℓ+2}, ℓ, ℓ+2) at η₁; Jennrich on
// each (random contractions of the last mode, projected on the top-k
// singular space, tensor.Jennrich with its retries and joint
// diagonalisation); terms with norm below η₂ dropped; duplicates up to sign
// removed at η₃, the better-determined copy kept (Strength decides, not the
// order: near a root of He_{2ℓ−1} or He_{2ℓ} one order's copy is junk); then
// RecoverScalars. Multi-output moments are
// handled by random output combinations per slice and a stacked flattening
// [M_1 … M_p], whose column span is still span{w_i^{⊗ℓ}}. The flattenings
// are formed in the symmetric basis (tensor.Matricize): same spectrum, a
// fraction of the size. Thresholds default to multiples of the split-half
// noise estimate, a deviation: the paper's constants are unspecified
// polynomials (docs/depth2.md, Deviations). Signs are not fixed; see FixSigns and
// LearnFullRank.
func RecoverRobust(mo *Moments, opt RecoverOptions) (*Recovery, error) {
	return recoverUnits(mo, opt, false, false)
}

// LearnFullRank is Algorithm 6 ([ATV21, Alg 6, Theorem 3.1]): Algorithm 4
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
	cands, err := decomposeOrders(mo, rec, th, exact, opt.Slices, rng)
	if err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return rec, fmt.Errorf("%w: both flattenings have every singular value below the rank threshold (%.3g, %.3g)", ErrNoUnits, rec.RankThresholds[0], rec.RankThresholds[1])
	}
	kept := dedupe(cands, th, rec)
	if err := addScalars(rec, kept, mo); err != nil {
		if errors.Is(err, ErrNoUnits) {
			return rec, err
		}
		return nil, err
	}
	if ell == 1 && fixSigns {
		fixUnitSigns(rec, mo)
	}
	for _, c := range rec.ScalarCond {
		if c > 1e8 {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("the scalar systems are ill-conditioned (κ = %.1e): units nearly parallel, or m close to the limit C(d+ℓ−1, ℓ)", c))
			break
		}
	}
	liftUnits(rec, mo)
	return rec, nil
}

// candidate is a unit direction found by Jennrich in one order.
type candidate struct {
	u        []float64
	order    int
	strength float64
}

// decomposeOrders is steps 1–4 of Algorithm 4 on the orders 2ℓ+1 and 2ℓ+2:
// the candidates of both, with the ranks, spectra and fits recorded in rec.
func decomposeOrders(mo *Moments, rec *Recovery, th Thresholds, exact bool, slices int, rng *rand.Rand) ([]candidate, error) {
	ell := rec.Ell
	var cands []candidate
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
		dec, err := decomposeOrder(T, noise, ell, th, exact, slices, rng)
		if err != nil {
			return nil, err
		}
		rec.Ranks[which] = len(dec.units)
		rec.Spectra[which] = dec.spectrum
		rec.RankThresholds[which] = dec.eta1
		rec.Jennrich[which] = dec.fit
		rec.Pruned += dec.pruned
		for i, u := range dec.units {
			cands = append(cands, candidate{u: u, order: order, strength: dec.strength[i]})
		}
	}
	return cands, nil
}

// dedupe is P6 of Algorithm 4: candidates up to sign within η₃ of a
// stronger one are dropped (counted in rec.Duplicates), and at most
// th.MaxUnits kept.
func dedupe(cands []candidate, th Thresholds, rec *Recovery) []candidate {
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].strength > cands[b].strength })
	var kept []candidate
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
	return kept
}

// addScalars is step 5 of Algorithm 4: RecoverScalars on the kept
// directions, and the units whose scalars are plausible appended to rec.
func addScalars(rec *Recovery, kept []candidate, mo *Moments) error {
	U := mat.NewDense(len(kept), mo.Dim(), nil)
	for i, c := range kept {
		U.SetRow(i, c.u)
	}
	B, A, cond, err := RecoverScalars(rec.Ell, U, mo)
	if err != nil {
		return err
	}
	rec.ScalarCond = cond
	for i, c := range kept {
		a := mat.Col(nil, i, A)
		// A bias beyond maxBias leaves φ(b) < 1e-16 of signal: the scalar
		// inversion met noise, and e^{b²/2} would blow â up.
		if math.Abs(B[i]) > maxBias || !kern.Finite(a) {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("dropped a component whose scalar inversion gave b = %.3g (|b| > %g or a non-finite weight: noise, not a unit)", B[i], maxBias))
			rec.Pruned++
			continue
		}
		rec.Units = append(rec.Units, Unit{W: c.u, B: B[i], A: a, Order: c.order, Strength: c.strength})
	}
	if len(rec.Units) == 0 {
		return fmt.Errorf("%w: every component's scalars were implausible", ErrNoUnits)
	}
	return nil
}

// fixUnitSigns runs FixSigns on rec's units and warns of unreliable signs.
// With more units than the moments' dimensions the first moment cannot fix
// them (FixSigns needs linearly independent units), and the signs are left
// to the refinement and ResolveSigns.
func fixUnitSigns(rec *Recovery, mo *Moments) {
	if m, k := len(rec.Units), mo.Dim(); m > k {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("signs left to the refinement: %d units in %d dimensions are too many for the first moment to fix (FixSigns needs m ≤ %d)", m, k, k))
		return
	}
	if err := FixSigns(rec.Units, mo); err != nil {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("signs not fixed: %v", err))
		return
	}
	rec.SignsFixed = true
	for _, u := range rec.Units {
		if u.SignMargin < 0.5 {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("unit with b = %.3g has an unreliable sign (FixSigns margin %.2f)", u.B, u.SignMargin))
		}
	}
}

// liftUnits maps rec's unit directions from the moments' reduced
// coordinates back to input coordinates (unit norm).
func liftUnits(rec *Recovery, mo *Moments) {
	if mo.Basis == nil {
		return
	}
	k := mo.Dim()
	for i := range rec.Units {
		w := make([]float64, mo.Basis.RawMatrix().Rows)
		mat.NewVecDense(len(w), w).MulVec(mo.Basis, mat.NewVecDense(k, rec.Units[i].W))
		vec.Normalize(w)
		rec.Units[i].W = w
	}
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
