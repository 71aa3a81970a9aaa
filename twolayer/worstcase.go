package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// The worst-case exact route: Bakshi et al. §2, Lemma 1 (sign-pattern
// enumeration, "P0" in [BJW19, Lemma 1]), Alg 1 (IterativeLP) and Alg 2
// (ExactNeuralNet). It works for arbitrary inputs X — non-Gaussian, even
// adversarial — as long as rank(Y) = k, at a cost exponential in k. It is a
// reference solver for tiny instances (k ≤ 3, n ≤ ~60), not a practical
// learner; the Gaussian-input routes (TensorStart + ExactPolish) are.
//
// Row convention: the paper's V' ∈ R^{k×n}, a basis of rowspan(A), is here
// Bᵀ with B the n×k orthonormal basis of the column span of Y; the paper's
// y = wX ∈ R^n (a candidate pre-activation) is X·w with w ∈ R^d.

// RouteWorstCase names the worst-case exact route in Result.Route.
const RouteWorstCase = "worstcase-lp"

// ErrWorkLimit marks a refusal of the worst-case route because its
// exponential work estimate exceeds WorstCaseOptions.MaxWork. Errors wrapping
// it also wrap ErrInput: the fix is a smaller instance or Force.
// defaultMaxWork is WorstCaseOptions.MaxWork's default: about a minute of
// LPs on one core ([BJW19, Alg 2]'s guard rail).
const defaultMaxWork = 1e7

var ErrWorkLimit = errs.New("work limit exceeded", nil)

// WorstCaseOptions controls WorstCase. The zero value works.
type WorstCaseOptions struct {
	// Options are the learner's options (Fit passes its own); the route
	// reads Hidden, CertTol, Force and Progress, and WorstCase validates
	// them as Fit does (Route is ignored). Hidden 0 infers k as the
	// numerical rank of Y (σ_{k+1}/σ_1 < RankTol); a given k must equal
	// that rank: Alg 2 needs rank(Y) = k (Thm 1), and without it the problem
	// is NP-hard (Thm 2). The answer must meet CertTol, the relative
	// residual ‖Y − ReLU(XVᵀ)Uᵀ‖_F/‖Y‖_F; otherwise WorstCase returns an
	// error wrapping ErrNotExact. CertTol's default here is 1e-8 (16·u =
	// 9.5e-7 for float32 data, certify.DefaultTol). Force runs the route
	// even above MaxWork.
	Options
	// RankTol is the relative singular-value threshold of the numerical rank
	// of Y (and of X). Default 1e-10 (64·u for float32 data).
	RankTol float64
	// SignTol decides "> 0" when reading a sign pattern off a vector v: an
	// entry counts as positive when it exceeds SignTol·max|v|. Default 1e-9.
	SignTol float64
	// NullTol is the relative singular-value threshold below which the
	// equality constraints of Alg 1 count as having a null space. Default
	// 1e-9.
	NullTol float64
	// LPTol is the simplex tolerance. Default 1e-9.
	LPTol float64
	// MaxWork caps the work estimate C(2n,k)·2k (practical default, not in [BJW19]): above it
	// WorstCase refuses with an error wrapping ErrWorkLimit that says how long
	// the run would take. Default 1e7.
	MaxWork float64
}

// withDefaults fills in the defaults of the route's own tolerances.
func (o WorstCaseOptions) withDefaults() WorstCaseOptions {
	if o.RankTol <= 0 {
		o.RankTol = 1e-10
	}
	if o.SignTol <= 0 {
		o.SignTol = 1e-9
	}
	if o.NullTol <= 0 {
		o.NullTol = 1e-9
	}
	if o.LPTol <= 0 {
		o.LPTol = 1e-9
	}
	if o.MaxWork <= 0 {
		o.MaxWork = defaultMaxWork
	}
	return o
}

// WorstCaseReport is what the worst-case route did, beyond Result.
type WorstCaseReport struct {
	// Patterns is |𝒮|; Subsets and Singular as in PatternSet.
	Patterns, Subsets, Singular int
	// WithNullSpace counts the patterns whose equality constraints have a
	// non-trivial solution (the only ones that reach an LP).
	WithNullSpace int
	// LPs solved, LPFailures where gonum's simplex broke down, Rejected LP
	// solutions that failed the direct check.
	LPs, LPFailures, Rejected int
	// Chosen are the sign patterns of the k recovered units.
	Chosen []SignPattern
	// Work is C(2n,k)·2k; EstimatedSeconds the calibrated time estimate.
	Work, EstimatedSeconds float64
}

