package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// This file holds the practical pieces of Bakshi et al. Alg 8 ("Neural net
// low-rank approximation with Gaussian input and noise", §7, Theorem 13;
// [BJW19, Alg 8]): arbitrary noise E independent of X, with only a
// prediction guarantee ‖A − U·f(VX)‖_F ≤ (1+O(ε))·‖E‖_F.
//
// Practical:   HalfspaceEstimate (closed form of the convex program of
//              Thm 12), Alg8Labels (sign labels with smoothing noise),
//              Alg8Select (Alg 8 on a supplied candidate list: the final
//              selection by regression residual), Alg8GridK1 (the paper's
//              full grid, k = 1 only, with a 1- or 2-row sketch).
// Not practical: the full Alg 8, whose grid has Alg8GridSize(k, s, ε, κ)
//              candidates: for k = 2, κ = 2, ε = 0.1 and a sketch with
//              s = k/δ² = 200 rows (c₁ = 1), each of the k·s = 400 grid
//              entries takes 2·(k⁸κ⁸ε⁻⁸ + 1) + 1 ≈ 1.3e13 values, so
//              ν ≈ 10^5250. Even k = 1 with s = 100 gives ν ≈ 10^330 at
//              ε = 0.5. It is not implemented.

// RouteAlg8 names results of Alg8Select and Alg8GridK1.
const RouteAlg8 = "alg8-candidates"

// HalfspaceEstimate returns the unit vector w = s/‖s‖, s = Σ_q y_q·x_q, for
// labels y_q (±1) on the rows x_q of X: the maximiser of Σ_q y_q⟨w, x_q⟩ over
// ‖w‖ ≤ 1, which is the convex program of [BJW19, Thm 12] (after
// Plan–Vershynin 2013) in closed form — no solver is needed. For x ~ N(0, I)
// and noiseless labels y = sign(⟨v, x⟩), E‖w − v‖² ≈ (π/2)(d−1)/n
// (TestHalfspaceEstimateRate). It returns an error wrapping ErrInput for
// mismatched sizes, non-finite input or s = 0.
func HalfspaceEstimate(X *mat.Dense, y []float64) ([]float64, error) {
	if X == nil || X.IsEmpty() {
		return nil, fmt.Errorf("%w: X is nil or empty", ErrInput)
	}
	n, d := X.Dims()
	if len(y) != n {
		return nil, fmt.Errorf("%w: %d labels for %d samples", ErrInput, len(y), n)
	}
	s := make([]float64, d)
	for q := 0; q < n; q++ {
		if math.IsNaN(y[q]) || math.IsInf(y[q], 0) {
			return nil, fmt.Errorf("%w: label %d is %v", ErrInput, q, y[q])
		}
		if y[q] == 0 {
			continue
		}
		for j, v := range X.RawRowView(q) {
			s[j] += y[q] * v
		}
	}
	nrm := math.Sqrt(dot(s, s))
	if !(nrm > 0) || math.IsInf(nrm, 0) {
		return nil, fmt.Errorf("%w: Σ y_q·x_q is %v: the labels carry no direction (all zero, or X non-finite)", ErrInput, nrm)
	}
	for j := range s {
		s[j] /= nrm
	}
	return s, nil
}

// Alg8Labels returns the n×k sign labels of Alg 8 step 3b for one candidate
// M (k×s) and sketch S (s×m): sign(Y·Sᵀ·Mᵀ + G), G with i.i.d. N(0, η²)
// entries drawn from rng row-major (the paper's k×n sign(M·S·A + G),
// transposed). The smoothing noise G is what the proof of Thm 12 adds to
// make the label function smooth; η = 0 gives no smoothing (rng may then be
// nil). Alg8Eta gives the paper's scale.
func Alg8Labels(Y, M, S *mat.Dense, eta float64, rng *rand.Rand) (*mat.Dense, error) {
	if Y == nil || M == nil || S == nil {
		return nil, fmt.Errorf("%w: Y, M and S are required", ErrInput)
	}
	n, m := Y.Dims()
	k, s := M.Dims()
	s2, m2 := S.Dims()
	if s2 != s || m2 != m {
		return nil, fmt.Errorf("%w: M is %d×%d and S is %d×%d, need M k×s and S s×m with m = %d outputs", ErrInput, k, s, s2, m2, m)
	}
	if !(eta >= 0) || math.IsInf(eta, 0) {
		return nil, fmt.Errorf("%w: smoothing η = %v must be finite and ≥ 0", ErrInput, eta)
	}
	if eta > 0 && rng == nil {
		return nil, fmt.Errorf("%w: smoothing η > 0 needs a random source", ErrInput)
	}
	var MS mat.Dense
	MS.Mul(M, S) // k×m
	L := mat.NewDense(n, k, nil)
	L.Mul(Y, MS.T())
	d := L.RawMatrix().Data
	for i := range d {
		v := d[i]
		if eta > 0 {
			v += eta * rng.NormFloat64()
		}
		switch {
		case v > 0:
			d[i] = 1
		case v < 0:
			d[i] = -1
		default:
			d[i] = 0
		}
	}
	return L, nil
}

