package depth2

import (
	"math"
	"slices"
	"time"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
)

// Route is what Options.Route asks Fit to run. The zero value "" means
// RouteAuto.
type Route string

// The values of Options.Route.
const (
	// RouteAuto runs the moments, the improper least-squares step and the
	// refinement (Result.Route RouteRefined).
	RouteAuto Route = "auto"
	// RouteExact is RouteAuto, but Fit returns an error wrapping
	// ErrNotExact unless the residual certificate is met.
	RouteExact Route = "exact"
	// RouteMomentsOnly stops at the paper's moment estimate (Result.Route
	// RouteMoments).
	RouteMomentsOnly Route = "moments"
	// RouteImproperOnly stops at Algorithm 5 without refinement
	// (Result.Route RouteImproper).
	RouteImproperOnly Route = "improper"
	// RouteSteinOnly runs the exact route alone (Result.Route
	// RouteSteinPolish, exact.go) and returns an error wrapping ErrNotExact
	// when it does not apply or does not certify: the cheap first try of a
	// caller that has other learners to go on to (package learner).
	RouteSteinOnly Route = "stein"
)

// Routes lists the values Options.Route accepts ("" is RouteAuto).
var Routes = []Route{RouteAuto, RouteExact, RouteMomentsOnly, RouteImproperOnly, RouteSteinOnly}

// Result route names. Fit reports which one produced the answer in
// Result.Route.
const (
	// RouteRefined is the moment estimate (Alg 4/6 + Alg 2/3), the
	// improper least-squares step (Alg 5) and the local refinement
	// (Refine), with sign resolution. On noiseless data its certificate is
	// met (residual ≤ CertTol): the parameters are exact to float64
	// rounding.
	RouteRefined = "moments+refine"
	// RouteMoments is the paper's moment pipeline alone: Algorithm 6 (ℓ = 1)
	// or Algorithm 4 (ℓ = 2), with output weights from RecoverScalars and the
	// output bias from T_0. Consistent, but with errors ≈ 1e-2 at n = 1e6.
	RouteMoments = "moments"
	// RouteImproper is Algorithm 5: the moment units plus an affine term
	// fitted by least squares; the model has m′ units and an affine part
	// (saved as m′ + 2 ReLU units for one output, Claim D.14).
	RouteImproper = "moments+improper"
)

// Options controls Fit. The zero value works. The json tags are the keys
// the CLI's run manifest records them under.
type Options struct {
	// Hidden is the number of hidden units m. 0 infers it from the spectrum
	// of T̂_2 against its split-half noise (ℓ = 1 only; the overcomplete
	// case needs it). It also caps the ranks of Algorithm 4.
	Hidden int `json:"hidden"`
	// Order is ℓ: 1 (full rank, m ≤ d, moments up to order 4) or 2
	// (overcomplete, m ≤ d(d+1)/2, moments up to order 6). 0 chooses 1 when
	// Hidden ≤ d (or Hidden is 0) and 2 otherwise.
	Order int `json:"order"`
	// Route forces a route: "" or RouteAuto (default: moments, improper
	// step, refinement), RouteExact (the same, but an error wrapping
	// ErrNotExact unless the residual certificate is met), RouteMomentsOnly
	// (the paper's moment estimate only) or RouteImproperOnly (Algorithm 5
	// without refinement).
	Route Route `json:"route"`
	// Affine keeps an affine term L·x in the model (the improper learner's
	// form). By default the affine term is removed by resolving the units'
	// signs when the data allow it (the paper's model has none); it is kept,
	// with a warning, when removing it would worsen the fit beyond noise
	// (units with large |b_i| that the moments could not see).
	Affine bool `json:"affine"`
	// CertTol is the relative residual ‖Y − f(X)‖_F/‖Y‖_F below which the
	// answer counts as exact. 0 means certify.DefaultTol of the data's
	// precision: 1e-10 for float64 data, 9.5e-7 when every value of X and
	// Y is a float32 (certify.Roundoff).
	CertTol float64 `json:"cert_tol,omitempty"`
	// Seed seeds every random choice (Jennrich's contractions). The same
	// seed gives the same result at any GOMAXPROCS.
	Seed uint64 `json:"seed"`
	// Thresholds are Algorithm 4's η₁, η₂, η₃; the zero value calibrates
	// them from the split-half noise of the moments. (Not in the JSON form:
	// the CLI has no flags for them, and its manifest records its flags.)
	Thresholds Thresholds `json:"-"`
	// MaxIter bounds the refinement's Levenberg–Marquardt iterations per
	// stage. 0 means 100.
	MaxIter int `json:"max_iter,omitempty"`
	// Progress, if non-nil, is called as stages advance (stage name, done,
	// total). It is called from one goroutine at a time.
	Progress func(stage string, done, total int) `json:"-"`
}

