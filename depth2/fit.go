package depth2

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/tensor"
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
//     Options.Affine is set.
//  5. The certificate: ‖Y − f(X)‖_F/‖Y‖_F ≤ CertTol on all samples.
//
// Route "exact" returns an error wrapping ErrNotExact when the certificate
// is not met. Bad input (shapes, NaN/Inf, too few samples for the order,
// more units than order ℓ can identify) gives errors wrapping ErrInput.
// Inputs are not modified.
func Fit(ctx context.Context, X, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	opt = opt.withDefaults()
	if err := opt.check(); err != nil {
		return nil, err
	}
	n, d, p, err := checkData(X, Y)
	if err != nil {
		return nil, err
	}
	ell := opt.Order
	if ell == 0 {
		ell = 1
		if opt.Hidden > d {
			ell = 2
		}
	}
	if lim := tensor.SymLen(d, ell); opt.Hidden > lim {
		return nil, fmt.Errorf("%w: %d hidden units cannot be identified from order-%d moments in d = %d dimensions: they need linearly independent w_i^{⊗ℓ}, so m ≤ C(d+ℓ−1, ℓ) = %d", ErrInput, opt.Hidden, ell, d, lim)
	}
	if ell == 1 && opt.Hidden > d {
		return nil, fmt.Errorf("%w: ℓ = 1 needs m ≤ d (W of full rank); %d units in d = %d dimensions need order ℓ = 2", ErrInput, opt.Hidden, d)
	}
	if ell == 2 && opt.Hidden == 0 {
		return nil, fmt.Errorf("%w: the overcomplete route (ℓ = 2) needs the width: pass Hidden (--hidden)", ErrInput)
	}
	// The reduced dimension: m for ℓ = 1 (inferred if unknown), d for ℓ = 2.
	dim, kGuess := 0, d
	if ell == 1 {
		dim = -1
		if opt.Hidden > 0 {
			dim, kGuess = opt.Hidden, opt.Hidden
		}
	}
	if need := MinSamples(d, kGuess, ell); n < need {
		return nil, fmt.Errorf("%w: the order-%d moment in k = %d dimensions has %d distinct entries; this route needs n ≥ max(1000, 20·d, 100·%d) = %d samples, got %d", ErrInput, 2*ell+2, kGuess, tensor.SymLen(kGuess, 2*ell+2), tensor.SymLen(kGuess, 2*ell+2), need, n)
	}
	res := &Result{}
	diag := &res.Diagnostics
	diag.Ell = ell

	mo, err := EstimateMoments(ctx, X, Y, MomentOptions{MaxOrder: 2*ell + 2, Dim: dim, Progress: opt.Progress})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	diag.ReducedDim = mo.Dim()
	diag.MomentNoise = mo.Noise
	if opt.Hidden == 0 {
		diag.HiddenInferred = true
		if need := MinSamples(d, mo.Dim(), ell); n < need {
			return nil, fmt.Errorf("%w: T̂_2 shows %d units, and the order-%d moment in %d dimensions needs n ≥ %d samples, got %d", ErrInput, mo.Dim(), 2*ell+2, mo.Dim(), need, n)
		}
	}
	th := opt.Thresholds
	if th.MaxUnits == 0 {
		th.MaxUnits = opt.Hidden
	}
	ropt := RecoverOptions{Ell: ell, Thresholds: th, Seed: opt.Seed}
	var rec *Recovery
	if ell == 1 {
		rec, err = LearnFullRank(mo, ropt)
	} else {
		rec, err = RecoverRobust(mo, ropt)
	}
	noUnits := errors.Is(err, ErrNoUnits) && rec != nil && opt.Route != "moments"
	if err != nil && !noUnits {
		return nil, err
	}
	diag.Recovery = rec
	res.Warnings = append(res.Warnings, rec.Warnings...)
	if noUnits {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the moments show no unit above the noise (%v); starting from an affine fit (every |b_i| large, Lemma D.13, or too few samples)", err))
	}
	if opt.Hidden > 0 && len(rec.Units) < opt.Hidden && opt.Route != "auto" && opt.Route != "exact" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the moments show %d of the %d units above the noise; the others (large |b_i|, or too few samples) are approximated by the affine term", len(rec.Units), opt.Hidden))
	}

	finish := func(net *Network) (*Result, error) {
		res.Model = net.Normalize()
		diag.Hidden = liveUnits(net)
		diag.AffineKept = net.L != nil
		res.Certificate = Certificate{Residual: relResidual(X, Y, net), Tol: opt.CertTol, Samples: n}
		res.Certificate.Met = res.Certificate.Residual <= opt.CertTol
		if opt.Route == "exact" && !res.Certificate.Met {
			return nil, fmt.Errorf("%w: the refined network's relative residual is %.2e > %.0e (noise, too few samples for the moments to start in the right basin, or a network outside the model)", ErrNotExact, res.Certificate.Residual, opt.CertTol)
		}
		res.Elapsed = time.Since(began)
		return res, nil
	}

	var moment *Network
	if noUnits {
		moment = &Network{W: mat.NewDense(1, d, nil), B: []float64{0}, A: mat.NewDense(p, 1, nil), C: make([]float64, p)}
		for t := 0; t < p; t++ {
			moment.C[t] = mo.T[t][0].Data[0]
		}
	} else {
		moment = momentNetwork(rec, mo, p)
	}
	res.Moment = moment.Normalize()
	diag.MomentResidual = relResidual(X, Y, moment)
	if opt.Route == "moments" {
		res.Route = RouteMoments
		res.Reason = fmt.Sprintf("the moment estimate was requested (Algorithm %s with RecoverScalars)", map[int]string{1: "6", 2: "4"}[ell])
		if ell == 2 {
			res.Warnings = append(res.Warnings, "ℓ = 2 recovers (w_i, b_i) only up to a joint sign flip; the moment estimate's signs are arbitrary")
		}
		return finish(moment)
	}

	improper, err := FitImproper(ctx, X, Y, moment.W, moment.B)
	if err != nil {
		return nil, err
	}
	diag.ImproperResidual = relResidual(X, Y, improper)
	res.Improper = improper.Normalize()
	if opt.Route == "improper" {
		res.Route = RouteImproper
		res.Reason = fmt.Sprintf("Algorithm 5 was requested: %d moment units plus an affine term by least squares", liveUnits(moment))
		return finish(improper)
	}

	// Intermediate refinements run on a subsample; then all samples.
	ref, err := Refine(ctx, X, Y, improper, RefineOptions{MaxIter: opt.MaxIter, Affine: true, SubsampleOnly: true, Progress: opt.progress("refine")})
	if err != nil {
		return nil, err
	}
	diag.Refine = ref
	net := ref.Net
	if net, err = deflate(ctx, X, Y, net, opt, res); err != nil {
		return nil, err
	}
	net = dropDead(net)
	full, err := Refine(ctx, X, Y, net, RefineOptions{MaxIter: opt.MaxIter, Affine: true, Progress: opt.progress("refine (all samples)")})
	if err != nil {
		return nil, err
	}
	diag.Refine.Iterations += full.Iterations
	diag.Refine.Converged, diag.Refine.Status, diag.Refine.After = full.Converged, full.Status, full.After
	net = full.Net
	if !opt.Affine && liveUnits(net) > 0 {
		net, err = dropAffine(ctx, X, Y, net, opt, res)
		if err != nil {
			return nil, err
		}
	}
	if !diag.Refine.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the refinement stopped without converging (%s after %d iterations)", diag.Refine.Status, diag.Refine.Iterations))
	}
	if live := liveUnits(net); opt.Hidden > 0 && live < opt.Hidden {
		res.Warnings = append(res.Warnings, fmt.Sprintf("found %d of the %d units (first decomposition %d, residual deflation %d more); the others (large |b_i|, or too few samples) are approximated by the affine term", live, opt.Hidden, len(rec.Units), diag.AddedUnits))
	}
	res.Route = RouteRefined
	resid := relResidual(X, Y, net)
	switch {
	case resid <= opt.CertTol:
		res.Reason = fmt.Sprintf("the refined network reproduces the data: relative residual %.1e ≤ %.0e (moment estimate %.1e)", resid, opt.CertTol, diag.MomentResidual)
		if diag.AddedUnits > 0 {
			res.Reason += fmt.Sprintf("; the residual's moments added %d units (%d replaced by pruning)", diag.AddedUnits, diag.ReplacedUnits)
		}
	default:
		res.Reason = fmt.Sprintf("least-squares refinement of the moment estimate (relative residual %.2e, moment estimate %.2e); not exact: noise, or a start outside the right basin", resid, diag.MomentResidual)
	}
	return finish(net)
}

