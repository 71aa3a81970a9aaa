package depth2

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/nn"
)

// Fit learns Y ≈ A·ReLU(W·x + B) + C from samples X (n×d, Gaussian inputs)
// and Y (n×p) and chooses the route:
//
//  1. Moments (EstimateMoments): T̂_0…T̂_{2ℓ+2}, with dimension reduction
//     through T̂_2 to k = m when ℓ = 1, residualised outputs, split-half noise.
//  2. Units (Algorithm 6 for ℓ = 1: Algorithm 4 + FixSigns; Algorithm 4 for
//     ℓ = 2, signs unknown), thresholds calibrated from the noise. This is
//     Result.Moment, and Route "moments" stops here.
//  3. Algorithm 5's regression: output weights, output bias and an affine
//     term by least squares on the units' features (Route "improper" stops
//     here).
//  4. Refine: Levenberg–Marquardt on every parameter (affine term
//     included), from step 3, on a subsample; then deflation (units missed
//     or misplaced are found in the residual's moments, added, pruned back to
//     the width, refined again); then all samples. ResolveSigns flips units
//     to remove the affine term, which is dropped (and the network polished
//     again on all samples) unless that worsens the fit beyond the noise or
//     Options.Affine is set. Deflation that ends on a residual more units
//     do not explain (Diagnostics.Misfit: not one hidden layer) ends the
//     step.
//  5. The certificate: ‖Y − f(X)‖_F/‖Y‖_F ≤ CertTol on all samples.
//
// Route "exact" returns an error wrapping ErrNotExact when the certificate
// is not met. Bad input (shapes, NaN/Inf, too few samples for the order,
// more units than order ℓ can identify) gives errors wrapping ErrInput.
// Inputs are not modified.
func Fit(ctx context.Context, X, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	pr, err := newProblem(X, Y, opt)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	res.Diagnostics.Ell = pr.ell
	res.Diagnostics.Precision = certify.PrecisionName(pr.roundoff)
	if pr.opt.Route == RouteAuto || pr.opt.Route == RouteExact || pr.opt.Route == RouteSteinOnly {
		net, why, err := pr.exactRoute(ctx)
		if err != nil {
			return nil, err
		}
		if net != nil {
			res.Diagnostics.HiddenInferred = pr.opt.Hidden == 0
			res.Route = RouteSteinPolish
			res.Reason = fmt.Sprintf("every unit polished to an exact row from the Stein start; relative residual %.1e ≤ %.0e", pr.residual(net), pr.opt.CertTol)
			return pr.finish(res, net, began)
		}
		if pr.opt.Route == RouteSteinOnly {
			return nil, fmt.Errorf("%w: the exact route: %s", ErrNotExact, why)
		}
		res.Diagnostics.Exact = why
	}
	mo, rec, noUnits, err := pr.findUnits(ctx, res)
	if err != nil {
		return nil, err
	}
	moment := pr.momentEstimate(mo, rec, noUnits)
	res.Moment = moment.Normalize()
	res.Diagnostics.MomentResidual = pr.residual(moment)
	if pr.opt.Route == RouteMomentsOnly {
		res.Route = RouteMoments
		res.Reason = fmt.Sprintf("the moment estimate was requested (Algorithm %s with RecoverScalars)", map[int]string{1: "6", 2: "4"}[pr.ell])
		if pr.ell == 2 {
			res.Warnings = append(res.Warnings, "ℓ = 2 recovers (w_i, b_i) only up to a joint sign flip; the moment estimate's signs are arbitrary")
		}
		return pr.finish(res, moment, began)
	}
	improper, err := FitImproper(ctx, X, Y, moment.W, moment.B)
	if err != nil {
		return nil, err
	}
	res.Diagnostics.ImproperResidual = pr.residual(improper)
	res.Improper = improper.Normalize()
	if pr.opt.Route == RouteImproperOnly {
		res.Route = RouteImproper
		res.Reason = fmt.Sprintf("Algorithm 5 was requested: %d moment units plus an affine term by least squares", liveUnits(moment))
		return pr.finish(res, improper, began)
	}
	net, err := pr.refine(ctx, res, improper, len(rec.Units))
	if err != nil {
		return nil, err
	}
	return pr.finish(res, net, began)
}

