package twolayer

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// Selection records the checks behind Fit's automatic route choice.
type Selection struct {
	// Gaussian is the Gaussian-input screen of X.
	Gaussian *GaussianCheck `json:"gaussian,omitempty"`
	// Rank is the numerical rank of Y (σ_{r+1}/σ_1 < 1e-10).
	Rank int `json:"rank"`
	// ExactRank reports σ_{k+1}/σ_1 < 1e-10 for the k used (true when
	// k = m, where the rank cannot tell).
	ExactRank bool `json:"exact_rank"`
	// Classes is the number of classes of positively collinear output rows
	// with at least d members: samples where one unit alone is active
	// (Alg 7). More classes than Rank means U* lacks full column rank.
	Classes int `json:"classes"`
	// Orthogonality is the largest |cos| between two rows of the ICA
	// start: near 0 for orthonormal V*, the setting of Alg 3.
	Orthogonality float64 `json:"orthogonality,omitempty"`
	// Residual describes Y outside its top-k span when it is not exactly rank k.
	Residual *ResidualCheck `json:"residual,omitempty"`
	// Considered lists, in order, the routes considered and why each was
	// taken or passed over.
	Considered []errs.Message `json:"considered"`
}

// icaOrthogonality is the largest |cos| between two rows of the ICA start
// below which Fit takes the ICA route (Alg 3). For orthonormal V* FastICA's
// sources are the hidden activations and the start's rows are orthogonal to
// within 0.003–0.012 (n = 5e3…1e5); for a generic V* the sources are
// mixtures and the rows keep |cos| ≥ 0.18 (measured on d = 8…20).
const icaOrthogonality = 0.05

// icaScreenRows is how many samples (at most n) the ICA screen of Fit reads
// for inputs of dimension d: max(10⁴, 20·d). The screen only decides whether
// to try the ICA route (which then runs on all n rows and must certify), so
// it needs the start's orthogonality to a few thousandths, not the start
// itself. Measured (4 seeds each, d = 8…200, k = 2…20): for orthonormal V*
// the largest |cos| is ≤ 0.016 at 10⁴ rows (≤ 0.034 at 5·10³, ≤ 0.22 at
// 10³, where FastICA on k = 20 sources is still unsettled), and it falls
// like rows^{-1/2}; for generic V* or κ(V*) = 1.5 it is ≥ 0.085 at any row
// count from 2·10³ up. 10⁴ rows thus keep a 3× margin below
// icaOrthogonality; 20·d keeps ≥ 6·d samples in each least-squares row fit
// (the 30% most active). Reading the route's floor max(20·d, 200·k²)
// instead (8·10⁴ rows at k = 20) spent 1.9 s of a 14 s fit on the screen.
func icaScreenRows(d int) int { return max(10000, 20*d) }

// icaScreenTol is FastICA's tolerance in the ICA screen: unmixing rows
// that move less than 1e-6 rad per iteration change the start's largest
// |cos| by about that much, far below the few thousandths the screen reads
// (icaOrthogonality 0.05 against ≤ 0.016 and ≥ 0.085); the route itself
// runs FastICA to 1e-10. It stops the screen's FastICA after about half
// the iterations (20-5-8, 100-20-50, 30-10-10, 50-10-20: 34–71 → 19–42;
// the largest |cos| moved by < 1e-7).
const icaScreenTol = 1e-6

// icaScreenMaxIter caps the screen's FastICA iterations. For orthonormal V*
// the sources are independent and the screen settles in 8–17 iterations
// (d = 15…100, k = 5…20, 3 seeds each: TestICAScreenSettles, slow; generic
// V*: 19–42 above), while a generic V* can keep FastICA wandering to its
// default 1000 (d = k = m = 20, seed 2: 2.0 s of a 2.5 s fit; ~7 ms an
// iteration there). A screen
// that has not settled by then is read as "not orthonormal": at worst an
// orthonormal V* slower than measured goes to the exact route, which
// certifies it as well.
const icaScreenMaxIter = 30

// selector carries Fit's automatic route choice through its steps. Each
// step either returns a result (the route it stands for was taken) or nil
// and records in sel.Considered why it passed.
type selector struct {
	ctx      context.Context
	p        *problem
	X, Y     *mat.Dense
	opt      Options
	n, d, m  int
	k        int // hidden width: given, or inferred from Y's spectrum
	sel      *Selection
	warnings []errs.Message
	// gaussianDone records that sel.Gaussian is set (or X too small to check).
	gaussianDone bool
	// att carries the exact attempt of exactFirst to fitTensor.
	att exactAttempt
}