// maxDeflations bounds the rounds of deflate; deflateExtra is how many
// units beyond the known width a round may add, when the width is reached,
// before pruning back.
const (
	maxDeflations = 4
	deflateExtra  = 2
)

// deflate looks for units the first decomposition missed or got wrong, in
// the residual Y − f(X) of the refined network (an extension, not in the
// paper): the moments of order ≥ 2 of the residual are a sum over the units
// the network lacks (the affine term does not reach them), and their
// sampling noise scales with the residual, not with Y, so units too weak to
// clear the thresholds at first (large |b_i|, or ℓ = 2, where orders 5 and 6
// are noisy) stand out. They are few, so the full-rank machinery (ℓ = 1,
// dimension reduced through T̂_2) finds them; they are added and everything
// is refined again. When the width is known and already reached, the
// residual's units are added anyway and the network is pruned back to the
// width by backward elimination (the unit whose removal costs least in a
// least-squares refit goes first): a badly started unit that the refinement
// could not move into place is replaced. A round is kept only if it lowers
// the loss by at least 1e-3 relative; the rounds stop when the residual is
// zero or shows no unit above its noise.
func deflate(ctx context.Context, X, Y *mat.Dense, net *Network, opt Options, res *Result) (*Network, error) {
	n, d := X.Dims()
	yy := mat.Norm(Y, 2)
	yy *= yy
	for round := 1; round <= maxDeflations; round++ {
		loss := lossOn(X, Y, net, n)
		if loss <= zeroLoss*yy {
			break
		}
		want := opt.Hidden - liveUnits(net)
		R := net.Forward(X)
		R.Sub(Y, R)
		// Missing units are looked for in want dimensions; at the width, up
		// to deflateExtra replacements.
		look := want
		if want <= 0 {
			look = deflateExtra
		}
		dim := -1
		if opt.Hidden > 0 {
			dim = min(look, d)
		}
		mo, err := EstimateMoments(ctx, X, R, MomentOptions{MaxOrder: 4, Dim: dim, Progress: opt.Progress})
		if err != nil {
			return nil, err
		}
		// Beyond the width, the pruning removes whichever of old and new
		// units fit worst.
		th := opt.Thresholds
		th.MaxUnits = 0
		if opt.Hidden > 0 {
			th.MaxUnits = min(look, d)
		}
		rec, err := RecoverRobust(mo, RecoverOptions{Ell: 1, Thresholds: th, Seed: opt.Seed + uint64(round)})
		if errors.Is(err, ErrNoUnits) {
			break
		}
		if err != nil {
			return nil, err
		}
		// The new units' output weights come from the residual's moments,
		// whose scalar inversion amplifies noise by e^{b²/2}; a least-squares
		// refit of the output layer on the refinement's subsample gives the
		// refinement a sane start.
		cand := dropDead(addUnits(net, rec.Units))
		rows := min(n, max(50_000, 40*newLayout(cand).size))
		_, p := Y.Dims()
		if cand, err = FitImproper(ctx, X.Slice(0, rows, 0, d).(*mat.Dense), Y.Slice(0, rows, 0, p).(*mat.Dense), cand.W, cand.B); err != nil {
			return nil, err
		}
		stage := opt.progress(fmt.Sprintf("refine (deflation %d)", round))
		ref, err := Refine(ctx, X, Y, cand, RefineOptions{MaxIter: opt.MaxIter, Affine: true, SubsampleOnly: true, Progress: stage})
		if err != nil {
			return nil, err
		}
		cand = ref.Net
		pruned := 0
		if opt.Hidden > 0 && cand.Hidden() > opt.Hidden {
			before := cand.Hidden()
			if cand, err = pruneUnits(ctx, X, Y, cand, opt.Hidden); err != nil {
				return nil, err
			}
			pruned = before - cand.Hidden()
			if ref, err = Refine(ctx, X, Y, cand, RefineOptions{MaxIter: opt.MaxIter, Affine: true, SubsampleOnly: true, Progress: stage}); err != nil {
				return nil, err
			}
			cand = ref.Net
		}
		if lossOn(X, Y, cand, n) > (1-1e-3)*loss {
			break
		}
		res.Diagnostics.Deflations++
		res.Diagnostics.AddedUnits += len(rec.Units)
		res.Diagnostics.ReplacedUnits += pruned
		net = cand
	}
	return net, nil
}