// findUnits is steps 1 and 2 of Fit: the moments, and the units Algorithm 6
// (ℓ = 1) or Algorithm 4 (ℓ = 2) finds in them. noUnits reports that the
// moments show no unit above the noise, which the routes past the moment
// estimate survive (with a warning) by starting from an affine fit.
func (pr *problem) findUnits(ctx context.Context, res *Result) (mo *Moments, rec *Recovery, noUnits bool, err error) {
	diag := &res.Diagnostics
	mo, err = EstimateMoments(ctx, pr.X, pr.Y, MomentOptions{MaxOrder: 2*pr.ell + 2, Dim: pr.dim, Progress: pr.opt.Progress})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, false, err
		}
		return nil, nil, false, fmt.Errorf("%w: %w", ErrInput, err)
	}
	diag.ReducedDim = mo.Dim()
	diag.MomentNoise = mo.Noise
	if pr.opt.Hidden == 0 {
		diag.HiddenInferred = true
		if need := MinSamples(pr.d, mo.Dim(), pr.ell); pr.n < need {
			return nil, nil, false, fmt.Errorf("%w: T̂_2 shows %d units, and the order-%d moment in %d dimensions needs n ≥ %d samples, got %d", ErrInput, mo.Dim(), 2*pr.ell+2, mo.Dim(), need, pr.n)
		}
	}
	th := pr.opt.Thresholds
	if th.MaxUnits == 0 {
		th.MaxUnits = pr.opt.Hidden
	}
	ropt := RecoverOptions{Ell: pr.ell, Thresholds: th, Seed: pr.opt.Seed}
	if pr.ell == 1 {
		rec, err = LearnFullRank(mo, ropt)
	} else {
		rec, err = RecoverRobust(mo, ropt)
	}
	noUnits = errors.Is(err, ErrNoUnits) && rec != nil && pr.opt.Route != RouteMomentsOnly
	if err != nil && !noUnits {
		return nil, nil, false, err
	}
	diag.Recovery = rec
	res.Warnings = append(res.Warnings, rec.Warnings...)
	if noUnits {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the moments show no unit above the noise (%v); starting from an affine fit (every |b_i| large, Lemma D.13, or too few samples)", err))
	}
	if pr.opt.Hidden > 0 && len(rec.Units) < pr.opt.Hidden && pr.opt.Route != RouteAuto && pr.opt.Route != RouteExact {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the moments show %d of the %d units above the noise; the others (large |b_i|, or too few samples) are approximated by the affine term", len(rec.Units), pr.opt.Hidden))
	}
	return mo, rec, noUnits, nil
}

// momentEstimate is the network of the moment units (momentNetwork), or,
// when the moments showed none, one zero unit and the output bias T_0.
func (pr *problem) momentEstimate(mo *Moments, rec *Recovery, noUnits bool) *nn.Depth2 {
	if !noUnits {
		return momentNetwork(rec, mo, pr.p)
	}
	moment := &nn.Depth2{W: mat.NewDense(1, pr.d, nil), B: []float64{0}, A: mat.NewDense(pr.p, 1, nil), C: make([]float64, pr.p)}
	for t := 0; t < pr.p; t++ {
		moment.C[t] = mo.T[t][0].Data[0]
	}
	return moment
}