func (s *selector) note(format string, args ...any) {
	s.sel.Considered = append(s.sel.Considered, errs.Textf(format, args...))
}

// take finishes a result of the route chosen for reason why.
func (s *selector) take(res *Result, step, why string) *Result {
	s.note("%s: %s: taken", step, why)
	res.Reason = why + ". " + res.Reason
	res.Diagnostics.Selection = s.sel
	res.Warnings = append(s.warnings, res.Warnings...)
	return res
}

// recoverable reports an error that only means "this route does not fit the
// data", after which the selection goes on.
func recoverable(err error) bool {
	return errors.Is(err, ErrNotExact) || errors.Is(err, ErrInput)
}

// fitAuto is Fit's route selection (see Fit for the order; each step's doc
// gives its reasons).
func fitAuto(ctx context.Context, p *problem, opt Options) (*Result, error) {
	n, d, m := p.n, p.d, p.m
	s := &selector{ctx: ctx, p: p, X: p.X, Y: p.Y, opt: opt, n: n, d: d, m: m, sel: &Selection{}}
	svd, err := p.svdY()
	if err != nil {
		return nil, fmt.Errorf("%w: the SVD of Y failed: %v", ErrInput, err)
	}
	sv := svd.S
	s.sel.Rank = linalg.NumericalRank(sv, s.p.rankTol)
	s.k = opt.Hidden
	if s.k == 0 {
		s.k, _ = inferHidden(sv, d, n, s.p.rankTol)
	}
	s.sel.ExactRank = s.k >= min(m, len(sv)) || sv[s.k] <= s.p.rankTol*sv[0]

	for _, step := range []func() (*Result, error){s.exactFirst, s.screen, s.worstCase, s.fpt, s.ica, s.sparse} {
		res, err := step()
		if err != nil || res != nil {
			return res, err
		}
	}
	res, err := fitTensor(ctx, p, opt, s.sel, &s.att, false)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(s.warnings, res.Warnings...)
	return res, nil
}

// gaussianRoutes reports (ok) whether the Gaussian routes apply: X looks
// Gaussian (CheckGaussian, run once, or the caller's Options.Gaussian) and
// n is at least floor, their sample floor (minSamples). nonGaussian
// reports that the check ran and failed (ok is also false when n < floor).
func (s *selector) gaussianRoutes() (ok, nonGaussian bool, floor int, err error) {
	if !s.gaussianDone {
		s.gaussianDone = true
		if s.opt.Gaussian != nil {
			g := *s.opt.Gaussian
			s.sel.Gaussian = &g
		} else if s.n >= 8 {
			g, err := CheckGaussian(s.X, s.opt.Seed)
			if err != nil {
				return false, false, 0, err
			}
			s.sel.Gaussian = &g
		}
	}
	nonGaussian = s.sel.Gaussian != nil && !s.sel.Gaussian.Gaussian
	floor = minSamples(s.d, max(s.k, 1))
	return !nonGaussian && s.n >= floor, nonGaussian, floor, nil
}

// exactFirst (not in [BJW19]): where X looks Gaussian, n is at least the
// exact route's floor (exactFloor) and the data come from a ReLU network
// with Y exactly rank k (or k = m), the exact route runs from its first
// starts (zero-set, then parity) before any other step: it is
// the cheapest route that can certify (at d=100, k=20, m=50 the FPT, ICA and
// front door's bias screens together took as long as it), and no other
// route can do better than a network that reproduces Y on every sample.
// When it does not certify every unit, the rows it certified are kept for
// fitTensor's later starts (the tensor starts) and the steps after this one
// decide. Options.Start "tensor" skips it: the choice is then the paper's,
// and an orthonormal V* goes to the ICA route.
func (s *selector) exactFirst() (*Result, error) {
	_, nonGaussian, _, err := s.gaussianRoutes()
	if err != nil {
		return nil, err
	}
	if floor := exactFloor.need(s.d, max(s.k, 1)); nonGaussian || s.n < floor {
		s.note("exact first: not applicable (X does not look Gaussian, or n < %d)", floor)
		return nil, nil
	}
	res, err := fitTensor(s.ctx, s.p, s.opt, s.sel, &s.att, true)
	switch {
	case err != nil:
		return nil, err
	case res != nil:
		return s.take(res, "exact first", "exact data: the exact route from its first starts, the cheapest that can certify, runs before the other routes' screens"), nil
	case !s.att.parityTried:
		s.sel.Considered = append(s.sel.Considered, errs.Message{"exact first: not applicable (", s.att.why, ")"})
	default:
		s.sel.Considered = append(s.sel.Considered, errs.Message{"exact first: ", s.att.why, fmt.Sprintf("; %d certified rows kept for the tensor start", len(s.att.found.rows))})
		s.warnings = append(s.warnings, errs.Message{s.att.why, "; the route choice went on"})
	}
	return nil, nil
}