// pruneUnits removes units from net by backward elimination until width
// remain: each step drops the unit whose removal gives the smallest loss of
// a least-squares refit of the output layer and affine term (FitImproper)
// on the refinement's subsample.
func pruneUnits(ctx context.Context, X, Y *mat.Dense, net *Network, width int) (*Network, error) {
	n, d := X.Dims()
	_, p := Y.Dims()
	rows := min(n, max(50_000, 40*newLayout(net).size))
	Xs, Ys := X.Slice(0, rows, 0, d).(*mat.Dense), Y.Slice(0, rows, 0, p).(*mat.Dense)
	for net.Hidden() > width {
		best, bestLoss := -1, math.Inf(1)
		var bestNet *Network
		for j := 0; j < net.Hidden(); j++ {
			W, B := withoutUnit(net, j)
			g, err := FitImproper(ctx, Xs, Ys, W, B)
			if err != nil {
				return nil, err
			}
			if l := lossOn(Xs, Ys, g, rows); l < bestLoss {
				best, bestLoss, bestNet = j, l, g
			}
		}
		if best < 0 {
			break
		}
		net = bestNet
	}
	return net, nil
}

// withoutUnit returns W and B with unit j removed.
func withoutUnit(net *Network, j int) (*mat.Dense, []float64) {
	m, d := net.W.Dims()
	W := mat.NewDense(m-1, d, nil)
	B := make([]float64, 0, m-1)
	for i, at := 0, 0; i < m; i++ {
		if i == j {
			continue
		}
		W.SetRow(at, net.W.RawRowView(i))
		B = append(B, net.B[i])
		at++
	}
	return W, B
}

