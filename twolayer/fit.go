package twolayer

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// Fit learns Y ≈ φ(X·Vᵀ)·Uᵀ (φ = Options.Activation, the ReLU by default)
// and chooses the route from what the data show (Options.Route "auto"), in
// this order:
//
//  1. Exact first (not in [BJW19]): X looks Gaussian (CheckGaussian), n is
//     at least the exact route's floor (exactFloor), φ is the ReLU and Y
//     is exactly rank k (or k = m): the exact route from the zero-set start
//     (zeroset.go), then the parity start (k ≤ parityMaxK), the cheapest
//     route that can certify, before any other route's screen.
//     Skipped with Options.Start "tensor" (the paper's choice).
//  2. Options.Screen, the caller's (package learner's bias screen).
//  3. Worst case (Alg 1–2): X does not look Gaussian or n is below the
//     Gaussian routes' floor, Y is exactly rank k and the LP search is
//     small.
//  4. FPT (Alg 7): Y shows more single-unit output directions than its rank
//     (CollinearClasses), or the given k exceeds rank(Y): U* lacks full
//     column rank.
//  5. ICA (Alg 3): FastICA's start has orthogonal rows: V* is orthonormal.
//  6. Sparse (§8): Y is not exactly rank k and its residual is a few large
//     entries (CheckResidual): robust PCA, then the exact route.
//  7. Exact (Alg 4 + 5): Y is exactly rank k (σ_{k+1}/σ_1 < 1e-10, or k = m);
//     the start is polished to an exact answer, retried from further starts
//     (the tensor start) and a refined start if some unit fails.
//  8. Noisy (Alg 6 + Lemma 20, optional refinement): otherwise, or when no
//     exact route certifies.
//
// An exact route is reported only with its residual certificate met.
// Result.Route and Result.Reason say which route ran and why; the checks
// behind the choice are in Result.Diagnostics.Selection. A named route
// (Options.Route) runs that route only: "exact" returns an error wrapping
// ErrNotExact instead of falling back. Inputs are not modified.
func Fit(ctx context.Context, X, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	// The data are checked once here; every route below reads the same
	// resolved problem (and the same SVD of Y) and the same resolved
	// options (the certificate's tolerance follows the data's precision).
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	opt = opt.resolve(p)
	var res *Result
	switch opt.Route {
	case UseWorstCase:
		res, _, err = worstCase(ctx, p, WorstCaseOptions{Options: opt})
	case UseICA:
		res, err = fitICA(ctx, p, ICAOptions{Options: opt})
	case UseFPT:
		res, err = fitFPT(ctx, p, FPTOptions{Options: opt})
	case UseSparse:
		var sr *SparseResult
		if sr, err = fitSparse(ctx, p, SparseOptions{Options: opt}); err == nil {
			res = &sr.Result
		}
	case UseExact, UseNoisy:
		res, err = fitTensor(ctx, p, opt, nil, nil, false)
	default:
		res, err = fitAuto(ctx, p, opt)
	}
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// exactAttempt carries the exact route from the automatic route choice's
// first step (selector.exactFirst: the parity start alone) to its last
// (fitTensor's whole plan of starts), so that the parity start is neither
// computed nor polished twice and the units it certified are not looked
// for again.
type exactAttempt struct {
	// parityTried records that the first starts (zero-set, parity) were
	// tried (they are then left out of the plan).
	parityTried bool
	// found holds the rows certified so far.
	found certifiedRows
	// why says why an attempt with parityOnly returned no result.
	why errs.Message
}

// fitTensor runs the Gaussian tensor routes: exact (Alg 4 + 5) when Y is
// exactly rank k, else noisy (Alg 4 + 6 + Lemma 20), as Options.Route allows.
// att, if non-nil, carries an earlier exact attempt (exactAttempt); nil
// starts afresh. parityOnly tries the parity start alone, with no
// least-squares last resort and no noisy fallback: when that start does
// not apply or does not certify every unit, fitTensor returns no result and
// no error (att.why says why).
func fitTensor(ctx context.Context, p *problem, opt Options, sel *Selection, att *exactAttempt, parityOnly bool) (*Result, error) {
	if att == nil {
		att = &exactAttempt{}
	}
	r := &tensorRun{
		ctx: ctx, p: p, opt: opt, att: att, parityOnly: parityOnly, began: time.Now(),
		// coarse data (float32) are polished and certified at their
		// precision (polishTolsFor, certify.DefaultTol); when the exact
		// route fails on them, the noisy route's refined fit is certified
		// at it too.
		coarse: p.roundoff > certify.Float64Roundoff,
	}
	if planned, err := r.planStarts(); !planned || err != nil {
		return nil, err
	}
	st, at, err := r.next(0)
	if err != nil {
		if parityOnly && ctx.Err() == nil {
			att.why = errs.Message{"the " + r.plan[at].name + " could not be computed (", err, ")"}
			return nil, nil
		}
		return nil, err
	}
	k, m := st.K, p.Y.RawMatrix().Cols
	r.newResult(st, sel)
	tryExact := opt.Route != UseNoisy
	why := ""
	if tryExact && k < m && !st.ExactRank {
		tryExact = false
		why = fmt.Sprintf("Y is not exactly rank %d (σ_%d/σ_1 = %.1e > %.0e): the outputs carry noise", k, k+1, st.SingularValues[k]/st.SingularValues[0], p.rankTol)
	}
	if tryExact {
		var res *Result
		var done bool
		if res, st, why, done, err = r.exactStarts(st, at); done {
			return res, err
		}
	}
	return r.noisyFallback(st, why)
}

// tensorRun holds the state fitTensor's steps share: the problem and
// options, the plan of starts, and the result being filled in.
type tensorRun struct {
	ctx        context.Context
	p          *problem
	opt        Options
	att        *exactAttempt
	parityOnly bool
	began      time.Time
	// coarse marks data coarser than float64 (float32).
	coarse bool
	// plan lists the starts the exact route tries in turn (planStarts).
	plan []plannedStart
	// skipped holds the warnings of the starts next could not compute.
	skipped []errs.Message
	res     *Result
}

// plannedStart is one start of fitTensor's plan: its name in messages and
// the function that computes it.
type plannedStart struct {
	name string
	make func() (*Start, error)
}

// planStarts lists the starts the exact route tries in turn, cheapest
// first, until one certifies every unit: the zero-set and parity starts
// (ReLU only, zeroset.go and parity.go; left out when an earlier attempt
// tried them), the quick tensor start (far above the sample floor: a block
// of rows), the tensor start from all rows. The noisy route takes the last.
// planned is false when fitTensor has nothing to run: with parityOnly, when
// the first starts do not apply (att.why says why); otherwise err says why.
func (r *tensorRun) planStarts() (planned bool, err error) {
	ctx, p, opt, att := r.ctx, r.p, r.opt, r.att
	// The moment starts need n ≥ minSamples; below it the exact route has
	// the zero-set and parity starts only (exactFloor).
	exactK, _ := exactRouteRuns(p, opt)
	momentsFit := p.n >= minSamples(p.d, max(1, exactK))
	if parityApplies(p, opt) && !att.parityTried {
		att.parityTried = true
		if opt.Start != StartParity {
			r.plan = append(r.plan, plannedStart{"zero-set start", func() (*Start, error) { return zeroSetStart(ctx, p, r.opt) }})
		}
		if exactK <= parityMaxK || opt.Start == StartParity {
			r.plan = append(r.plan, plannedStart{"parity start", func() (*Start, error) { return parityStart(ctx, p, r.opt) }})
		}
	}
	if r.parityOnly {
		if len(r.plan) == 0 {
			att.why = errs.Message{"the zero-set and parity starts do not apply (they need data from a ReLU network with Y exactly rank k, or k = m, and ", errs.Option{Struct: "Options", Field: "Start"}, " auto)"}
			return false, nil
		}
	} else if len(r.plan) == 0 && !momentsFit && att.parityTried {
		// Below the moment starts' floor nothing is left to look for the
		// units the first starts missed.
		return false, errs.Options(ErrNotExact, att.why,
			fmt.Sprintf("; the moment starts that look for the rest need n ≥ %s = %d samples for d=%d, k=%d (got %d): give more samples, or --route noisy (", tensorFloor.rule, minSamples(p.d, exactK), p.d, exactK, p.n),
			errs.Option{Struct: "Options", Field: "Route"}, " noisy) for an approximate answer")
	} else if len(r.plan) == 0 || momentsFit {
		if rows := startRows(p, opt); rows < p.n {
			r.plan = append(r.plan, plannedStart{"quick tensor start", func() (*Start, error) { return tensorStartRows(ctx, p, r.opt, rows) }})
		}
		r.plan = append(r.plan, plannedStart{"tensor start", func() (*Start, error) { return tensorStart(ctx, p, r.opt) }})
	}
	return true, nil
}

// next computes the plan's starts from i on until one can be computed: a
// start that fails (say, the parity start's regression on inputs too
// ill-conditioned for its normal equations, which the tensor start
// whitens) hands over to the next, with a warning in r.skipped; the last
// one's error is the route's.
func (r *tensorRun) next(i int) (*Start, int, error) {
	for ; ; i++ {
		st, err := r.plan[i].make()
		if err == nil || i == len(r.plan)-1 || r.ctx.Err() != nil {
			return st, i, err
		}
		r.skipped = append(r.skipped, errs.Message{"the " + r.plan[i].name + " could not be computed (", err, "); went on to the " + r.plan[i+1].name})
	}
}

// newResult starts the result from the first start: its warnings (and the
// starts skipped before it), the data's precision, the route selection's
// checks and the hidden width.
func (r *tensorRun) newResult(st *Start, sel *Selection) {
	r.res = &Result{Warnings: append(r.skipped, errs.Texts(st.Warnings)...)}
	r.res.Diagnostics.Precision = certify.PrecisionName(r.p.roundoff)
	diag := &r.res.Diagnostics
	diag.Selection = sel
	diag.Hidden, diag.HiddenInferred = st.K, st.Inferred
	diag.SingularValuesY = st.SingularValues
	r.noteStart(st)
}

// noteStart records the start in use in the diagnostics, and warns of a
// small eigenvalue gap in its decomposition.
func (r *tensorRun) noteStart(st *Start) {
	diag := &r.res.Diagnostics
	diag.Start, diag.ParityGap = "tensor", 0
	switch {
	case st.parity != nil:
		diag.Start, diag.ParityGap = "parity", st.parity.gap
	case st.zeroSet != nil:
		diag.Start = "zero-set"
	}
	diag.TensorOrder = st.Order
	diag.Whitened, diag.CondCovariance = st.Whitened, st.CondCov
	diag.JennrichTries, diag.JennrichGap = st.JennrichTries, st.JennrichGap
	diag.StartRows = st.Rows
	if st.zeroSet == nil && st.JennrichGap < 1e-3 {
		r.res.Warnings = append(r.res.Warnings, errs.Textf("the decomposition of the %s has a small eigenvalue gap (%.1e): the start may be inaccurate", st.name(), st.JennrichGap))
	}
}

// exactStarts runs the exact route from st (the plan's start at) and, while
// units stay uncertified, from the plan's later starts; only the last
// start gets the least-squares last resort. done reports that fitTensor
// returns res and err as they are: a certified exact answer, an error, or
// (parityOnly) no answer with att.why set. Otherwise why says why the exact
// route did not certify, and st is the last start tried.
func (r *tensorRun) exactStarts(st *Start, at int) (res *Result, tried *Start, why string, done bool, err error) {
	var V, U, F *mat.Dense
	var resid float64
	var reason string
	var ok bool
	found := &r.att.found // shared by the starts: each looks only for the units still missing
	for {
		// Only the last start gets the least-squares last resort.
		last := at == len(r.plan)-1
		if V, U, F, resid, reason, ok, err = exactRoute(r.ctx, r.p.X, r.p.Y, r.p.roundoff, st, r.opt, r.res, !last || r.parityOnly, found); err != nil {
			if r.parityOnly && r.ctx.Err() == nil {
				r.att.why = errs.Message{"the polish of the " + st.name() + " failed (", err, ")"}
				return nil, st, "", true, nil
			}
			// A start whose retries fail to decompose is one more start
			// that did not certify; only the last one's error stops.
			if last || r.ctx.Err() != nil {
				return nil, st, "", true, err
			}
			reason = err.Error()
		}
		if ok || last {
			break
		}
		was := st.name()
		r.skipped = nil
		if st, at, err = r.next(at + 1); err != nil {
			return nil, st, "", true, err
		}
		r.res.Warnings = append(r.res.Warnings, errs.Textf("the %s did not certify every unit (%s); started again with the %s", was, reason, st.name()))
		r.res.Warnings = append(r.res.Warnings, r.skipped...)
		r.noteStart(st)
		r.res.Diagnostics.InitAngleError = 0
	}
	if ok {
		r.res.Route, r.res.Reason = RouteExact, reason
		res, err = r.finish(V, U, F, resid)
		return res, st, "", true, err
	}
	return nil, st, reason, false, nil
}

// noisyFallback runs the noisy route (Alg 6 + Lemma 20) from the tensor
// start from all the data, when the exact route did not run or did not
// certify (why says which) and Options.Route allows it; data coarser than
// float64 are refined by least squares and certified at their precision.
func (r *tensorRun) noisyFallback(st *Start, why string) (*Result, error) {
	if r.parityOnly {
		r.att.why = errs.Textf("the %s did not certify every unit (%s)", st.name(), why)
		return nil, nil
	}
	if r.opt.Route == UseExact {
		return nil, fmt.Errorf("%w: %s", ErrNotExact, why)
	}
	if r.opt.Route == UseNoisy {
		why = "the noisy route was requested"
	} else if r.coarse {
		why += fmt.Sprintf("; the data are %s, so the moment estimate is refined by least squares and certified at their precision (%.1e)", certify.PrecisionName(r.p.roundoff), r.opt.CertTol)
		r.opt.Refine = true
	}

	if st.Rows < r.p.n || st.parity != nil {
		// The noisy route's answer is the tensor start itself: from all
		// the data.
		var err error
		if st, err = tensorStart(r.ctx, r.p, r.opt); err != nil {
			return nil, err
		}
		r.noteStart(st)
	}
	V, U, err := noisyRoute(r.ctx, r.p.X, r.p.Y, st.V, r.opt, r.res)
	if err != nil {
		return nil, err
	}
	r.res.Route, r.res.Reason = RouteNoisy, why
	return r.finish(V, U, nil, 0)
}

// finish certifies V, U; F = φ(X·Vᵀ) and its residual, when the route
// already has them, are not computed again.
func (r *tensorRun) finish(V, U, F *mat.Dense, resid float64) (*Result, error) {
	res, opt, diag := r.res, r.opt, &r.res.Diagnostics
	res.Model = nn.NewTwoLayerAct(V, U, opt.Activation).Canonical()
	if F == nil {
		F = activationsOf(r.p.X, V, opt.Activation)
		resid = residualOf(F, r.p.Y, U)
	}
	res.Certificate.Residual = resid
	res.Certificate.Tol = opt.CertTol
	res.Certificate.Samples = r.p.X.RawMatrix().Rows
	// A refined answer on float32 data is certified at their precision.
	certifiable := res.Route == RouteExact || res.Route == RouteNoisy && r.coarse && opt.Refine
	res.Certificate.Met = certifiable && res.Certificate.Residual <= opt.CertTol
	if diag.CondF == 0 { // the exact route sets it from its U solve
		diag.CondF = linalg.Cond(F)
	}
	res.Elapsed = time.Since(r.began)
	return res, nil
}

// startRetries is the number of extra decompositions of a start (fresh
// random contractions) tried when its first leaves units uncertified.
const startRetries = 2

// exactRoute polishes the start and keeps every row that passes its own
// certificate. Units the start missed (two components merged by the
// decomposition, or a row outside the polish margin) are looked for in up to
// startRetries fresh starts, then, as a last resort, by refining the start by
// least squares and polishing again. ok reports a certified exact answer.
//
// quick (a start that fitTensor replaces by another when it fails: see its
// plan) skips the least-squares last resort. found holds the rows certified
// so far, by earlier starts too: a unit certified once is not looked for
// again. roundoff is the unit roundoff of X and Y (certify.Roundoff), which
// sets the polish's tolerances.
func exactRoute(ctx context.Context, X, Y *mat.Dense, roundoff float64, st *Start, opt Options, res *Result, quick bool, found *certifiedRows) (V, U, F *mat.Dense, resid float64, reason string, ok bool, err error) {
	k := st.K
	carried := len(found.rows)
	// The polish reads the basis of col(Y), not the start's moments: those
	// are released (a retry rebuilds them), and the basis is dropped before
	// the output fit, so no stage carries another's n×k matrices.
	st.releaseMoments()
	basis, err := st.basis()
	if err != nil {
		return nil, nil, nil, 0, "", false, err
	}
	// Once the polish is done, the activations F take the basis's memory
	// (unless it is the caller's Start.Basis): the route holds one n×k
	// matrix at a time.
	var work []float64
	if st.Basis == nil {
		work = basis.RawMatrix().Data
	}
	ep := &exactPolisher{ctx: ctx, X: X, Y: Y, basis: basis, st: st, opt: opt, roundoff: roundoff, res: res, found: found}
	reps, err := ep.polish(st.V, "exact polish")
	if err != nil {
		return nil, nil, nil, 0, "", false, err
	}
	for _, r := range reps {
		if r.OK {
			res.Diagnostics.InitAngleError = math.Max(res.Diagnostics.InitAngleError, r.Angle)
		}
	}
	if len(found.rows) == 0 {
		return nil, nil, nil, 0, fmt.Sprintf("no unit could be polished to an exact row: the data are not exactly a %s network of this width (noise, or another activation?)", opt.Activation), false, nil
	}
	how := "every unit was polished to an exact row from the " + st.name()
	if carried > 0 {
		how = fmt.Sprintf("every unit was polished to an exact row (%d from earlier starts, the rest from the %s)", carried, st.name())
	}
	if how, err = ep.retryStarts(how); err != nil {
		return nil, nil, nil, 0, "", false, err
	}
	if len(found.rows) < k && !quick {
		if how, err = ep.refinedStart(); err != nil {
			return nil, nil, nil, 0, "", false, err
		}
	}
	ep.basis = nil
	res.Diagnostics.PolishedUnits = len(found.rows)
	if len(found.rows) < k {
		return nil, nil, nil, 0, fmt.Sprintf("only %d of %d units could be certified exact (too few samples, a nearly degenerate network, or noise)", len(found.rows), k), false, nil
	}
	V = mat.NewDense(k, X.RawMatrix().Cols, nil)
	for i, row := range found.rows[:k] {
		V.SetRow(i, row)
	}
	var cond float64
	U, F, resid, err = exactU(work, X, Y, V, opt.Activation, min(certify.RoundingResidual(roundoff), opt.CertTol), &cond)
	if err != nil {
		return nil, nil, nil, 0, "", false, err
	}
	if resid > opt.CertTol {
		return nil, nil, nil, 0, fmt.Sprintf("every unit polished but the residual %.1e exceeds %.0e", resid, opt.CertTol), false, nil
	}
	// κ of the activations U was solved on, kept only for the answer
	// returned (a rejected V's would otherwise reach the noisy route's).
	res.Diagnostics.CondF = cond
	return V, U, F, resid, fmt.Sprintf("Y is exactly rank %d and %s; residual %.1e ≤ %.0e", k, how, resid, opt.CertTol), true, nil
}

// exactPolisher holds what exactRoute's polishes share: the data, the
// basis of col(Y) they read, the start, and the rows certified so far.
type exactPolisher struct {
	ctx      context.Context
	X, Y     *mat.Dense
	basis    *mat.Dense
	st       *Start
	opt      Options
	roundoff float64
	res      *Result
	found    *certifiedRows
}

// polish runs ExactPolish from the rows start (stage names it in
// progress) and adds the rows it certifies to found.
func (ep *exactPolisher) polish(start *mat.Dense, stage string) ([]UnitPolish, error) {
	st, opt := ep.st, ep.opt
	po := PolishOptions{Activation: opt.Activation, Roundoff: ep.roundoff, Progress: func(done, total int) { opt.progress(stage, done, total) }}
	if st.zeroSet != nil && start == st.V {
		// The zero-set start's rows carry their signs, and its null
		// vectors are the polish's when the basis is Y·V_k·Σ_k⁻¹, the
		// coordinates the start searched in.
		po.Oriented = true
		// On float32 data the polish's own null vectors, from ten times
		// the rows (polishTols.rows), are the ones good to their
		// precision.
		if st.productBasis && ep.roundoff <= certify.Float64Roundoff {
			po.Nulls = st.zeroSet.nulls(st.K)
		}
	}
	Vp, reps, err := ExactPolish(ep.ctx, ep.X, ep.basis, start, po)
	if err != nil {
		return nil, err
	}
	ep.found.add(Vp, reps)
	ep.res.Diagnostics.Units = reps
	return reps, nil
}

// retryStarts looks for the units still missing in up to startRetries
// fresh decompositions of the start (fresh random contractions). It
// returns how the units were found (how, unless a retry ran).
func (ep *exactPolisher) retryStarts(how string) (string, error) {
	st, opt, found, k := ep.st, ep.opt, ep.found, ep.st.K
	for retry := 1; retry <= startRetries && len(found.rows) < k; retry++ {
		before := len(found.rows)
		o := opt
		o.Progress = func(stage string, done, total int) {
			opt.progress(fmt.Sprintf("%s (start %d)", stage, retry+1), done, total)
		}
		V2, err := st.Resample(ep.ctx, opt.Seed+uint64(retry)*0x9E3779B97F4A7C15, o)
		if err != nil {
			return "", err
		}
		if _, err := ep.polish(V2, fmt.Sprintf("exact polish (start %d)", retry+1)); err != nil {
			return "", err
		}
		ep.res.Warnings = append(ep.res.Warnings, errs.Textf("the %s left %d of %d units uncertified; its decomposition %d (fresh random contractions) certified %d more", st.name(), k-before, k, retry+1, len(found.rows)-before))
		how = fmt.Sprintf("every unit was polished to an exact row (%d decompositions of the %s)", retry+1, st.name())
	}
	return how, nil
}

// refinedStart is exactRoute's last resort: a least-squares refinement
// (RecoverSigns, SolveU, Refine) moves a rough start into the polish's
// margin, and the refined rows are polished again. It returns how the
// units were found.
func (ep *exactPolisher) refinedStart() (string, error) {
	ctx, X, Y, st, opt, found, k := ep.ctx, ep.X, ep.Y, ep.st, ep.opt, ep.found, ep.st.K
	before := len(found.rows)
	Vs, _, err := RecoverSigns(ctx, X, Y, st.V, opt.Activation)
	if err != nil {
		return "", err
	}
	Us, _, err := SolveU(X, Y, Vs, opt.Activation)
	if err != nil {
		return "", err
	}
	ref, err := Refine(ctx, X, Y, Vs, Us, opt.Activation, 0, func(done, total int) { opt.progress("refine start", done, total) })
	if err != nil {
		return "", err
	}
	if _, err := ep.polish(ref.V, "exact polish (refined start)"); err != nil {
		return "", err
	}
	ep.res.Warnings = append(ep.res.Warnings, errs.Textf("%d of %d units were still uncertified; a least-squares refinement of the start (%d iterations) certified %d more", k-before, k, ref.Iterations, len(found.rows)-before))
	return "every unit was polished to an exact row after refining the start", nil
}

// certifiedRows accumulates distinct rows that passed the polish's per-unit
// certificate.
type certifiedRows struct{ rows [][]float64 }

// add appends the certified rows of V that are not already present (two
// certified rows for the same unit agree to rounding; rows are compared by
// direction, since e^x − 1 rows keep their norms).
func (c *certifiedRows) add(V *mat.Dense, reps []UnitPolish) {
	for i, r := range reps {
		if !r.OK {
			continue
		}
		row := mat.Row(nil, i, V)
		dup := false
		for _, have := range c.rows {
			if dot(have, row) > (1-1e-9)*math.Sqrt(dot(have, have)*dot(row, row)) {
				dup = true
				break
			}
		}
		if !dup {
			c.rows = append(c.rows, row)
		}
	}
}

// noisyRoute is Alg 6 + Lemma 20, optionally refined.
func noisyRoute(ctx context.Context, X, Y, Vstart *mat.Dense, opt Options, res *Result) (V, U *mat.Dense, err error) {
	V, _, err = RecoverSigns(ctx, X, Y, Vstart, opt.Activation)
	if err != nil {
		return nil, nil, err
	}
	U, _, err = SolveU(X, Y, V, opt.Activation)
	if err != nil {
		return nil, nil, err
	}
	if !opt.Refine && !homogeneous(opt.Activation) {
		// The moment estimate has unit rows, but an e^x − 1 unit's row norm
		// is part of the function: only the refinement can fit it.
		opt.Refine = true
		res.Warnings = append(res.Warnings, errs.Textf("the activation %s has no scaling symmetry, so the moment estimate (unit rows) is refined by least squares to fit the row norms", opt.Activation))
	}
	if !opt.Refine {
		res.Warnings = append(res.Warnings, errs.Message{"this is the paper's moment estimate, which is consistent but statistically inefficient; the optional refinement (", errs.Option{Struct: "Options", Field: "Refine"}, ") usually lowers the weight error 10–100× on noisy data"})
		return V, U, nil
	}
	ref, err := Refine(ctx, X, Y, V, U, opt.Activation, 0, func(done, total int) { opt.progress("refine", done, total) })
	if err != nil {
		return nil, nil, err
	}
	res.Diagnostics.ResidualBeforeRefine = ref.Before
	res.Diagnostics.RefineIterations = ref.Iterations
	res.Diagnostics.RefineConverged = ref.Converged
	if !ref.Converged {
		res.Warnings = append(res.Warnings, errs.Textf("the refinement stopped without converging (%s after %d iterations)", ref.Status, ref.Iterations))
	}
	if ref.After > ref.Before {
		res.Warnings = append(res.Warnings, errs.Message{"the refinement did not lower the residual; keeping the unrefined estimate"})
		return V, U, nil
	}
	return ref.V, ref.U, nil
}

// maxOffDiagCos returns the largest |cos| between two rows of V.
func maxOffDiagCos(V *mat.Dense) float64 {
	k, _ := V.Dims()
	worst := 0.0
	for i := 0; i < k; i++ {
		for j := 0; j < i; j++ {
			a, b := V.RawRowView(i), V.RawRowView(j)
			worst = math.Max(worst, math.Abs(dot(a, b))/math.Sqrt(dot(a, a)*dot(b, b)))
		}
	}
	return worst
}

// quickStartFactor: a quick tensor start reads the first
// quickStartFactor·minSamples(d, k) samples.
const quickStartFactor = 4

// startRows is how many samples (the first ones) the tensor start of
// fitTensor reads. When the exact route will run (Y exactly
// rank k or k = m, not the noisy route) on at least twice
// quickStartFactor·minSamples(d, k) samples, the start reads only that many:
// it need only land within the polish's margin, which the polish then
// certifies on every sample, and a start from n = minSamples rows already
// does so on nearly every instance (measured near the floor, docs). If
// units stay uncertified, fitTensor starts again from all the rows. Rows
// are taken in order, as the screens take theirs: samples are assumed
// exchangeable (a sorted file only costs the second start).
func startRows(p *problem, opt Options) int {
	k, ok := exactRouteRuns(p, opt)
	if !ok {
		return p.n
	}
	r := quickStartFactor * minSamples(p.d, k)
	if p.n < 2*r {
		return p.n
	}
	return r
}

// exactRouteRuns reports whether fitTensor will try the exact route on p
// (Y exactly rank k or k = m at the data's precision, not the noisy
// route), and k.
func exactRouteRuns(p *problem, opt Options) (k int, ok bool) {
	if opt.Route == UseNoisy {
		return 0, false
	}
	red0, err := reduceOutputs(p, opt.Hidden, "the exact route", exactFloor)
	if err != nil || !(red0.ExactRank || red0.K == p.m) {
		return 0, false
	}
	return red0.K, true
}

// exactURows is how many samples (the first ones) the exact route's output
// weights are solved on: with every row of V exact, Y = φ(X·Vᵀ)·Uᵀ holds
// on every sample, so any block of rows whose activations have full rank
// gives the same U up to rounding, and the residual certificate is still
// taken over all n samples. max(2·10⁴, 100·k) rows are ≥ 100 per unknown of
// each output's solve; a block too ill-conditioned to give U at rounding
// level shows in the residual, and exactU solves again on all rows.
func exactURows(n, k int) int { return min(n, max(20000, 100*k)) }

// exactU is the exact route's output fit: the activations F = φ(X·Vᵀ) of
// all samples (into buf, see activationsTo), U by least squares on the
// first exactURows of them, and the residual ‖Y − F·Uᵀ‖/‖Y‖ on all. When
// that residual is above resolveAbove (the caller's: rounding level, which
// noiseless data do not exceed, or a stricter certificate tolerance) U is
// solved again on all rows, as SolveU does. cond receives κ of the
// activations U was solved on.
func exactU(buf []float64, X, Y, V *mat.Dense, act nn.Activation, resolveAbove float64, cond *float64) (U, F *mat.Dense, resid float64, err error) {
	n, _ := X.Dims()
	_, m := Y.Dims()
	k, _ := V.Dims()
	F = activationsTo(buf, X, V, act)
	if err := checkFinite(F, act); err != nil {
		return nil, nil, 0, err
	}
	rows := exactURows(n, k)
	for {
		Fs, Ys := F.Slice(0, rows, 0, k), Y.Slice(0, rows, 0, m)
		U, err = lstsqU(Fs, Ys)
		if err == nil {
			resid = residualOf(F, Y, U)
			*cond = linalg.Cond(Fs)
			if resid <= resolveAbove || rows == n {
				return U, F, resid, nil
			}
		} else if rows == n {
			return nil, nil, 0, err
		}
		rows = n
	}
}