// screen runs the caller's Options.Screen once the exact attempt has not
// certified (the caller records what it found).
func (s *selector) screen() (*Result, error) {
	if s.opt.Screen == nil {
		return nil, nil
	}
	return nil, s.opt.Screen()
}

// worstCase: a non-Gaussian X or too few samples for the Gaussian routes,
// with Y exactly rank k and a small LP search, goes to Alg 1–2.
func (s *selector) worstCase() (*Result, error) {
	gaussian, nonGaussian, floor, err := s.gaussianRoutes()
	if err != nil {
		return nil, err
	}
	if gaussian {
		s.note("worst case: not needed (X looks Gaussian and n ≥ %d)", floor)
		return nil, nil
	}
	why := fmt.Sprintf("n = %d is below the Gaussian routes' floor of %d samples", s.n, floor)
	if nonGaussian {
		why = fmt.Sprintf("X does not look Gaussian (%s)", s.sel.Gaussian.Worst)
		s.warnings = append(s.warnings, errs.Textf("%s: the Gaussian routes have no guarantee here", why))
	}
	work := WorstCaseWork(s.n, s.k)
	switch {
	case s.opt.Activation != nn.ReLU:
		s.note("worst case: not for %s (Alg 1–2 are ReLU-only)", s.opt.Activation)
	case !s.sel.ExactRank || s.sel.Rank != s.k:
		s.note("worst case: %s, but Y is not exactly rank %d (rank %d), which Alg 2 needs", why, s.k, s.sel.Rank)
	case work > defaultMaxWork && !s.opt.Force:
		s.sel.Considered = append(s.sel.Considered, errs.Message{fmt.Sprintf("worst case: %s, but its search (%.1e LP units) is above the limit %.0e (", why, work, defaultMaxWork), errs.Option{Struct: "Options", Field: "Force"}, ")"})
	default:
		res, _, err := worstCase(s.ctx, s.p, WorstCaseOptions{Options: s.opt})
		if err == nil {
			// The worst-case route makes no assumption on X, so the
			// non-Gaussian warning does not apply to its answer.
			s.warnings = nil
			return s.take(res, "worst case", fmt.Sprintf("%s; Y is exactly rank %d and the LP search is small (%.1e units); the worst-case route (Alg 1–2) makes no assumption on X", why, s.k, work)), nil
		}
		if !errors.Is(err, ErrNotExact) {
			return nil, err
		}
		s.note("worst case: %s; tried, but %v", why, err)
	}
	return nil, nil
}

// fpt: more single-unit output directions than rank(Y), or a given k above
// it, means U* lacks full column rank: Alg 7.
func (s *selector) fpt() (*Result, error) {
	if !s.sel.ExactRank || s.opt.Activation != nn.ReLU {
		return nil, nil
	}
	classes, _, err := CollinearClasses(s.Y, 1e-9)
	if err != nil {
		return nil, err
	}
	for _, c := range classes {
		if len(c.Members) >= s.d {
			s.sel.Classes++
		}
	}
	if s.sel.Classes <= s.sel.Rank && s.opt.Hidden <= s.sel.Rank {
		s.note("fpt: not needed (%d collinearity classes with ≥ d members, rank(Y) = %d)", s.sel.Classes, s.sel.Rank)
		return nil, nil
	}
	why := fmt.Sprintf("Y has rank %d but %d classes of positively collinear outputs (units seen alone)", s.sel.Rank, s.sel.Classes)
	if s.opt.Hidden > s.sel.Rank {
		why = fmt.Sprintf("k = %d hidden units exceed rank(Y) = %d", s.opt.Hidden, s.sel.Rank)
	}
	why += ": U* lacks full column rank, the setting of Alg 7"
	res, err := fitFPT(s.ctx, s.p, FPTOptions{Options: s.opt})
	if err != nil {
		// No other route handles this setting: the error is the answer.
		return nil, fmt.Errorf("%s, and that route failed: %w", why, err)
	}
	return s.take(res, "fpt", why), nil
}

