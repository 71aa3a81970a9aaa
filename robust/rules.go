package robust

import (
	"fmt"
	"math"
	"sort"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
)

// optionValue is the Options field named field with its value v, as a
// message about that value names it.
func optionValue(field string, v float64) errs.Option {
	return errs.Option{Struct: "Options", Field: field, Value: fmt.Sprint(v)}
}

func (o Options) maxIter() int {
	if o.MaxIter > 0 {
		return o.MaxIter
	}
	if o.Solver == SolverBCD || o.Solver == SolverFISTA || o.SparseC > 0 {
		return 50000
	}
	return 100
}

func (o Options) kktTol() float64 {
	if o.KKTTol > 0 {
		return o.KKTTol
	}
	return 1e-9
}

// Validate checks the options without data: finite non-negative numbers,
// Alpha in (0, 1), known Rule and Solver values, a valid Bias density, and
// Bias given when RulePlugin picks τ. Errors wrap ErrInput. (RuleOracle's
// OracleZW is checked against d by Recover.)
func (o Options) Validate() error {
	if math.IsNaN(o.Tau) || o.Tau < 0 {
		return errs.Options(ErrInput, optionValue("Tau", o.Tau), " (the threshold τ) must be > 0 (or 0 to use λ or a rule, +Inf for least squares)")
	}
	if math.IsNaN(o.Lambda) || math.IsInf(o.Lambda, 0) || o.Lambda < 0 {
		return errs.Options(ErrInput, optionValue("Lambda", o.Lambda), " (λ) must be finite and ≥ 0")
	}
	if math.IsNaN(o.SparseC) || math.IsInf(o.SparseC, 0) || o.SparseC < 0 {
		return errs.Options(ErrInput, optionValue("SparseC", o.SparseC), " (the sparsity penalty λ_c) must be finite and ≥ 0")
	}
	if math.IsNaN(o.Delta) || math.IsInf(o.Delta, 0) || o.Delta < 0 {
		return errs.Options(ErrInput, optionValue("Delta", o.Delta), " (the noise bound δ) must be finite and ≥ 0")
	}
	if o.Alpha != 0 && !(o.Alpha > 0 && o.Alpha < 1) {
		return errs.Options(ErrInput, optionValue("Alpha", o.Alpha), " (α) must be in (0, 1)")
	}
	switch o.Solver {
	case "", SolverSSN, SolverBCD, SolverFISTA:
	default:
		return errs.InvalidOption("Options", "Solver", "must be %s, %s or %s, got %q", SolverSSN, SolverBCD, SolverFISTA, o.Solver)
	}
	switch o.Rule {
	case "", RuleMAD, RuleOracle:
	case RulePlugin:
		if o.Tau == 0 && o.Lambda == 0 && o.Bias == nil {
			return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "Rule", Value: "plugin"}, " needs ", errs.Option{Struct: "Options", Field: "Bias"}, ", the bias density")
		}
	default:
		return errs.InvalidOption("Options", "Rule", "must be %s, %s or %s, got %q", RuleMAD, RulePlugin, RuleOracle, o.Rule)
	}
	if o.Bias != nil {
		if err := density.Validate(o.Bias); err != nil {
			return fmt.Errorf("%w: %w", ErrInput, err)
		}
	}
	return nil
}

// check validates o for observations of length d and fills in the defaults.
func (o *Options) check(d int) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Rule == RuleOracle && o.Tau == 0 && o.Lambda == 0 && len(o.OracleZW) != d {
		return errs.Options(ErrInput, "the oracle threshold needs ", errs.Option{Struct: "Options", Field: "OracleZW", Value: "z + w"}, fmt.Sprintf(" of length %d, got %d", d, len(o.OracleZW)))
	}
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	if o.Solver == "" {
		o.Solver = SolverSSN
	}
	if o.Rule == "" {
		o.Rule = RuleMAD
	}
	return nil
}

// threshold returns τ, the name of where it came from, and (for the MAD
// rule) the preliminary robust fit, a warm start for the final solve.
func (s *Solver) threshold(v, oracle []float64) (float64, string, []float64, error) {
	o := s.opt
	switch {
	case o.Tau > 0:
		return o.Tau, "tau", nil, nil
	case o.Lambda > 0:
		return o.Lambda * float64(s.d), "lambda", nil, nil
	}
	switch o.Rule {
	case RuleOracle:
		if len(oracle) != s.d {
			return 0, "", nil, fmt.Errorf("%w: the oracle threshold needs z + w of length %d, got %d", ErrInput, s.d, len(oracle))
		}
		return math.Max(2*vec.MaxAbs(oracle), 1e-300), string(RuleOracle), nil, nil
	case RulePlugin:
		return PluginTau(o.Bias, s.d, o.Delta, o.Alpha), string(RulePlugin), nil, nil
	}
	tau, c := s.madTau(v)
	return tau, string(RuleMAD), c, nil
}

// madTau is the MAD rule: τ = 2·√(2 log d)·σ̂, σ̂ = 1.4826·MAD of the
// residuals of an initial robust fit. A LAD start would do; a Huber fit at
// the classic 1.345·σ̂₀ (95% Gaussian efficiency), σ̂₀ from the least-
// squares residuals, is as robust to the outliers, and it reuses the Newton
// solver instead of an LP; σ̂ is then the MAD of its residuals.
func (s *Solver) madTau(v []float64) (float64, []float64) {
	c := s.ols(v)
	sigma := 1.4826 * mad(s.residual(v, c))
	if sigma > 0 {
		c, _, _ = s.huberSSN(v, 1.345*sigma, c, 20)
		sigma = 1.4826 * mad(s.residual(v, c))
	}
	tau := 2 * math.Sqrt(2*math.Log(float64(s.d))) * sigma
	// Exactly fitting data (a linear model without dense noise) has σ̂ = 0:
	// any small τ then recovers c exactly; keep it positive.
	return math.Max(tau, 1e-9*math.Max(vec.MaxAbs(v), 1)), c
}