// WorstCase finds an exact two-layer network Y = ReLU(X·Vᵀ)·Uᵀ for arbitrary
// inputs X — Bakshi et al. Thm 1, Alg 2 (ExactNeuralNet) with Lemma 1's
// candidate patterns and Alg 1's LPs. It needs rank(Y) = k exactly (then
// some factorisation exists and is found); it makes no distributional
// assumption on X, which may be non-Gaussian or adversarial.
//
// Steps: B = the top-k left singular vectors of Y (the paper's V', better
// conditioned than k rows of A); 𝒮 = EnumerateSignPatterns(B); for units
// i = 1..k, the first pattern of 𝒮 whose LP (IterativeLP) is feasible gives
// a row w_i whose activation ReLU(X·w_i) lies in col(Y) and is independent
// of the previous ones; then U solves Y = ReLU(X·Wᵀ)·Uᵀ by least squares
// and V = W. The result must meet the residual certificate CertTol, else an
// error wrapping ErrNotExact is returned.
//
// The recovered V need not equal the teacher's V* up to permutation and
// scaling: Thm 1 promises some exact factorisation, not identifiability
// (worst-case X can admit several). Differences from the paper: the LPs are
// in the smaller (w, z) form with 2(k−i+1) instead of 2n linearisations, and
// their equality constraints are eliminated through an exact null-space
// basis, because gonum's simplex needs a full-rank constraint matrix.
//
// Cost: Θ(C(n,k)·n·2^k) for 𝒮 plus one n×(r+k) SVD per pattern and a few
// small LPs — exponential in k. It is a reference solver for tiny
// instances (k ≤ 3, n ≤ ~60); above WorstCaseWork(n,k) = MaxWork it refuses
// unless Force is set, saying how long it would take.
func WorstCase(ctx context.Context, X, Y *mat.Dense, opt WorstCaseOptions) (*Result, error) {
	res, _, err := WorstCaseWithReport(ctx, X, Y, opt)
	return res, err
}

// WorstCaseWithReport is WorstCase, also returning what the route did. The
// report is non-nil whenever the enumeration started, even on error.
func WorstCaseWithReport(ctx context.Context, X, Y *mat.Dense, opt WorstCaseOptions) (*Result, *WorstCaseReport, error) {
	if err := opt.validateRoute(); err != nil {
		return nil, nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, nil, err
	}
	return worstCase(ctx, p, opt)
}