// ica: FastICA on a block of rows; if its start's rows are orthogonal, V*
// looks orthonormal: Alg 3.
func (s *selector) ica() (*Result, error) {
	if !s.sel.ExactRank || s.opt.Activation != nn.ReLU || s.n < minSamples(s.d, s.k) {
		return nil, nil
	}
	orth, settled, err := s.icaScreen(min(s.n, icaScreenRows(s.d)))
	switch {
	case err != nil && !errors.Is(err, ErrInput):
		return nil, err
	case err != nil:
		s.note("ica: not applicable (%v)", err)
		return nil, nil
	case !settled:
		s.note("ica: not applicable (FastICA on the screen's rows did not settle in %d iterations: the outputs do not unmix into independent sources, V* is not orthonormal)", icaScreenMaxIter)
		return nil, nil
	}
	s.sel.Orthogonality = orth
	if s.sel.Orthogonality >= icaOrthogonality {
		s.note("ica: not applicable (max |cos| between the ICA start's rows = %.2g ≥ %.2g: V* is not orthonormal)", s.sel.Orthogonality, icaOrthogonality)
		return nil, nil
	}
	why := fmt.Sprintf("FastICA's sources give nearly orthogonal rows (max |cos| = %.2g < %.2g): V* looks orthonormal, the setting of Alg 3", s.sel.Orthogonality, icaOrthogonality)
	res, err := fitICA(s.ctx, s.p, ICAOptions{Options: s.opt})
	if err != nil {
		if !recoverable(err) {
			return nil, err
		}
		s.note("ica: %s, but %v; falling back to the tensor route", why, err)
		return nil, nil
	}
	return s.take(res, "ica", why), nil
}

// icaScreen is the ICA route's start (ICAStart) on the first rows samples:
// FastICA on their k output channels, reduced by the whole data's top-k
// right singular vectors of Y (shared with every route), and the
// least-squares rows. It returns the largest |cos| between two rows and
// whether FastICA settled within icaScreenMaxIter iterations. The
// route's own checks (k ≤ min(d, m), rank(Y) ≥ k) run on the whole data,
// as the route would.
func (s *selector) icaScreen(rows int) (orth float64, settled bool, err error) {
	red0, err := reduceOutputs(s.p, s.opt.Hidden, "the ICA route", tensorFloor)
	if err != nil {
		return 0, false, err
	}
	k := red0.K
	X := s.X.Slice(0, rows, 0, s.d).(*mat.Dense)
	red := mat.NewDense(rows, k, nil)
	red.Mul(s.Y.Slice(0, rows, 0, s.m), red0.V.Slice(0, s.m, 0, k))
	est := &ICAEstimate{K: k}
	o := ICAOptions{Options: s.opt, MaxIter: icaScreenMaxIter}
	if err := icaUnmix(s.ctx, X, red, o, est, icaScreenTol); err != nil {
		return 0, false, err
	}
	return maxOffDiagCos(est.V), est.ICAConverged, nil
}

// sparse: Y not exactly rank k, with a residual made of a few large
// entries, is the sparse-noise setting of §8.
func (s *selector) sparse() (*Result, error) {
	if s.sel.ExactRank {
		return nil, nil
	}
	rc, err := CheckResidual(s.Y, s.k)
	if err != nil {
		return nil, err
	}
	s.sel.Residual = &rc
	if !rc.Sparse {
		s.note("sparse: not applicable (%.2g%% of the residual entries beyond %d robust standard deviations: dense noise)", 100*rc.OutlierFraction, sparseOutlierZ)
		return nil, nil
	}
	why := fmt.Sprintf("Y is not exactly rank %d, and %.2g%% of the entries outside its top-%d span lie beyond %d robust standard deviations, carrying most of the residual: sparse corruption (§8)", s.k, 100*rc.OutlierFraction, s.k, sparseOutlierZ)
	sr, err := fitSparse(s.ctx, s.p, SparseOptions{Options: s.opt})
	if err != nil {
		if !recoverable(err) {
			return nil, err
		}
		s.note("sparse: %s, but %v; falling back to the noisy route", why, err)
		s.warnings = append(s.warnings, errs.Message{"Y looks sparsely corrupted but the sparse-noise route could not certify (", err, "): the noisy route's estimate is biased by the corruptions"})
		return nil, nil
	}
	return s.take(&sr.Result, "sparse", why), nil
}
