package twolayer

import (
	"time"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// Route names. Fit reports which one produced the answer in Result.Route.
const (
	// RouteExact is a start followed by the exact polish (Alg 5, margin
	// form): the parity start for the ReLU, the tensor start (order-r
	// Hermite moment + Jennrich) where it does not apply or fails
	// (Diagnostics.Start says which). It returns a residual certificate and
	// is only reported when that certificate is met. The name predates the
	// parity start and is kept for the scripts that read it.
	RouteExact = "tensor+polish"
	// RouteNoisy is the tensor start followed by sign recovery by projections
	// (Alg 6) and least-squares U (Lemma 20), optionally refined.
	RouteNoisy = "tensor+signs+lsq"
)

// Route is a value of Options.Route: the route Fit runs. (Result.Route
// reports the route that produced the answer, e.g. RouteExact.)
type Route string

// The values of Options.Route.
const (
	UseAuto      Route = "auto"      // choose from the data (Fit's doc)
	UseExact     Route = "exact"     // tensor start + exact polish, or ErrNotExact
	UseNoisy     Route = "noisy"     // tensor start + sign recovery + least squares
	UseWorstCase Route = "worstcase" // Alg 1–2, any X
	UseICA       Route = "ica"       // Alg 3, orthonormal V*
	UseFPT       Route = "fpt"       // Alg 7, U* without full column rank
	UseSparse    Route = "sparse"    // robust PCA, then the exact route (§8)
)

// Routes lists the values Options.Route accepts.
var Routes = []Route{UseAuto, UseExact, UseNoisy, UseWorstCase, UseICA, UseFPT, UseSparse}

// Whiten is a value of Options.Whiten.
type Whiten string

// The values of Options.Whiten.
const (
	WhitenAuto   Whiten = "auto"   // whiten when the sample covariance differs from I beyond sampling error
	WhitenAlways Whiten = "always" // always whiten
	WhitenNever  Whiten = "never"  // never whiten
)

// StartKind is a value of Options.Start.
type StartKind string

// The values of Options.Start.
const (
	// StartAuto: the zero-set start first where it applies (the exact
	// route of a ReLU network), then the parity start (k ≤ parityMaxK),
	// the tensor start otherwise or when they fail.
	StartAuto StartKind = "auto"
	// StartParity: as StartAuto without the zero-set start: the parity
	// start first, for comparison.
	StartParity StartKind = "parity"
	// StartTensor: the tensor start of [BJW19, Alg 4] only, as printed
	// (with the corrections of docs/twolayer.md), for comparison. Fit's
	// automatic route choice then skips its first step (the exact route
	// from the zero-set and parity starts) and chooses as the paper does.
	StartTensor StartKind = "tensor"
)

// Options controls Fit. The zero value works.
type Options struct {
	// Hidden is the number of hidden units k. 0 infers it from the numerical
	// rank of Y (needs U* of full column rank, so k ≤ m).
	Hidden int `json:"hidden"`
	// Route forces a route: "" or "auto" (default) chooses from the data
	// (see Fit); "exact" runs the tensor start and polish and fails unless
	// the residual certificate is met; "noisy" skips the exact polish;
	// "worstcase" runs Alg 1–2 for arbitrary X (exponential in k); "ica" runs
	// Alg 3 (orthonormal V*); "fpt" runs Alg 7 (U* without full column rank);
	// "sparse" runs robust PCA before the exact route (§8, sparse noise).
	Route Route `json:"route"`
	// Force lets the worst-case route run above its work limit
	// (WorstCaseOptions.MaxWork).
	Force bool `json:"force,omitempty"`
	// Seed seeds every random choice (contraction vectors, retries). Default 0
	// is a valid seed; the same seed gives the same result at any GOMAXPROCS.
	Seed uint64 `json:"seed"`
	// Whiten controls the non-identity covariance handling of Remark 3:
	// "auto" (default) whitens when the sample covariance differs from I by
	// more than sampling error, "always", or "never".
	Whiten Whiten `json:"whiten"`
	// Start chooses the exact route's start: "" or "auto" (default),
	// "parity" or "tensor" (StartAuto, StartParity, StartTensor).
	Start StartKind `json:"start,omitempty"`
	// Refine runs a local refinement of ‖Y − ReLU(XVᵀ)Uᵀ‖² on the noisy route,
	// started from the moment estimate. The unrefined error is reported too.
	Refine bool `json:"refine"`
	// CertTol is the relative residual ‖Y − f(X)‖_F/‖Y‖_F below which a
	// solution counts as exact. Default 1e-10.
	CertTol float64 `json:"cert_tol,omitempty"`
	// Activation is the hidden nonlinearity φ of Y = φ(X·Vᵀ)·Uᵀ: "" or
	// nn.ReLU (default), or another rectified activation of Bakshi et al.
	// App. 9.1 — nn.RectPow(c) (max(x,0)^c, c > 0) or nn.RectExp
	// (e^{max(x,0)} − 1). It sets the tensor order and the moment
	// normalisations (Hermite coefficients of φ), how the exact polish
	// inverts φ, and the activations of SolveU, RecoverSigns and Refine.
	// With nn.RectExp the rows of V keep their norms (no scaling symmetry).
	Activation nn.Activation `json:"activation"`
	// Progress, if non-nil, is called as stages advance (stage name, units
	// done, units total). It must be cheap and safe to call from one goroutine.
	Progress func(stage string, done, total int) `json:"-"`
	// Gaussian, if non-nil, is CheckGaussian(X, Seed) for this X and Seed,
	// already computed by the caller (package learner runs the check to
	// choose a learner): Fit's automatic route choice uses it instead of
	// reading X again. Default nil: Fit runs the check itself.
	Gaussian *GaussianCheck `json:"-"`
	// Screen, if non-nil, is called by Fit's automatic route choice once
	// the exact route from its first starts (zero-set, parity) has not certified the data (or
	// does not apply), before any other route runs; an error it returns
	// ends Fit with that error. Package learner screens for biases here
	// (depth2.TestBiases): data a bias-free network reproduces exactly need
	// no such screen.
	Screen func() error `json:"-"`
}

// Certificate is the evidence behind an exact answer: the relative residual
// ‖Y − φ(XVᵀ)Uᵀ‖_F/‖Y‖_F of the returned network on the data it was fitted
// to, and the tolerance it was checked against (certify.Certificate, shared
// with depth2).
type Certificate = certify.Certificate

// Diagnostics reports what the learner met on the way.
type Diagnostics struct {
	Hidden         int  `json:"hidden"`
	HiddenInferred bool `json:"hidden_inferred"`
	// Precision is the storage precision the data show ("float64", or
	// "float32" when every value of X and Y is a float32;
	// certify.Roundoff), which sets the rank test's and the certificate's
	// default tolerances.
	Precision       string    `json:"precision,omitempty"`
	SingularValuesY []float64 `json:"singular_values_y"`
	// Start names the start the route polished last: "parity" (the exact
	// route's first start for the ReLU, docs/twolayer.md) or "tensor"
	// ([BJW19, Alg 4]). ParityGap is σ_{k+1}/σ_k of the parity start's
	// equations (how clearly their k-dimensional null space stands out;
	// from k = 25 on, k(k+1)/2 > 300 unknowns, σ_{k+1} is a Ritz value of
	// linalg.SmallestEigen and the gap may be overstated a little).
	Start     string  `json:"start,omitempty"`
	ParityGap float64 `json:"parity_gap,omitempty"`
	// TensorOrder is the tensor start's Hermite order (0 after a parity start).
	TensorOrder    int     `json:"tensor_order"`
	Whitened       bool    `json:"whitened"`
	CondCovariance float64 `json:"cond_covariance,omitempty"`
	JennrichTries  int     `json:"jennrich_tries"`
	JennrichGap    float64 `json:"jennrich_min_rel_gap"`
	// StartRows is how many samples (the first ones) the tensor start's
	// moments were read from: n, or fewer for the exact route's quick start
	// on data far above the route's sample floor; after a parity start, how
	// many samples (spread evenly) its linear part was regressed on.
	StartRows int `json:"start_rows,omitempty"`
	// InitAngleError is, when the exact route succeeded, the largest angle
	// (radians) between a tensor-start row and the exact row: how far the
	// polish had to move.
	InitAngleError float64 `json:"init_angle_error,omitempty"`
	// PolishedUnits counts the units the exact polish made exact; Units has
	// the per-unit reports of the last polish attempt.
	PolishedUnits int          `json:"polished_units"`
	Units         []UnitPolish `json:"units,omitempty"`
	// CondF is κ(ReLU(XVᵀ)), the conditioning of the final U solve.
	CondF float64 `json:"cond_f"`
	// ResidualBeforeRefine is the relative residual of the noisy route before
	// the optional refinement (0 if no refinement ran).
	ResidualBeforeRefine float64 `json:"residual_before_refine,omitempty"`
	RefineIterations     int     `json:"refine_iterations,omitempty"`
	RefineConverged      bool    `json:"refine_converged,omitempty"`
	// Selection holds the checks behind Fit's automatic route choice (nil
	// when a route was named).
	Selection *Selection `json:"selection,omitempty"`
}

// Result is what Fit returns.
type Result struct {
	// Model is Y ≈ ReLU(X·Vᵀ)·Uᵀ with unit rows of V, sorted by the rule of
	// Normalize.
	Model *nn.MLP
	// Route is RouteExact or RouteNoisy; Reason says why it was chosen.
	Route  string
	Reason string
	// Certificate is the residual on the fitted data (Met only on RouteExact).
	Certificate Certificate
	Diagnostics Diagnostics
	// Warnings are Messages, apart from their text the options they
	// name; their String (and JSON) is the text a library caller reads.
	Warnings []errs.Message
	Elapsed  time.Duration
}