// mad is the median absolute deviation from the median.
func mad(x []float64) float64 {
	s := append([]float64(nil), x...)
	m := medianInPlace(s)
	for i := range s {
		s[i] = math.Abs(x[i] - m)
	}
	return medianInPlace(s)
}

func medianInPlace(s []float64) float64 {
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// PluginTau is the plug-in threshold (ours, from the bound of
// [MR18, Theorem 4]) for d observations, noise
// bound δ and failure probability α: a union bound on |z_i| ≤
// max(μ, 1−μ)|g_i| + |b_i| with ‖c*‖ = 1 gives
// τ = 2(max(μ, 1−μ)·√(2 log(2d/α)) + q_{|B|}(1 − α/(2d)) + δ).
func PluginTau(p density.Density, d int, delta, alpha float64) float64 {
	mu := ScaleMoments(p).Mu
	q := density.AbsQuantile(p, 1-alpha/(2*float64(d)))
	return 2 * (math.Max(mu, 1-mu)*math.Sqrt(2*math.Log(2*float64(d)/alpha)) + q + delta)
}

// OracleTau is the smallest threshold of Theorem 4, τ = 2‖z + w‖_∞ with
// z = ReLU(Ac* + b) − μAc* (eq. (55)), computed from the truth: ac = A·c*,
// the bias b, the dense noise w (nil for none) and μ.
func OracleTau(ac, b, w []float64, mu float64) float64 {
	m := 0.0
	for i := range ac {
		z := math.Max(ac[i]+b[i], 0) - mu*ac[i]
		if w != nil {
			z += w[i]
		}
		m = math.Max(m, math.Abs(z))
	}
	return 2 * m
}

// Moments are the constants of [MR18, Theorem 4] for a bias distribution (closed
// forms of ours): μ = E[g·ReLU(g + b)] = E_b Φ(b) (the scale ĉ estimates μc* at),
// σ² = E[(ReLU(g + b) − μg)²] and η² = E[g²(ReLU(g + b) − μg)²] (eq. (58)),
// with g ~ N(0, 1) independent of b.
type Moments struct {
	Mu     float64 `json:"mu"`
	Sigma2 float64 `json:"sigma2"`
	Eta2   float64 `json:"eta2"`
}

// constMoments returns (Φ(b), E R², E g²R², E g³R) for a constant bias b,
// R = ReLU(g + b), from the truncated moments I_m = E[g^m·1{g > −b}]:
// I₀ = Φ(b), I₁ = φ(b), I_m = (−b)^{m−1}φ(b) + (m−1)I_{m−2}.
func constMoments(b float64) (phi, r2, g2r2, g3r float64) {
	pdf, cdf := hermite.NormPDF(b), hermite.NormCDF(b)
	i2 := cdf - b*pdf
	i3 := (b*b + 2) * pdf
	i4 := 3*cdf - (b*b*b+3*b)*pdf
	r2 = (1+b*b)*cdf + b*pdf
	g2r2 = i4 + 2*b*i3 + b*b*i2
	g3r = i4 + b*i3
	return cdf, r2, g2r2, g3r
}

// MomentsAt returns μ, σ², η² for the constant bias b (closed form).
// b = 0 gives (0.5, 0.25, 0.75).
func MomentsAt(b float64) Moments {
	mu, r2, g2r2, g3r := constMoments(b)
	return Moments{Mu: mu, Sigma2: r2 - mu*mu, Eta2: g2r2 - 2*mu*g3r + 3*mu*mu}
}

// ScaleMoments returns μ, σ², η² for a random bias with density p: the
// constant-bias formulas averaged over b by quadrature (density.Expect), and
// μ = Φ(m/√(1 + s²)) in closed form for a Gaussian N(m, s²).
func ScaleMoments(p density.Density) Moments {
	mu := density.Expect(p, func(b float64) float64 { return hermite.NormCDF(b) })
	if g, ok := p.(density.Gaussian); ok {
		mu = hermite.NormCDF(g.Mean / math.Sqrt(1+g.Std*g.Std))
	}
	r2 := density.Expect(p, func(b float64) float64 { _, v, _, _ := constMoments(b); return v })
	g2r2 := density.Expect(p, func(b float64) float64 { _, _, v, _ := constMoments(b); return v })
	g3r := density.Expect(p, func(b float64) float64 { _, _, _, v := constMoments(b); return v })
	return Moments{Mu: mu, Sigma2: r2 - mu*mu, Eta2: g2r2 - 2*mu*g3r + 3*mu*mu}
}

// CodeNorm returns the r > 0 with r·E_b Φ(b/r) = norm: for a code of
// unknown length, E[g·ReLU(r·g + b)] = r·E_bΦ(b/r) is the length ĉ tends to,
// and it increases strictly with r, so ĉ·r/‖ĉ‖ estimates c*. It
// returns NaN for norm ≤ 0 or when no such r exists below 1e12.
func CodeNorm(p density.Density, norm float64) float64 {
	if !(norm > 0) {
		return math.NaN()
	}
	f := func(r float64) float64 {
		return r * density.Expect(p, func(b float64) float64 { return hermite.NormCDF(b / r) })
	}
	lo, hi := 0.0, 1.0
	for f(hi) < norm {
		lo = hi
		hi *= 2
		if hi > 1e12 {
			return math.NaN()
		}
	}
	for i := 0; i < 100 && hi-lo > 1e-12*hi; i++ {
		mid := (lo + hi) / 2
		if f(mid) < norm {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