// worstCase is WorstCaseWithReport on a resolved problem.
func worstCase(ctx context.Context, p *problem, opt WorstCaseOptions) (*Result, *WorstCaseReport, error) {
	began := time.Now()
	// The data's precision sets the rank test and the certificate unless
	// the caller did (float32 data: 64·u and 16·u); the route's own
	// certificate default is at least 1e-8.
	if opt.RankTol <= 0 {
		opt.RankTol = p.rankTol
	}
	if opt.CertTol == 0 {
		opt.CertTol = max(1e-8, certify.DefaultTol(p.roundoff))
	}
	opt = opt.withDefaults()
	X, Y, n := p.X, p.Y, p.n
	svd, err := p.svdY()
	if err != nil {
		return nil, nil, fmt.Errorf("twolayer: SVD of Y: %w", err)
	}
	s := svd.S
	k, err := worstCaseHidden(p, opt, s)
	if err != nil {
		return nil, nil, err
	}
	rep := &WorstCaseReport{Work: WorstCaseWork(n, k)}
	B := svd.UCols(k)
	prob, err := newWCProblem(X, B, opt)
	if err != nil {
		return nil, nil, err
	}
	if rep.Work > opt.MaxWork {
		rep.EstimatedSeconds = estimateSeconds(prob)
		if !opt.Force {
			return nil, rep, fmt.Errorf("%w: %w", ErrInput, errs.Options(ErrWorkLimit,
				fmt.Sprintf("the worst-case route (Alg 2) on n = %d samples with k = %d units needs ≈ %.2g work units (C(2n,k)·2k; limit %.0e), an estimated %s or less on this machine (C(n,k) = %.3g sign systems, ~%.3g candidate patterns); it is exponential in k and meant for k ≤ 3, n ≤ ~60. Set ",
					n, k, rep.Work, opt.MaxWork, humanSeconds(rep.EstimatedSeconds), binom(n, k), GenericPatternCount(n, k)),
				errs.Option{Struct: "WorstCaseOptions", Field: "Force"}, " to run it anyway, or use fewer samples"))
		}
	}

	set, W, err := worstCaseSearch(ctx, prob, B, k, opt, rep)
	if err != nil {
		return nil, rep, err
	}

	U, condF, err := SolveU(X, Y, W, nn.ReLU)
	if err != nil {
		return nil, rep, fmt.Errorf("%w: %w", ErrNotExact, err)
	}
	F := activations(X, W)
	resid := residualOf(F, Y, U)
	if !(resid <= opt.CertTol) {
		return nil, rep, fmt.Errorf("%w: the worst-case route found %d units but their residual %.2e exceeds %.0e", ErrNotExact, k, resid, opt.CertTol)
	}
	res := &Result{
		Model: nn.NewTwoLayer(W, U).Canonical(),
		Route: RouteWorstCase,
		Reason: fmt.Sprintf("worst-case exact route (Bakshi et al. Alg 2): %d sign patterns from %d k-subsets, %d with a null space, %d LPs; the network is an exact factorisation of Y, not necessarily the teacher's",
			set.Len(), set.Subsets, rep.WithNullSpace, rep.LPs),
		Certificate: Certificate{Residual: resid, Tol: opt.CertTol, Samples: n, Met: true},
	}
	res.Diagnostics.Hidden = k
	res.Diagnostics.HiddenInferred = opt.Hidden == 0
	res.Diagnostics.SingularValuesY = s
	res.Diagnostics.CondF = condF
	if prob.r < prob.d {
		res.Warnings = append(res.Warnings, errs.Textf("X has rank %d < d = %d: V is only determined on the row span of X (the returned rows have no component outside it)", prob.r, prob.d))
	}
	if rep.LPFailures > 0 {
		res.Warnings = append(res.Warnings, errs.Textf("gonum's simplex broke down on %d of %d LPs (treated as infeasible)", rep.LPFailures, rep.LPs))
	}
	res.Elapsed = time.Since(began)
	return res, rep, nil
}

// worstCaseSearch is Alg 2's search for the k rows of W: the candidate
// sign patterns of the basis B (EnumerateSignPatterns), their null spaces
// (patternNulls) and the LPs that pick one pattern per unit
// (worstCaseUnits). It returns the patterns and W, and fills rep.
func worstCaseSearch(ctx context.Context, prob *wcProblem, B *mat.Dense, k int, opt WorstCaseOptions, rep *WorstCaseReport) (*PatternSet, *mat.Dense, error) {
	set, err := EnumerateSignPatterns(ctx, B, PatternOptions{SignTol: opt.SignTol, Progress: func(done, total int) {
		opt.progress("sign patterns", done, total)
	}})
	if err != nil {
		return nil, nil, err
	}
	rep.Patterns, rep.Subsets, rep.Singular = set.Len(), set.Subsets, set.Singular
	nulls, err := patternNulls(ctx, prob, set, opt, rep)
	if err != nil {
		return nil, nil, err
	}
	W, err := worstCaseUnits(ctx, prob, set, nulls, k, opt, rep)
	if err != nil {
		return nil, nil, err
	}
	return set, W, nil
}

// worstCaseHidden is the worst-case route's hidden width: the numerical
// rank of Y (singular values s), which Options.Hidden must equal when set
// (Alg 2 needs rank(Y) = k, Thm 1), and at most m and n.
func worstCaseHidden(p *problem, opt WorstCaseOptions, s []float64) (int, error) {
	rank := linalg.NumericalRank(s, opt.RankTol)
	k := opt.Hidden
	if k == 0 {
		k = rank
	} else if k != rank {
		why := "it cannot be written with fewer units"
		if k > rank {
			why = "Alg 2 needs rank(Y) = k (Thm 1); for rank(Y) < k deciding whether an exact network exists is NP-hard (Thm 2)"
		}
		return 0, fmt.Errorf("%w: Y has numerical rank %d (σ_{i+1}/σ_1 < %.0e) but %d hidden units were asked for: %s; pass Hidden = %d or 0", ErrInput, rank, opt.RankTol, k, why, rank)
	}
	if k > p.m || k > p.n {
		return 0, fmt.Errorf("%w: k = %d needs at least k outputs and samples (m = %d, n = %d)", ErrInput, k, p.m, p.n)
	}
	return k, nil
}