// Alg8Eta returns the entry standard deviation of the smoothing noise G of
// Alg 8 step 3a: ε⁻²·κ²·k·‖M·S·E‖_F/√n (our reading of the typeset
// exponent, which is garbled), given an estimate of ‖M·S·E‖_F. The paper's constants are
// Θ(·); this is the expression with constant 1.
func Alg8Eta(normMSE float64, n int, eps, kappa float64, k int) float64 {
	return normMSE * kappa * kappa * float64(k) / (eps * eps * math.Sqrt(float64(n)))
}

// Alg8GridSize returns log10 of the number ν of candidate matrices in the
// full grid of Alg 8 step 2 for k hidden units, an s-row sketch, accuracy ε
// and condition number κ, with the paper's unspecified constants set to 1:
// each of the k·s entries takes the values ±(1+ε⁴/k⁴)^{−i}/σ_min for
// 0 ≤ i ≤ k⁸κ⁸ε⁻⁸, and 0 (the grid must contain negative values and 0,
// erratum §8.7).
func Alg8GridSize(k, s int, eps, kappa float64) float64 {
	I := math.Floor(math.Pow(float64(k), 8) * math.Pow(kappa, 8) * math.Pow(eps, -8))
	return float64(k*s) * math.Log10(2*(I+1)+1)
}

// Alg8Options controls Alg8Select and Alg8GridK1. The zero value works.
type Alg8Options struct {
	// Eta is the smoothing noise η of the labels (default 0: none).
	Eta float64
	// Seed seeds the smoothing noise (one stream per candidate, derived
	// from Seed and the candidate's index, so results do not depend on the
	// order of evaluation).
	Seed uint64
	// Progress, if non-nil, is called after each candidate.
	Progress func(done, total int)
}

// Alg8Result is the outcome of Alg8Select.
type Alg8Result struct {
	Result
	// Best is the index of the selected candidate; Residuals holds
	// ‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F for every candidate (+Inf where the candidate
	// failed, e.g. labels with no direction); ZeroResidual is ‖Y‖_F, the
	// residual of the trivial answer U = 0 that Alg 8 falls back to.
	Best         int
	Residuals    []float64
	ZeroResidual float64
}