// liveUnits counts units with a non-zero row (dropDead's placeholder unit
// does not count).
func liveUnits(net *Network) int {
	c := 0
	for i := 0; i < net.Hidden(); i++ {
		if dot(net.W.RawRowView(i), net.W.RawRowView(i)) > 0 {
			c++
		}
	}
	return c
}

// dropDead removes zero-row units (the placeholder of an affine-only
// network) when other units exist.
func dropDead(net *Network) *Network {
	live := liveUnits(net)
	if live == net.Hidden() || live == 0 {
		return net
	}
	m, d := net.W.Dims()
	p := net.Out()
	out := &Network{W: mat.NewDense(live, d, nil), B: make([]float64, live), A: mat.NewDense(p, live, nil), C: append([]float64(nil), net.C...)}
	if net.L != nil {
		out.L = mat.DenseCopyOf(net.L)
	}
	at := 0
	for i := 0; i < m; i++ {
		row := net.W.RawRowView(i)
		if dot(row, row) == 0 {
			continue
		}
		out.W.SetRow(at, row)
		out.B[at] = net.B[i]
		out.A.SetCol(at, mat.Col(nil, i, net.A))
		at++
	}
	return out
}

// affineOnly is the network with no visible unit: one placeholder unit
// (w = 0, b = 0, a = 0, identically zero) and an affine term by least
// squares — Algorithm 5 when Algorithm 4 finds nothing (every unit has a
// large |b_i|, Lemma D.13).
func affineOnly(ctx context.Context, X, Y *mat.Dense) (*Network, error) {
	_, d := X.Dims()
	return FitImproper(ctx, X, Y, mat.NewDense(1, d, nil), []float64{0})
}