// refine is step 4 of Fit, from Algorithm 5's network: refinement on a
// subsample, deflation, refinement on all samples, and the removal of the
// affine term; found is the number of units of the first decomposition.
// It sets the route and the reason.
func (pr *problem) refine(ctx context.Context, res *Result, improper *nn.Depth2, found int) (*nn.Depth2, error) {
	diag := &res.Diagnostics
	// Intermediate refinements run on a subsample (Refine's default one);
	// then all samples. Refine is handed only the subsample's rows, which
	// spares the two passes over all samples that its Before and After
	// make: they are the improper residual and the residual deflation
	// evaluates first, both from pr.eval.
	rows := min(pr.n, refineRows(newLayout(improper).size))
	ref, err := Refine(ctx, pr.X.Slice(0, rows, 0, pr.d).(*mat.Dense), pr.Y.Slice(0, rows, 0, pr.p).(*mat.Dense), improper, RefineOptions{MaxIter: pr.opt.MaxIter, Affine: true, Subsample: rows, SubsampleOnly: true, Progress: pr.stage("refine")})
	if err != nil {
		return nil, err
	}
	ref.Before, ref.After = pr.residual(improper), pr.residual(ref.Net)
	diag.Refine = ref
	net := ref.Net
	if net, err = pr.deflate(ctx, net, res); err != nil {
		return nil, err
	}
	net = dropDead(net)
	switch {
	case net.C != nil && net.L != nil && pr.loss(net) <= zeroLoss(pr.roundoff)*pr.yy:
		// Already zero on all samples (deflation's last check, usually):
		// Refine would return net unchanged after four passes over X.
		diag.Refine.Converged, diag.Refine.Status, diag.Refine.After = true, "zero residual", pr.residual(net)
	case diag.Misfit != "":
		// Polishing on all samples, and again without the affine term,
		// cannot certify a network the data are not; on 20-10-10-4 data
		// (n = 2e4) it took about half of the fit.
		diag.Refine.After = pr.residual(net)
		res.Route = RouteRefined
		res.Reason = fmt.Sprintf("least-squares refinement and deflation of the moment estimate (relative residual %.2e): not one hidden layer of ReLU units — %s", diag.Refine.After, diag.Misfit)
		return pr.pruneSilent(net), nil
	default:
		full, err := Refine(ctx, pr.X, pr.Y, net, RefineOptions{MaxIter: pr.opt.MaxIter, Affine: true, Progress: pr.stage("refine (all samples)")})
		if err != nil {
			return nil, err
		}
		diag.Refine.Iterations += full.Iterations
		diag.Refine.Converged, diag.Refine.Status, diag.Refine.After = full.Converged, full.Status, full.After
		net = full.Net
	}
	if !pr.opt.Affine && liveUnits(net) > 0 {
		net, err = pr.dropAffine(ctx, net, res)
		if err != nil {
			return nil, err
		}
	}
	net = pr.pruneSilent(net)
	if !diag.Refine.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the refinement stopped without converging (%s after %d iterations)", diag.Refine.Status, diag.Refine.Iterations))
	}
	if live := liveUnits(net); pr.opt.Hidden > 0 && live < pr.opt.Hidden {
		res.Warnings = append(res.Warnings, fmt.Sprintf("found %d of the %d units (first decomposition %d, residual deflation %d more); the others (large |b_i|, or too few samples) are approximated by the affine term", live, pr.opt.Hidden, found, diag.AddedUnits))
	}
	res.Route = RouteRefined
	resid := pr.residual(net)
	switch {
	case resid <= pr.opt.CertTol:
		res.Reason = fmt.Sprintf("the refined network reproduces the data: relative residual %.1e ≤ %.0e (moment estimate %.1e)", resid, pr.opt.CertTol, diag.MomentResidual)
		if diag.AddedUnits > 0 {
			res.Reason += fmt.Sprintf("; the residual's moments added %d units (%d replaced by pruning)", diag.AddedUnits, diag.ReplacedUnits)
		}
	default:
		res.Reason = fmt.Sprintf("least-squares refinement of the moment estimate (relative residual %.2e, moment estimate %.2e); not exact: noise, or a start outside the right basin", resid, diag.MomentResidual)
	}
	return net, nil
}

// finish is step 5 of Fit: the answer in the paper's normalisation and its
// certificate (an error wrapping ErrNotExact on RouteExact when not met).
func (pr *problem) finish(res *Result, net *nn.Depth2, began time.Time) (*Result, error) {
	res.Model = net.Normalize()
	res.Diagnostics.Hidden = liveUnits(net)
	res.Diagnostics.AffineKept = net.L != nil
	res.Certificate = certify.New(pr.residual(net), pr.opt.CertTol, pr.n)
	if pr.opt.Route == RouteExact && !res.Certificate.Met {
		return nil, fmt.Errorf("%w: the refined network's relative residual is %.2e > %.0e (noise, too few samples for the moments to start in the right basin, or a network outside the model)", ErrNotExact, res.Certificate.Residual, pr.opt.CertTol)
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// momentNetwork turns Algorithm 4's units into a network: W, B, A from the
// units and C from T_0 (f_0 = Σ_i a_i·c_0(b_i) + c).
func momentNetwork(rec *Recovery, mo *Moments, p int) *nn.Depth2 {
	m := len(rec.Units)
	d := len(rec.Units[0].W)
	net := &nn.Depth2{W: mat.NewDense(m, d, nil), B: make([]float64, m), A: mat.NewDense(p, m, nil), C: make([]float64, p)}
	for i, u := range rec.Units {
		net.W.SetRow(i, u.W)
		net.B[i] = u.B
		for t := 0; t < p; t++ {
			net.A.Set(t, i, u.A[t])
		}
	}
	for t := 0; t < p; t++ {
		c := mo.T[t][0].Data[0]
		for i, u := range rec.Units {
			c -= net.A.At(t, i) * hermite.ReLUMean(u.B)
		}
		net.C[t] = c
	}
	return net
}

// relResidual is ‖Y − f(X)‖_F/‖Y‖_F.
func relResidual(X, Y *mat.Dense, net *nn.Depth2) float64 {
	return certify.RelResidual(Y, net.Forward(X))
}