// patternNulls computes the null space of every sign pattern of set once
// (Alg 2's linear constraints), reused for every unit; patterns with an
// empty null space, or no active sample, have none (nil).
func patternNulls(ctx context.Context, prob *wcProblem, set *PatternSet, opt WorstCaseOptions, rep *WorstCaseReport) ([]*mat.Dense, error) {
	nulls := make([]*mat.Dense, set.Len())
	for t, S := range set.Patterns {
		if t&63 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			opt.progress("null spaces", t, set.Len())
		}
		if S.Count() == 0 {
			continue // f(y) = 0 is never independent
		}
		N, err := prob.nullBasis(S)
		if err != nil {
			return nil, fmt.Errorf("twolayer: null space of pattern %d: %w", t, err)
		}
		if N != nil {
			nulls[t] = N
			rep.WithNullSpace++
		}
	}
	return nulls, nil
}

// worstCaseUnits finds the k rows of W one at a time (Alg 2): for each
// unit, the first pattern whose LP (iterativeLP) gives an activation in
// col(Y) independent of the previous units'.
func worstCaseUnits(ctx context.Context, prob *wcProblem, set *PatternSet, nulls []*mat.Dense, k int, opt WorstCaseOptions, rep *WorstCaseReport) (*mat.Dense, error) {
	W := mat.NewDense(k, prob.d, nil)
	var prevZ [][]float64
	for i := 0; i < k; i++ {
		opt.progress("units", i, k)
		Nperp, err := complementBasis(prevZ, k)
		if err != nil {
			return nil, err
		}
		found := false
		for t, S := range set.Patterns {
			if nulls[t] == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			w, z, ok := prob.iterativeLP(S, nulls[t], Nperp)
			if !ok {
				continue
			}
			W.SetRow(i, w)
			prevZ = append(prevZ, z)
			rep.Chosen = append(rep.Chosen, S)
			found = true
			break
		}
		rep.LPs, rep.LPFailures, rep.Rejected = prob.lps, prob.lpFail, prob.rejected
		if !found {
			return nil, fmt.Errorf("%w: unit %d of %d: no candidate sign pattern (of %d, %d with a null space) gives an activation in col(Y) independent of the previous ones (%d LPs, %d simplex breakdowns); Y is rank %d but is not ReLU(X·Vᵀ)·Uᵀ exactly — noisy outputs?",
				ErrNotExact, i+1, k, set.Len(), rep.WithNullSpace, rep.LPs, rep.LPFailures, k)
		}
	}
	opt.progress("units", k, k)
	return W, nil
}

// estimateSeconds times a sample of the route's two costly steps on the
// actual data — k×k sign systems (all C(n,k) subsets are visited) and
// pattern null spaces (at most GenericPatternCount of them; fewer when many
// samples are inactive for every unit) — and extrapolates. The LPs are
// left out: they only run on the few patterns with a null space.
func estimateSeconds(p *wcProblem) float64 {
	n, k := p.n, p.k
	e := newEnumerator(p.B, PatternOptions{SignTol: p.opt.SignTol, CondMax: 1e12})
	rng := rand.New(rand.NewPCG(1, 2))
	// Time-boxed samples of the two unit costs: a refusal must come back
	// quickly however large the instance is.
	const budget = 200 * time.Millisecond
	trials := 0
	t0 := time.Now()
	for trials < 2000 && (trials == 0 || time.Since(t0) < budget) {
		e.subset(rng.Perm(n)[:k])
		trials++
	}
	perSubset := time.Since(t0).Seconds() / float64(trials)
	pats := append(e.set.Patterns, NewSignPattern(n, 0))
	nulls := 0
	t0 = time.Now()
	for nulls < 8 && (nulls == 0 || time.Since(t0) < budget) {
		p.nullBasis(pats[nulls%len(pats)])
		nulls++
	}
	perNull := time.Since(t0).Seconds() / float64(nulls)
	return binom(n, k)*perSubset + GenericPatternCount(n, k)*perNull
}

func humanSeconds(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.0f s", math.Ceil(s))
	case s < 2*3600:
		return fmt.Sprintf("%.0f min", s/60)
	case s < 2*86400:
		return fmt.Sprintf("%.1f h", s/3600)
	case s < 2*365*86400:
		return fmt.Sprintf("%.0f days", s/86400)
	default:
		return fmt.Sprintf("%.2g years", s/(365*86400))
	}
}