// addUnits returns net with the units appended (their output weights as
// new columns of A).
func addUnits(net *Network, units []Unit) *Network {
	m, d := net.W.Dims()
	p := net.Out()
	k := len(units)
	out := &Network{W: mat.NewDense(m+k, d, nil), B: make([]float64, m+k), A: mat.NewDense(p, m+k, nil), C: append([]float64(nil), net.C...)}
	if net.L != nil {
		out.L = mat.DenseCopyOf(net.L)
	}
	for i := 0; i < m; i++ {
		out.W.SetRow(i, net.W.RawRowView(i))
		out.B[i] = net.B[i]
		out.A.SetCol(i, mat.Col(nil, i, net.A))
	}
	for j, u := range units {
		out.W.SetRow(m+j, u.W)
		out.B[m+j] = u.B
		out.A.SetCol(m+j, u.A)
	}
	return out
}

// dropAffine resolves the units' signs to remove the affine term and keeps
// the network without it when the fit does not get worse beyond noise.
func dropAffine(ctx context.Context, X, Y *mat.Dense, net *Network, opt Options, res *Result) (*Network, error) {
	n, d := X.Dims()
	p := net.Out()
	flipped, which, rest, ties := ResolveSigns(net)
	res.Diagnostics.SignTies = ties
	if ties > 1 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d sign patterns of the units fit equally well: the network is not identifiable up to permutation alone (Claim 4.8); one was chosen", ties))
	}
	cand := flipped.Clone()
	cand.L = nil
	polished, err := Refine(ctx, X, Y, cand, RefineOptions{MaxIter: opt.MaxIter, Progress: opt.progress("refine without affine term")})
	if err != nil {
		return nil, err
	}
	withL := lossOn(X, Y, net, n)
	without := lossOn(X, Y, polished.Net, n)
	P := newLayout(net).size
	sigma2 := 2 * withL / math.Max(1, float64(n*p-P))
	yy := mat.Norm(Y, 2)
	yy *= yy
	// Dropping p·d parameters that are truly zero raises the residual sum of
	// squares by ≈ σ²·p·d (a χ² with p·d degrees of freedom); allow 4×.
	if 2*(without-withL) <= 4*sigma2*float64(p*d)+2*zeroLoss*yy {
		res.Diagnostics.FlippedUnits = len(which)
		res.Diagnostics.Refine.Iterations += polished.Iterations
		res.Diagnostics.Refine.Converged, res.Diagnostics.Refine.Status, res.Diagnostics.Refine.After = polished.Converged, polished.Status, polished.After
		return polished.Net, nil
	}
	res.Warnings = append(res.Warnings, fmt.Sprintf("kept the affine term (‖L‖ = %.3g after the best sign choice): without it the fit is worse than noise allows, so some units are missing (large |b_i|) or the data hold a linear part", rest))
	return net, nil
}

// momentNetwork turns Algorithm 4's units into a network: W, B, A from the
// units and C from T_0 (f_0 = Σ_i a_i·c_0(b_i) + c).
func momentNetwork(rec *Recovery, mo *Moments, p int) *Network {
	m := len(rec.Units)
	d := len(rec.Units[0].W)
	net := &Network{W: mat.NewDense(m, d, nil), B: make([]float64, m), A: mat.NewDense(p, m, nil), C: make([]float64, p)}
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
func relResidual(X, Y *mat.Dense, net *Network) float64 {
	return metrics.RelResidual(Y, net.Forward(X))
}
