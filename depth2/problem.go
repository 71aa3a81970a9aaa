package depth2

import (
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/tensor"
)

// problem is one call of Fit, resolved once: the checked data and their
// sizes, the order ℓ and the width, and the options with their defaults.
// Every step of Fit reads it instead of re-deriving or re-checking.
type problem struct {
	X, Y *mat.Dense
	// n samples, d inputs, p outputs.
	n, d, p int
	// yy is ‖Y‖_F².
	yy float64
	// ell is the order ℓ; hidden the known width m (0: inferred from T̂_2).
	ell, hidden int
	// dim is MomentOptions.Dim of the first moments: m for ℓ = 1 with a
	// known width, −1 (infer) for ℓ = 1 without, 0 (all d) for ℓ = 2.
	dim     int
	route   Route
	affine  bool
	certTol float64
	// roundoff is the unit roundoff of the data (certify.Roundoff).
	roundoff   float64
	seed       uint64
	thresholds Thresholds
	maxIter    int
	progress   func(stage string, done, total int)
}

// newProblem validates opt, checks X and Y, resolves the order and checks
// that the width and the sample count suit it.
func newProblem(X, Y *mat.Dense, opt Options) (*problem, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	n, d, p, err := certify.CheckXY(X, Y)
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
		return nil, errs.Inputf("%d hidden units cannot be identified from order-%d moments in d = %d dimensions: they need linearly independent w_i^{⊗ℓ}, so m ≤ C(d+ℓ−1, ℓ) = %d", opt.Hidden, ell, d, lim)
	}
	if ell == 1 && opt.Hidden > d {
		return nil, errs.Inputf("ℓ = 1 needs m ≤ d (W of full rank); %d units in d = %d dimensions need order ℓ = 2", opt.Hidden, d)
	}
	if ell == 2 && opt.Hidden == 0 {
		return nil, errs.Inputf("the overcomplete route (ℓ = 2) needs the width: set Options.Hidden")
	}
	// The reduced dimension: m for ℓ = 1 (inferred if unknown), d for ℓ = 2.
	// An unknown width is checked against the floor of one unit here, and
	// against the sample count again once T̂_2 has shown it (findUnits):
	// assuming m = d here refused data that determine a narrow network.
	dim, kGuess := 0, d
	if ell == 1 {
		dim, kGuess = -1, 1
		if opt.Hidden > 0 {
			dim, kGuess = opt.Hidden, opt.Hidden
		}
	}
	if need := MinSamples(d, kGuess, ell); n < need {
		entries := tensor.SymLen(kGuess, 2*ell+2)
		return nil, errs.Inputf("the order-%d moment in k = %d dimensions has %d distinct entries; this route needs n ≥ max(1000, 20·d, 100·%d) = %d samples, got %d", 2*ell+2, kGuess, entries, entries, need, n)
	}
	yy := mat.Norm(Y, 2)
	u := certify.Roundoff(X, Y)
	if opt.CertTol == 0 {
		opt.CertTol = certify.DefaultTol(u)
	}
	return &problem{
		X: X, Y: Y, n: n, d: d, p: p, yy: yy * yy,
		ell: ell, hidden: opt.Hidden, dim: dim,
		route: opt.Route, affine: opt.Affine, certTol: opt.CertTol, seed: opt.Seed, roundoff: u,
		thresholds: opt.Thresholds, maxIter: opt.MaxIter, progress: opt.Progress,
	}, nil
}

// stage returns the progress callback of one stage (nil without Progress).
func (pr *problem) stage(name string) func(done, total int) {
	if pr.progress == nil {
		return nil
	}
	return func(done, total int) { pr.progress(name, done, total) }
}

// residual is ‖Y − net(X)‖_F/‖Y‖_F.
func (pr *problem) residual(net *Network) float64 {
	return relResidual(pr.X, pr.Y, net)
}

// loss is ½‖Y − net(X)‖_F² on all samples.
func (pr *problem) loss(net *Network) float64 {
	return lossOn(pr.X, pr.Y, net, pr.n)
}