// Alg8Select runs Alg 8 on a supplied list of candidate matrices M (each
// k×s) and a sketch S (s×m): for each candidate the labels of Alg8Labels
// give the rows of V by HalfspaceEstimate (step 3c), U is the least-squares
// fit (step 4), and the candidate with the smallest residual
// ‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F is kept. This is the selection logic of Bakshi et
// al. Alg 8 without the astronomically large grid (see Alg8GridSize); the
// candidates can be, e.g., an estimate of (S·U*)⁻¹ from the tensor route, or
// the oracle (S·U*)⁺ + Λ in tests (Prop 5; TestAlg8SelectPicksOracle). If no
// candidate beats U = 0, the answer is U = 0 with a warning (the paper's
// special case). The result only has the prediction guarantee of Thm 13:
// there is no exactness certificate (Certificate.Met is false).
// Cost per candidate: n·m·s for the labels, n·d·k for V, and the
// least-squares U (n·k² + n·k·m).
func Alg8Select(ctx context.Context, X, Y, S *mat.Dense, candidates []*mat.Dense, opt Alg8Options) (*Alg8Result, error) {
	began := time.Now()
	n, d, m, err := checkData(X, Y)
	if err != nil {
		return nil, err
	}
	k, err := checkAlg8Candidates(S, candidates, n, d, m)
	if err != nil {
		return nil, err
	}
	out := &Alg8Result{Best: -1, Residuals: make([]float64, len(candidates)), ZeroResidual: mat.Norm(Y, 2)}
	var bestV, bestU *mat.Dense
	best := math.Inf(1)
	for ci, M := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out.Residuals[ci] = math.Inf(1)
		V, U, err := alg8Candidate(X, Y, S, M, ci, k, opt)
		if err != nil {
			return nil, err
		}
		if V == nil {
			continue
		}
		r := residualOf(activations(X, V), Y, U) * out.ZeroResidual
		out.Residuals[ci] = r
		if r < best {
			best, out.Best, bestV, bestU = r, ci, V, U
		}
		if opt.Progress != nil {
			opt.Progress(ci+1, len(candidates))
		}
	}
	res := &out.Result
	if bestV == nil || best >= out.ZeroResidual {
		res.Warnings = append(res.Warnings, errs.Message{"no candidate beat the trivial answer U = 0; returning it (Alg 8's special case)"})
		bestV = mat.NewDense(k, d, nil)
		for p := 0; p < k; p++ {
			bestV.Set(p, p%d, 1)
		}
		bestU = mat.NewDense(m, k, nil)
		best = out.ZeroResidual
		out.Best = -1
	}
	res.Model = nn.NewTwoLayer(bestV, bestU).Canonical()
	res.Route = RouteAlg8
	res.Reason = fmt.Sprintf("candidate %d of %d has the smallest regression residual (%.4g, ‖Y‖_F = %.4g)", out.Best, len(candidates), best, out.ZeroResidual)
	res.Certificate = Certificate{Residual: best / out.ZeroResidual, Samples: n}
	res.Diagnostics.Hidden = k
	res.Diagnostics.CondF = linalg.Cond(activations(X, bestV))
	res.Elapsed = time.Since(began)
	return out, nil
}

// checkAlg8Candidates checks Alg8Select's sketch S (s×m) and candidates
// (all k×s, k ≤ d and k ≤ n) and returns k.
func checkAlg8Candidates(S *mat.Dense, candidates []*mat.Dense, n, d, m int) (int, error) {
	if len(candidates) == 0 {
		return 0, fmt.Errorf("%w: no candidate matrices given", ErrInput)
	}
	if S == nil {
		return 0, fmt.Errorf("%w: the sketch S is nil", ErrInput)
	}
	if _, ms := S.Dims(); ms != m {
		return 0, fmt.Errorf("%w: sketch S has %d columns, Y has %d outputs", ErrInput, ms, m)
	}
	k := 0
	for i, M := range candidates {
		if M == nil || M.IsEmpty() {
			return 0, fmt.Errorf("%w: candidate %d is nil or empty", ErrInput, i)
		}
		r, _ := M.Dims()
		if i == 0 {
			k = r
		} else if r != k {
			return 0, fmt.Errorf("%w: candidate %d has %d rows, candidate 0 has %d (all must be k×s)", ErrInput, i, r, k)
		}
	}
	if k > d || k > n {
		return 0, fmt.Errorf("%w: k = %d hidden units exceed d = %d or n = %d", ErrInput, k, d, n)
	}
	return k, nil
}

// alg8Candidate is Alg 8's network for candidate M (number ci): labels
// from the sketched outputs (Alg8Labels, its own RNG stream), each row of
// V by halfspace estimation, U by least squares. V is nil for a degenerate
// candidate (a halfspace or U that cannot be estimated).
func alg8Candidate(X, Y, S, M *mat.Dense, ci, k int, opt Alg8Options) (*mat.Dense, *mat.Dense, error) {
	_, d := X.Dims()
	rng := rand.New(rand.NewPCG(opt.Seed^(uint64(ci)+1)*0x9E3779B97F4A7C15, 0x9E3779B97F4A7C15))
	labels, err := Alg8Labels(Y, M, S, opt.Eta, rng)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate %d: %w", ci, err)
	}
	V := mat.NewDense(k, d, nil)
	ok := true
	for p := 0; p < k && ok; p++ {
		w, err := HalfspaceEstimate(X, mat.Col(nil, p, labels))
		if err != nil {
			ok = false
			break
		}
		V.SetRow(p, w)
	}
	if !ok {
		return nil, nil, nil
	}
	U, _, err := SolveU(X, Y, V, nn.ReLU)
	if err != nil {
		return nil, nil, nil // e.g. two identical rows of V: a degenerate candidate
	}
	return V, U, nil
}

