package robust

import (
	"time"

	"github.com/relurec/relurec/density"
)

// Rule is a threshold rule (Options.Rule).
type Rule string

// Threshold rules (Options.Rule); [MR18, Theorem 4] asks for τ ≥ 2‖z + w‖_∞.
const (
	// RuleMAD is τ = 2·√(2 log d)·σ̂ with σ̂ = 1.4826·MAD of the residuals of
	// an initial Huber fit. It needs nothing but the data.
	RuleMAD Rule = "mad"
	// RulePlugin is τ = 2(max(μ, 1−μ)·√(2 log(2d/α)) + q_{|B|}(1 − α/(2d)) + δ),
	// a high-probability bound on 2‖z + w‖_∞ for ‖c*‖ = 1. It needs the bias
	// density (Options.Bias) and the noise bound δ (Options.Delta).
	RulePlugin Rule = "plugin"
	// RuleOracle is τ = 2‖z + w‖_∞, the smallest threshold Theorem 4 allows.
	// It needs the truth (Options.OracleZW) and exists for tests.
	RuleOracle Rule = "oracle"
)

// SolverName is a solver of (47) (Options.Solver).
type SolverName string

// Solvers (Options.Solver).
const (
	// SolverSSN is semismooth Newton on the Huber form (the default).
	SolverSSN SolverName = "ssn"
	// SolverBCD alternates c ← A⁺(v − e), e ← S_τ(v − Ac): ISTA with step d
	// on the e-LASSO (c eliminated from (47)). A cross-check.
	SolverBCD SolverName = "bcd"
	// SolverFISTA is FISTA with adaptive restart on the e-LASSO. A cross-check.
	SolverFISTA SolverName = "fista"
)

// Options controls Recover. The zero value works: the MAD threshold rule,
// the semismooth Newton solver, no intercept, no sparsity penalty. The json
// keys are those of run manifests.
type Options struct {
	// Tau is the Huber threshold τ = λ·d (same unit as v). > 0 fixes it;
	// +Inf gives least squares (the s = 0 generalized LASSO). 0 means: use
	// Lambda, else Rule.
	Tau float64 `json:"tau,omitempty"`
	// Lambda is the λ of (47); when Tau is 0 and Lambda > 0, τ = λ·d.
	Lambda float64 `json:"lambda,omitempty"`
	// Rule picks τ when neither Tau nor Lambda is set: RuleMAD (default),
	// RulePlugin or RuleOracle.
	Rule Rule `json:"rule"`
	// Bias is the bias density, if known. It gives μ (Result.Mu and the
	// rescaled code Result.CScaled) and is required by RulePlugin.
	Bias density.Density `json:"-"`
	// Delta is the bound δ ≥ 0 on the dense noise ‖w‖_∞ used by RulePlugin.
	Delta float64 `json:"delta,omitempty"`
	// Alpha is the failure probability of RulePlugin. Default 0.05.
	Alpha float64 `json:"alpha,omitempty"`
	// OracleZW is z + w = v − e* − μAc* (length d), required by RuleOracle.
	OracleZW []float64 `json:"-"`
	// Solver is SolverSSN (default), SolverBCD or SolverFISTA.
	Solver SolverName `json:"solver"`
	// Intercept adds an unpenalised column of ones to A: it absorbs
	// E[ReLU(g + b)] and lowers the effective noise without changing the
	// target μc* (our addition, not in [MR18]; docs/robust.md). The fitted
	// value is Result.Intercept.
	Intercept bool `json:"intercept,omitempty"`
	// Linear declares the linear model v = Ac + e + w (no ReLU): μ = 1.
	Linear bool `json:"linear,omitempty"`
	// SparseC is λ_c ≥ 0: the penalty λ_c·‖c‖₁ is added to (47) for sparse
	// codes (paper footnote 6; Nguyen–Tran). 0 means none.
	SparseC float64 `json:"sparse_c,omitempty"`
	// KnownSupport lists outlier positions known in advance (an oracle
	// baseline, not in the paper): c is then least squares on the other rows
	// and ê is the residual on the listed ones. τ is not used.
	KnownSupport []int `json:"known_support,omitempty"`
	// MaxIter bounds the iterations: default 100 for SSN, 50 000 for BCD and
	// FISTA.
	MaxIter int `json:"max_iter,omitempty"`
	// KKTTol is the tolerance of the KKT certificate (relative, see KKT).
	// Default 1e-9.
	KKTTol float64 `json:"kkt_tol,omitempty"`
}

// KKT is the optimality certificate of a solution (ĉ, ê) of (47) with
// residual r = v − Aĉ − ê. The three numbers are relative
// to the scale of the data, so that rounding-level residuals (an exact fit)
// count as zero; Met reports that each is ≤ Tol.
type KKT struct {
	// Stationarity is max_j |a_jᵀr| / (‖a_j‖·‖v‖): Aᵀr = 0 at an optimum.
	// With SparseC it is the violation of the ℓ1 subgradient condition
	// (a_jᵀr = λ_c·d·sign(ĉ_j), |a_jᵀr| ≤ λ_c·d where ĉ_j = 0) divided by
	// ‖a_j‖·‖v‖ + λ_c·d.
	Stationarity float64 `json:"stationarity"`
	// SignViolation is max over ê_i ≠ 0 of |r_i − τ·sign(ê_i)|/(τ + ‖v‖_∞).
	SignViolation float64 `json:"sign_violation"`
	// BoxViolation is max over ê_i = 0 of max(|r_i| − τ, 0)/(τ + ‖v‖_∞).
	BoxViolation float64 `json:"box_violation"`
	Tol          float64 `json:"tol"`
	Met          bool    `json:"met"`
}

// Result is one recovered code.
type Result struct {
	// C is ĉ (length k), the estimate of μ·c*.
	C []float64 `json:"c"`
	// E is ê (length d), the estimated outliers: S_τ(v − Aĉ).
	E []float64 `json:"-"`
	// Intercept is the fitted intercept (Options.Intercept), else 0.
	Intercept float64 `json:"intercept,omitempty"`
	// Tau is the threshold used (τ = λ·d) and Lambda = τ/d; Rule says where
	// it came from ("tau", "lambda", "mad", "plugin", "oracle",
	// "known-support").
	Tau    float64 `json:"tau"`
	Lambda float64 `json:"lambda"`
	Rule   string  `json:"rule"`
	// Mu is μ = E_b Φ(b) when the bias density is known (1 with Linear),
	// NaN otherwise; CScaled = C/μ then estimates c* itself.
	Mu      float64   `json:"mu"`
	CScaled []float64 `json:"c_scaled,omitempty"`
	// Direction is C/‖C‖, the estimate of c*/‖c*‖.
	Direction []float64 `json:"direction"`
	// Outliers counts the nonzero entries of ê.
	Outliers    int    `json:"outliers"`
	Solver      string `json:"solver"`
	Iterations  int    `json:"iterations"`
	Converged   bool   `json:"converged"`
	Certificate KKT    `json:"certificate"`
	// Warnings says what to distrust (a certificate not met, a tiny μ).
	Warnings []string      `json:"warnings,omitempty"`
	Elapsed  time.Duration `json:"-"`
}
