package depth2

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/tensor"
)

// Route names. Fit reports which one produced the answer in Result.Route.
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

// Options controls Fit. The zero value works.
type Options struct {
	// Hidden is the number of hidden units m. 0 infers it from the spectrum
	// of T̂_2 against its split-half noise (ℓ = 1 only; the overcomplete
	// case needs it). It also caps the ranks of Algorithm 4.
	Hidden int
	// Order is ℓ: 1 (full rank, m ≤ d, moments up to order 4) or 2
	// (overcomplete, m ≤ d(d+1)/2, moments up to order 6). 0 chooses 1 when
	// Hidden ≤ d (or Hidden is 0) and 2 otherwise.
	Order int
	// Route forces a route: "" or "auto" (default: moments, improper step,
	// refinement), "exact" (the same, but an error wrapping ErrNotExact
	// unless the residual certificate is met), "moments" (the paper's
	// moment estimate only) or "improper" (Algorithm 5 without refinement).
	Route string
	// Affine keeps an affine term L·x in the model (the improper learner's
	// form). By default the affine term is removed by resolving the units'
	// signs when the data allow it (the paper's model has none); it is kept,
	// with a warning, when removing it would worsen the fit beyond noise
	// (units with large |b_i| that the moments could not see).
	Affine bool
	// Seed seeds every random choice (Jennrich's contractions). The same
	// seed gives the same result at any GOMAXPROCS.
	Seed uint64
	// CertTol is the relative residual ‖Y − f(X)‖_F/‖Y‖_F below which the
	// answer counts as exact. Default 1e-10.
	CertTol float64
	// Thresholds are Algorithm 4's η₁, η₂, η₃; the zero value calibrates
	// them from the split-half noise of the moments.
	Thresholds Thresholds
	// MaxIter bounds the refinement's Levenberg–Marquardt iterations per
	// stage. Default 100.
	MaxIter int
	// Progress, if non-nil, is called as stages advance (stage name, done,
	// total). It is called from one goroutine at a time.
	Progress func(stage string, done, total int)
}

func (o Options) withDefaults() Options {
	if o.Route == "" {
		o.Route = "auto"
	}
	if o.CertTol <= 0 {
		o.CertTol = 1e-10
	}
	if o.MaxIter <= 0 {
		o.MaxIter = 100
	}
	return o
}

func (o Options) check() error {
	switch o.Route {
	case "auto", "exact", "moments", "improper":
	default:
		return fmt.Errorf("%w: unknown route %q (want auto, exact, moments or improper)", ErrInput, o.Route)
	}
	if o.Hidden < 0 {
		return fmt.Errorf("%w: hidden width %d is negative", ErrInput, o.Hidden)
	}
	if o.Order < 0 || o.Order > MaxEll {
		return fmt.Errorf("%w: order ℓ = %d; use 1 (full rank) or 2 (overcomplete)", ErrInput, o.Order)
	}
	for _, v := range []float64{o.Thresholds.Rank, o.Thresholds.Prune, o.Thresholds.Dedupe, o.Thresholds.RankFactor, o.CertTol} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: non-finite threshold %v", ErrInput, v)
		}
	}
	return nil
}

func (o Options) progress(stage string) func(done, total int) {
	if o.Progress == nil {
		return nil
	}
	return func(done, total int) { o.Progress(stage, done, total) }
}

// MinSamples is the sample floor of the moment routes for input dimension
// d, reduced dimension k and order ℓ: max(1000, 20·d, 100·C(k+2ℓ+1, 2ℓ+2)),
// i.e. at least 100 samples per distinct entry of the order-(2ℓ+2) moment
// (below that the split-half noise swamps any unit; specs/004 §7.4 (2)
// budgets 1e5–1e7 in practice).
func MinSamples(d, k, ell int) int {
	return max(1000, 20*d, 100*tensor.SymLen(k, 2*ell+2))
}

// Certificate is the evidence behind an answer: the relative residual of
// the returned network on the data it was fitted to.
type Certificate struct {
	// Residual is ‖Y − f(X)‖_F / ‖Y‖_F over all samples.
	Residual float64 `json:"residual"`
	// Tol is the threshold it was checked against.
	Tol float64 `json:"tol"`
	// Samples is the number of samples.
	Samples int `json:"samples"`
	// Met reports Residual ≤ Tol: the network reproduces the data to
	// float64 accuracy, so (up to the symmetries) its parameters are exact.
	Met bool `json:"met"`
}

// Diagnostics reports what the learner met on the way.
type Diagnostics struct {
	Ell            int  `json:"ell"`
	Hidden         int  `json:"hidden"`
	HiddenInferred bool `json:"hidden_inferred"`
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
	// Refine reports the refinement (nil when it did not run).
	Refine *RefineResult `json:"refine,omitempty"`
	// FlippedUnits counts units whose sign the affine-term resolution
	// flipped; SignTies > 1 means several sign patterns fit equally
	// (non-identifiable, Claim 4.8).
	FlippedUnits int `json:"flipped_units"`
	SignTies     int `json:"sign_ties,omitempty"`
	// AffineKept reports that the model has an affine term.
	AffineKept bool `json:"affine_kept"`
}

// Result is what Fit returns.
type Result struct {
	// Model is the learned network in the paper's normalisation
	// (Network.Normalize: ‖w_i‖ = 1, units by decreasing output norm). Its
	// L is nil unless an affine term was kept.
	Model *Network
	// Moment is the moment estimate alone (RouteMoments), for comparison.
	Moment *Network
	// Improper is Algorithm 5's network (the moment units with output
	// weights, output bias and affine term by least squares), nil on the
	// moments route.
	Improper *Network
	// Route is RouteRefined, RouteMoments or RouteImproper; Reason says why.
	Route, Reason string
	Certificate   Certificate
	Diagnostics   Diagnostics
	Warnings      []string
	Elapsed       time.Duration
}

// checkData validates X and Y and returns n, d, p.
func checkData(X, Y *mat.Dense) (n, d, p int, err error) {
	if X == nil || Y == nil {
		return 0, 0, 0, fmt.Errorf("%w: X and Y are required", ErrInput)
	}
	n, d = X.Dims()
	ny, p := Y.Dims()
	if n != ny {
		return 0, 0, 0, fmt.Errorf("%w: X has %d rows but Y has %d; both need one row per sample", ErrInput, n, ny)
	}
	if n == 0 || d == 0 || p == 0 {
		return 0, 0, 0, fmt.Errorf("%w: empty data (X is %d×%d, Y is %d×%d)", ErrInput, n, d, ny, p)
	}
	for _, e := range []error{dataio.CheckFinite("X", X), dataio.CheckFinite("Y", Y)} {
		if e != nil {
			return 0, 0, 0, fmt.Errorf("%w: %v; remove or impute non-finite values", ErrInput, e)
		}
	}
	return n, d, p, nil
}