// Alg8GridOptions controls Alg8GridK1.
type Alg8GridOptions struct {
	Alg8Options
	// Eps is the accuracy ε of the grid (default 0.5; must be in (0, 1)).
	Eps float64
	// SigmaMin is the guess for σ_min(S·U*) (for k = 1, ‖S·u*‖). Default:
	// ‖Y·Sᵀ‖_F/√(n/2), which is exact for noiseless data since
	// E[ReLU(g)²] = 1/2.
	SigmaMin float64
	// MaxCandidates refuses grids larger than this (default 100000).
	MaxCandidates int
}

// Alg8GridK1 runs the paper's full Alg 8 — the grid of step 2 enumerated and
// every candidate scored by Alg8Select — for k = 1 hidden unit only (κ = 1),
// and only when the grid is small: with an s-row sketch it has
// (2·(⌊ε⁻⁸⌋+1)+1)^s candidates (515 for s = 1, ε = 0.5), so in practice
// s ∈ {1, 2}. k > 1 is refused: the grid is astronomically large (see
// Alg8GridSize) and the practical route is Alg8Select with good candidates.
func Alg8GridK1(ctx context.Context, X, Y, S *mat.Dense, opt Alg8GridOptions) (*Alg8Result, error) {
	_, _, m, err := checkData(X, Y)
	if err != nil {
		return nil, err
	}
	if S == nil || S.IsEmpty() {
		return nil, fmt.Errorf("%w: the sketch S is nil or empty", ErrInput)
	}
	if _, ms := S.Dims(); ms != m {
		return nil, fmt.Errorf("%w: sketch S has %d columns, Y has %d outputs", ErrInput, ms, m)
	}
	if opt.MaxCandidates < 0 {
		return nil, fmt.Errorf("%w: MaxCandidates %d is negative (0 means 100000)", ErrInput, opt.MaxCandidates)
	}
	if opt.Eps == 0 {
		opt.Eps = 0.5
	}
	if !(opt.Eps > 0 && opt.Eps < 1) {
		return nil, fmt.Errorf("%w: ε = %v must be in (0, 1)", ErrInput, opt.Eps)
	}
	if opt.MaxCandidates == 0 {
		opt.MaxCandidates = 100000
	}
	s, _ := S.Dims()
	logNu := Alg8GridSize(1, s, opt.Eps, 1)
	if logNu > math.Log10(float64(opt.MaxCandidates)) {
		return nil, fmt.Errorf("%w: the k = 1 grid for a %d-row sketch at ε = %v has 10^%.1f candidates > MaxCandidates = %d; use a 1- or 2-row sketch or a larger ε", ErrInput, s, opt.Eps, logNu, opt.MaxCandidates)
	}
	sigma := opt.SigmaMin
	if sigma == 0 {
		var YS mat.Dense
		YS.Mul(Y, S.T())
		n, _ := Y.Dims()
		sigma = mat.Norm(&YS, 2) / math.Sqrt(float64(n)/2)
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return nil, fmt.Errorf("%w: σ_min guess %v must be positive and finite", ErrInput, sigma)
	}
	I := int(math.Floor(math.Pow(opt.Eps, -8)))
	ratio := 1 + math.Pow(opt.Eps, 4)
	values := []float64{0}
	for i := 0; i <= I; i++ {
		v := math.Pow(ratio, -float64(i)) / sigma
		values = append(values, v, -v)
	}
	var cands []*mat.Dense
	idx := make([]int, s)
	for {
		M := mat.NewDense(1, s, nil)
		for j, t := range idx {
			M.Set(0, j, values[t])
		}
		cands = append(cands, M)
		j := 0
		for j < s && idx[j] == len(values)-1 {
			idx[j] = 0
			j++
		}
		if j == s {
			break
		}
		idx[j]++
	}
	return Alg8Select(ctx, X, Y, S, cands, opt.Alg8Options)
}
