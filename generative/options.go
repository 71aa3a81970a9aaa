package generative

import (
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/density"
)

// Solver is the solver Fit runs (Options.Solver).
type Solver string

// Solvers (Options.Solver). Result.Route holds the same strings.
const (
	// RouteALS is Solver B, censored alternating least squares (default).
	RouteALS = "als"
	// RouteADMM is Solver A, maximum likelihood by ADMM with a rank or
	// nuclear-norm constraint.
	RouteADMM = "admm"

	SolverALS  Solver = RouteALS
	SolverADMM Solver = RouteADMM
)

// OffSupport is the off-support constraint of the ML program
// (Options.OffSupport) [MR18, §3.2, (26) and (29)].
type OffSupport string

// Off-support constraints (Options.OffSupport).
const (
	// OffConsistent is X_ij ≤ −β_i − ν_c: the physical condition (26). Default.
	OffConsistent OffSupport = "consistent"
	// OffPaper is the paper's (29): X_ij ≤ min_{Ω} X_i − ν, which the truth
	// satisfies only when every row's order-statistic gaps are ≥ ν.
	OffPaper OffSupport = "paper"
	// OffBoth imposes both.
	OffBoth OffSupport = "both"
)

// Constraint is the low-rank constraint of Solver A (Options.Constraint).
// The paper's program (34) has none and is then under-determined; one is
// added here (docs/generative.md).
type Constraint string

// Low-rank constraints (Options.Constraint).
const (
	ConstraintRank    Constraint = "rank"    // rank(X) ≤ k (truncated SVD projection); default
	ConstraintNuclear Constraint = "nuclear" // ‖X‖_* ≤ τ (convex; Davenport et al.)
)

// Options controls Fit, FitALS and FitADMM. Only Rank is required; the zero
// value of everything else works. The json keys are those of run manifests.
type Options struct {
	// Rank is the latent dimension k (columns of A). Required, 1 ≤ k <
	// min(n, d).
	Rank int `json:"rank"`
	// Solver is SolverALS (default) or SolverADMM.
	Solver Solver `json:"solver"`
	// Bias is the density of the bias coordinates. Solver A needs it (the
	// likelihood); with Solver B it is optional and used only to pick the
	// gauge of M and estimate b (Result.M, Result.Bias) and for the Theorem 3
	// bound in the diagnostics.
	Bias density.Density `json:"-"`
	// Gamma is the bound γ ≥ ‖M‖_∞ of the ML program. 0 means
	// max(Y) + the larger |quantile| of the bias at 1e-3 and 1 − 1e-3.
	Gamma float64 `json:"gamma,omitempty"`
	// Nu is the paper's margin ν (OffPaper and the Theorem 3 bound).
	// Default 0.1.
	Nu float64 `json:"nu,omitempty"`
	// NuC is the censoring margin ν_c ≥ 0 of the consistent constraint and
	// of Solver B's hinge (Z ≤ −ν_c on zeros). Default 0.
	NuC float64 `json:"nu_c,omitempty"`
	// OffSupport is OffConsistent (default), OffPaper or OffBoth (Solver A).
	OffSupport OffSupport `json:"off_support,omitempty"`
	// Constraint is ConstraintRank (default) or ConstraintNuclear (Solver A).
	Constraint Constraint `json:"constraint,omitempty"`
	// Tau is the nuclear-ball radius; 0 means γ·√(k·d·n), a radius the truth
	// always satisfies.
	Tau float64 `json:"tau,omitempty"`
	// Rho is ADMM's initial penalty. Default 1.
	Rho float64 `json:"rho,omitempty"`
	// MaxIter bounds sweeps (ALS, default 500) or iterations (ADMM,
	// default 2000).
	MaxIter int `json:"max_iter,omitempty"`
	// Tol stops ALS when its data misfit (J without the tiny ridge) falls by
	// less than Tol·(its value after the first sweep) over 10 sweeps, or is
	// at rounding level; it stops ADMM by the primal and dual residual tests
	// of Boyd et al. with ε_rel = Tol. Default 1e-10 (ALS), 1e-5 (ADMM).
	Tol float64 `json:"tol,omitempty"`
	// PosTol: entries Y_ij > PosTol count as active (positive). Default 0;
	// raise it for real data with near-zero noise.
	PosTol float64 `json:"pos_tol,omitempty"`
	// CertTol is the tolerance of the data-consistency certificate.
	// Default 1e-6.
	CertTol float64 `json:"cert_tol,omitempty"`
	// Progress, if non-nil, is called as sweeps complete.
	Progress func(stage string, done, total int) `json:"-"`
}