// Validate checks the options on their own (the data are checked by Fit):
// a width ≥ 0, an order of 0, 1 or 2, a known route, a finite CertTol ≥ 0,
// MaxIter ≥ 0 and finite thresholds. Its errors wrap ErrInput and name the
// option.
func (o Options) Validate() error {
	if o.Hidden < 0 {
		return errs.InvalidOption("Options", "Hidden", "must be ≥ 0 (0 infers the width), got %d", o.Hidden)
	}
	if o.Order < 0 || o.Order > MaxEll {
		return errs.InvalidOption("Options", "Order", "must be 0 (auto), 1 or 2, got %d", o.Order)
	}
	if o.Route != "" && !slices.Contains(Routes, o.Route) {
		return errs.InvalidOption("Options", "Route", "must be auto, exact, moments or improper, got %q", string(o.Route))
	}
	if !(o.CertTol >= 0) {
		return errs.InvalidOption("Options", "CertTol", "must be ≥ 0, got %g", o.CertTol)
	}
	if math.IsInf(o.CertTol, 0) {
		return errs.InvalidOption("Options", "CertTol", "must be finite, got %g", o.CertTol)
	}
	if o.MaxIter < 0 {
		return errs.InvalidOption("Options", "MaxIter", "must be ≥ 0 (0 means 100), got %d", o.MaxIter)
	}
	th := o.Thresholds
	for _, v := range []struct {
		name string
		val  float64
	}{{"Rank", th.Rank}, {"RankFactor", th.RankFactor}, {"Prune", th.Prune}, {"Dedupe", th.Dedupe}} {
		if math.IsNaN(v.val) || math.IsInf(v.val, 0) {
			return errs.InvalidOption("Options", "Thresholds."+v.name, "must be finite, got %v", v.val)
		}
	}
	return nil
}

// withDefaults fills the defaults of a validated Options.
func (o Options) withDefaults() Options {
	if o.Route == "" {
		o.Route = RouteAuto
	}
	if o.MaxIter == 0 {
		o.MaxIter = 100
	}
	return o
}

// MinSamples is the sample floor of the moment routes for input dimension
// d, reduced dimension k and order ℓ: max(1000, 20·d, 100·C(k+2ℓ+1, 2ℓ+2)),
// i.e. at least 100 samples per distinct entry of the order-(2ℓ+2) moment
// (below that the split-half noise swamps any unit; [ATV21, Lemma D.3]
// asks for poly(m, d)/η² samples, 1e5–1e7 in practice).
func MinSamples(d, k, ell int) int {
	return max(1000, 20*d, 100*tensor.SymLen(k, 2*ell+2))
}

// Certificate is the evidence behind an answer: the relative residual of
// the returned network on the data it was fitted to (certify.Certificate).
type Certificate = certify.Certificate

// Diagnostics reports what the learner met on the way.
type Diagnostics struct {
	Ell int `json:"ell"`
	// Precision is the storage precision the data show ("float64", or
	// "float32" when every value is a float32; certify.Roundoff), which
	// sets the default certificate tolerance.
	Precision      string `json:"precision"`
	Hidden         int    `json:"hidden"`
	HiddenInferred bool   `json:"hidden_inferred"`
	// ReducedDim is k, the dimension the moments of order ≥ 3 were formed
	// in (d when no reduction).
	ReducedDim int `json:"reduced_dim"`
	// MomentNoise[r] is the split-half estimate of ‖T̂_r − f_r‖_F.
	MomentNoise []float64 `json:"moment_noise"`
	// Recovery is Algorithm 4's report (ranks, spectra, thresholds,
	// Jennrich fits, pruned and duplicate terms, scalar conditioning).
	Recovery *Recovery `json:"recovery"`
	// MomentResidual, ImproperResidual: relative residuals of the moment
	// estimate and of Algorithm 5's network on the data.
	MomentResidual   float64 `json:"moment_residual"`
	ImproperResidual float64 `json:"improper_residual,omitempty"`
	// Deflations counts the rounds that found missing units in the
	// residual's moments, AddedUnits the units they added.
	Deflations int `json:"deflations,omitempty"`
	AddedUnits int `json:"added_units,omitempty"`
	// ReplacedUnits counts units removed by backward elimination when a
	// deflation round went beyond the known width.
	ReplacedUnits int `json:"replaced_units,omitempty"`
	// Misfit, when set, says why deflation ended on a residual that more
	// units do not explain (deflate): the data are not one hidden layer of
	// ReLU units these samples identify (a deeper network, another
	// activation). Fit then skips the polishes on all samples, which make
	// exact only an answer that nearly is.
	Misfit string `json:"misfit,omitempty"`
	// Refine reports the refinement (nil when it did not run).
	Refine *RefineResult `json:"refine,omitempty"`
	// FlippedUnits counts units whose sign the affine-term resolution
	// flipped; SignTies > 1 means several sign patterns fit equally
	// (non-identifiable, Claim 4.8).
	FlippedUnits int `json:"flipped_units"`
	SignTies     int `json:"sign_ties,omitempty"`
	// AffineKept reports that the model has an affine term.
	AffineKept bool `json:"affine_kept"`
	// Exact says why the exact route (RouteSteinPolish), tried first, did
	// not apply or did not certify; empty when it certified or was not
	// tried.
	Exact string `json:"exact,omitempty"`
}

// Result is what Fit returns.
type Result struct {
	// Model is the learned network in the paper's normalisation
	// (nn.Depth2.Normalize: ‖w_i‖ = 1, units by decreasing output norm). Its
	// L is nil unless an affine term was kept.
	Model *nn.Depth2
	// Moment is the moment estimate alone (RouteMoments), for comparison.
	Moment *nn.Depth2
	// Improper is Algorithm 5's network (the moment units with output
	// weights, output bias and affine term by least squares), nil on the
	// moments route.
	Improper *nn.Depth2
	// Route is RouteRefined, RouteMoments or RouteImproper; Reason says why.
	Route, Reason string
	Certificate   Certificate
	Diagnostics   Diagnostics
	Warnings      []string
	Elapsed       time.Duration
}