// Certificate is the evidence that the fitted model explains the data: the
// relative misfit on the positive entries and the largest violation of the
// censoring on the zeros. Both are 0 for an exact explanation (noiseless
// data); it does not say that the explanation is unique (see Diagnostics).
type Certificate struct {
	// EqualityResidual is ‖(Ẑ − Y)_Ω‖_F/‖Y_Ω‖_F over the positive entries Ω.
	EqualityResidual float64 `json:"equality_residual"`
	// CensorViolation is max over zeros of max(Ẑ_ij + ν_c, 0) / max(Y).
	CensorViolation float64 `json:"censor_violation"`
	Tol             float64 `json:"tol"`
	Met             bool    `json:"met"`
}

// Diagnostics reports what the learner met.
type Diagnostics struct {
	N, D, K int `json:"-"`
	// Activity of the neurons (columns of Y): DeadRows have no positive
	// entry, RarelyActive (≤ k positives, dead included) are essentially
	// unidentifiable, WellObserved have ≥ k + 2, FullyActive are never
	// censored. FractionPositive is |Ω|/(n·d).
	DeadRows         int     `json:"dead_rows"`
	RarelyActive     int     `json:"rarely_active_rows"`
	WellObserved     int     `json:"well_observed_rows"`
	FullyActive      int     `json:"fully_active_rows"`
	FractionPositive float64 `json:"fraction_positive"`
	// Iterations, Converged and Objective describe the solver's run.
	Iterations int     `json:"iterations"`
	Converged  bool    `json:"converged"`
	Objective  float64 `json:"objective"`
	// SingularValues are the top k+1 singular values of the centred M̂ (the
	// (k+1)-th is 0 for an exact rank-k fit).
	SingularValues []float64 `json:"singular_values"`
	// GaugeShift is ‖Â·ŵ‖ of the prior-chosen gauge (with a bias density):
	// how far the uncentred M̂ sits from the centred one, per observation.
	GaugeShift float64 `json:"gauge_shift,omitempty"`
	// Gamma, Rho are Solver A's γ and final ρ; InfeasibleRows counts rows
	// with an empty interval for β (never > 0 in a returned result).
	Gamma float64 `json:"gamma,omitempty"`
	Rho   float64 `json:"rho,omitempty"`
	// Theorem3Bound is C₀·L_γ·γ·d/(β_γ·ω) for the bias density (+Inf when
	// β_γ = 0), a bound on ‖(M̂ − M)P⊥‖_F² the paper proves for the ML
	// estimate ([MR18, Theorem 3]; checked in tests for Laplace bias).
	Theorem3Bound float64 `json:"theorem3_bound,omitempty"`
}

// Result is what Fit returns.
type Result struct {
	// Basis is a d×k orthonormal basis of the estimated col(A).
	Basis *mat.Dense
	// Factor is d×k with the same span: Â up to an invertible k×k matrix.
	Factor *mat.Dense
	// Codes is n×k with centred columns: MCentred = Codes·Factorᵀ.
	Codes *mat.Dense
	// MCentred is n×d: M̂ with each column centred over the observations
	// (the paper's M̂P⊥), the identifiable part of M.
	MCentred *mat.Dense
	// Offset is ô (length d): Ẑ = MCentred + 1·ôᵀ estimates the
	// pre-activations M + 1·bᵀ, so ô = b + (column means of M).
	Offset []float64
	// M and Bias are the uncentred M̂ (n×d) and b̂ with the gauge picked by
	// maximum likelihood of the bias density; nil without Options.Bias.
	M    *mat.Dense
	Bias []float64
	// Route is RouteALS or RouteADMM; Reason says why.
	Route       string
	Reason      string
	Certificate Certificate
	Diagnostics Diagnostics
	Warnings    []string
	Elapsed     time.Duration
}
