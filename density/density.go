package density

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/hermite"
)

// ErrInvalid marks a density with bad parameters (a non-positive scale, an
// empty support, NaN) or a user density that is not a density (negative,
// not integrating to 1, a CDF that is not the integral of the pdf).
var ErrInvalid = errs.New("invalid bias density", errs.ErrInput)

// Density is a univariate probability density p with CDF F. Every method
// must be safe for concurrent use (the built-in types are plain values).
type Density interface {
	// Name is a short description with the parameters, e.g. "gaussian(0,1)".
	Name() string
	// LogPDF is log p(x); −Inf outside the support.
	LogPDF(x float64) float64
	// Score is (log p)′(x) = p′(x)/p(x) inside the support.
	Score(x float64) float64
	// CDF is F(x) = P(B ≤ x).
	CDF(x float64) float64
	// LogCDF is log F(x), accurate where F underflows.
	LogCDF(x float64) float64
	// RevHazard is the reverse hazard p(x)/F(x) (0 where p = 0, +Inf below
	// the support's lower end is never asked for).
	RevHazard(x float64) float64
	// Quantile is F⁻¹(u) for u in (0, 1).
	Quantile(u float64) float64
	// Mode is a maximiser of p.
	Mode() float64
	// Support is the closure of {p > 0}; ends may be infinite.
	Support() (lo, hi float64)
}

// ClosedForms is implemented by densities that know the Theorem 3
// quantities in closed form. The methods return ok = false where their
// formula does not apply (then the numeric fallback is used).
type ClosedForms interface {
	BetaClosed(gamma float64) (float64, bool)
	LipClosed(gamma float64) (float64, bool)
	OmegaClosed(gamma, nu float64) (float64, bool)
}

// checker is implemented by the built-in densities to validate parameters.
type checker interface{ check() error }

// Validate returns an error wrapping ErrInvalid when p has bad parameters
// or, for a density without a parameter check of its own (a user type), when
// it fails the numeric checks of NewCustom.
func Validate(p Density) error {
	if p == nil {
		return fmt.Errorf("%w: nil density", ErrInvalid)
	}
	if c, ok := p.(checker); ok {
		return c.check()
	}
	return checkNumerically(p)
}

// Sample draws one value from p by inverse CDF with a uniform u in (0, 1)
// taken from one rng.Uint64 call.
func Sample(p Density, rng *rand.Rand) float64 {
	return p.Quantile(openUniform(rng))
}

// openUniform returns a uniform number in the open interval (0, 1).
func openUniform(rng *rand.Rand) float64 {
	return (float64(rng.Uint64()>>11) + 0.5) / (1 << 53)
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func fmtG(x float64) string { return fmt.Sprintf("%g", x) }

// ---------------------------------------------------------------- Gaussian

// Gaussian is N(Mean, Std²).
type Gaussian struct{ Mean, Std float64 }

func (g Gaussian) check() error {
	if !finite(g.Mean, g.Std) || g.Std <= 0 {
		return fmt.Errorf("%w: gaussian needs a finite mean and a standard deviation > 0, got (%g, %g)", ErrInvalid, g.Mean, g.Std)
	}
	return nil
}

func (g Gaussian) z(x float64) float64 { return (x - g.Mean) / g.Std }

// Name returns "gaussian(mean,std)".
func (g Gaussian) Name() string { return "gaussian(" + fmtG(g.Mean) + "," + fmtG(g.Std) + ")" }

// LogPDF is −z²/2 − log(s√(2π)).
func (g Gaussian) LogPDF(x float64) float64 { return hermite.LogNormPDF(g.z(x)) - math.Log(g.Std) }

// Score is −(x − m)/s².
func (g Gaussian) Score(x float64) float64 { return -(x - g.Mean) / (g.Std * g.Std) }

// CDF is Φ(z).
func (g Gaussian) CDF(x float64) float64 { return hermite.NormCDF(g.z(x)) }

// LogCDF is log Φ(z), stable in the lower tail.
func (g Gaussian) LogCDF(x float64) float64 { return hermite.LogNormCDF(g.z(x)) }

// RevHazard is φ(z)/(s·Φ(z)), which tends to −z/s in the lower tail.
func (g Gaussian) RevHazard(x float64) float64 { return hermite.NormHazard(-g.z(x)) / g.Std }

// Quantile is m + s·√2·erfinv(2u − 1).
func (g Gaussian) Quantile(u float64) float64 {
	return g.Mean + g.Std*normQuantile(u)
}

// Mode is the mean.
func (g Gaussian) Mode() float64 { return g.Mean }

// Support is the real line.
func (g Gaussian) Support() (float64, float64) { return math.Inf(-1), math.Inf(1) }

// BetaClosed is 0 when |m| ≤ γ (the mode, a stationary point, lies in
// [−γ, γ]); otherwise min over x = ±γ of z²φ(z)/(4s³), since z²φ(z) is
// unimodal in |z|.
func (g Gaussian) BetaClosed(gamma float64) (float64, bool) {
	if math.Abs(g.Mean) <= gamma {
		return 0, true
	}
	f := func(x float64) float64 {
		z := g.z(x)
		return z * z * hermite.NormPDF(z) / (4 * g.Std * g.Std * g.Std)
	}
	return math.Min(f(-gamma), f(gamma)), true
}

// LipClosed is max(φ(z₋)/(sΦ(z₋)), (γ + |m|)/s²) with z₋ = (−γ − m)/s: the
// reverse hazard decreases, |score| is largest at the end farthest from m.
func (g Gaussian) LipClosed(gamma float64) (float64, bool) {
	return math.Max(g.RevHazard(-gamma), (gamma+math.Abs(g.Mean))/(g.Std*g.Std)), true
}

// OmegaClosed is the unimodal end formula.
func (g Gaussian) OmegaClosed(gamma, nu float64) (float64, bool) {
	return omegaEnds(g, gamma, nu), true
}

// normQuantile is Φ⁻¹(u) for u in (0, 1), via erfinv (with erfcinv in the
// lower tail so that tiny u keeps its relative accuracy).
func normQuantile(u float64) float64 {
	if u < 0.5 {
		return -math.Sqrt2 * math.Erfcinv(2*u)
	}
	return math.Sqrt2 * math.Erfinv(2*u-1)
}

// omegaEnds is min(F(−γ+ν) − F(−γ), F(γ) − F(γ−ν)): for a unimodal density
// the least mass over intervals of length ν inside [−γ, γ] sits at an end.
func omegaEnds(p Density, gamma, nu float64) float64 {
	return math.Min(p.CDF(-gamma+nu)-p.CDF(-gamma), p.CDF(gamma)-p.CDF(gamma-nu))
}

// ---------------------------------------------------------------- Logistic

// Logistic has CDF σ((x − Loc)/Scale), σ(z) = 1/(1 + e^{−z}).
type Logistic struct{ Loc, Scale float64 }

func (l Logistic) check() error {
	if !finite(l.Loc, l.Scale) || l.Scale <= 0 {
		return fmt.Errorf("%w: logistic needs a finite location and a scale > 0, got (%g, %g)", ErrInvalid, l.Loc, l.Scale)
	}
	return nil
}

func (l Logistic) z(x float64) float64 { return (x - l.Loc) / l.Scale }

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// Name returns "logistic(loc,scale)".
func (l Logistic) Name() string { return "logistic(" + fmtG(l.Loc) + "," + fmtG(l.Scale) + ")" }

// LogPDF is −|z| − 2·log1p(e^{−|z|}) − log s (symmetric, no overflow).
func (l Logistic) LogPDF(x float64) float64 {
	a := math.Abs(l.z(x))
	return -a - 2*math.Log1p(math.Exp(-a)) - math.Log(l.Scale)
}

// Score is −tanh(z/2)/s.
func (l Logistic) Score(x float64) float64 { return -math.Tanh(l.z(x)/2) / l.Scale }

// CDF is σ(z).
func (l Logistic) CDF(x float64) float64 { return sigmoid(l.z(x)) }

// LogCDF is −log1p(e^{−z}), branching on the sign of z.
func (l Logistic) LogCDF(x float64) float64 {
	z := l.z(x)
	if z >= 0 {
		return -math.Log1p(math.Exp(-z))
	}
	return z - math.Log1p(math.Exp(z))
}

// RevHazard is σ(−z)/s.
func (l Logistic) RevHazard(x float64) float64 { return sigmoid(-l.z(x)) / l.Scale }

// Quantile is m + s·log(u/(1 − u)).
func (l Logistic) Quantile(u float64) float64 { return l.Loc + l.Scale*(math.Log(u)-math.Log1p(-u)) }

// Mode is the location.
func (l Logistic) Mode() float64 { return l.Loc }

// Support is the real line.
func (l Logistic) Support() (float64, float64) { return math.Inf(-1), math.Inf(1) }

// BetaClosed is 0 when |m| ≤ γ, else min over x = ±γ of
// σ(1−σ)(1−2σ)²/(4s³).
func (l Logistic) BetaClosed(gamma float64) (float64, bool) {
	if math.Abs(l.Loc) <= gamma {
		return 0, true
	}
	f := func(x float64) float64 {
		s := sigmoid(l.z(x))
		return s * (1 - s) * (1 - 2*s) * (1 - 2*s) / (4 * l.Scale * l.Scale * l.Scale)
	}
	return math.Min(f(-gamma), f(gamma)), true
}

// LipClosed is max(σ(−z₋)/s, max over x = ±γ of |tanh(z/2)|/s).
func (l Logistic) LipClosed(gamma float64) (float64, bool) {
	t := math.Max(math.Abs(l.Score(-gamma)), math.Abs(l.Score(gamma)))
	return math.Max(l.RevHazard(-gamma), t), true
}

// OmegaClosed is the unimodal end formula.
func (l Logistic) OmegaClosed(gamma, nu float64) (float64, bool) {
	return omegaEnds(l, gamma, nu), true
}

// ---------------------------------------------------------------- Laplace

// Laplace has density e^{−|x − Loc|/Scale}/(2·Scale).
type Laplace struct{ Loc, Scale float64 }

func (l Laplace) check() error {
	if !finite(l.Loc, l.Scale) || l.Scale <= 0 {
		return fmt.Errorf("%w: laplace needs a finite location and a scale > 0, got (%g, %g)", ErrInvalid, l.Loc, l.Scale)
	}
	return nil
}

func (l Laplace) z(x float64) float64 { return (x - l.Loc) / l.Scale }

// Name returns "laplace(loc,scale)".
func (l Laplace) Name() string { return "laplace(" + fmtG(l.Loc) + "," + fmtG(l.Scale) + ")" }

// LogPDF is −|z| − log 2s.
func (l Laplace) LogPDF(x float64) float64 { return -math.Abs(l.z(x)) - math.Log(2*l.Scale) }

// Score is −sign(z)/s; at the mode, where p is not differentiable, it is
// the right derivative −1/s (so |p′|/p = 1/s everywhere, as the closed form
// of β_γ assumes).
func (l Laplace) Score(x float64) float64 {
	if l.z(x) < 0 {
		return 1 / l.Scale
	}
	return -1 / l.Scale
}

// CDF is ½e^z below the location and 1 − ½e^{−z} above.
func (l Laplace) CDF(x float64) float64 {
	z := l.z(x)
	if z < 0 {
		return 0.5 * math.Exp(z)
	}
	return 1 - 0.5*math.Exp(-z)
}

// LogCDF is z − log 2 below the location.
func (l Laplace) LogCDF(x float64) float64 {
	z := l.z(x)
	if z < 0 {
		return z - math.Ln2
	}
	return math.Log1p(-0.5 * math.Exp(-z))
}

// RevHazard is 1/s below the location and decreasing above it.
func (l Laplace) RevHazard(x float64) float64 {
	z := l.z(x)
	if z < 0 {
		return 1 / l.Scale
	}
	e := math.Exp(-z)
	return e / (l.Scale * (2 - e))
}

// Quantile inverts the CDF.
func (l Laplace) Quantile(u float64) float64 {
	if u < 0.5 {
		return l.Loc + l.Scale*math.Log(2*u)
	}
	return l.Loc - l.Scale*math.Log(2*(1-u))
}

// Mode is the location.
func (l Laplace) Mode() float64 { return l.Loc }

// Support is the real line.
func (l Laplace) Support() (float64, float64) { return math.Inf(-1), math.Inf(1) }

// BetaClosed is e^{−(γ+|m|)/s}/(8s³) > 0 (p′²/(4p) = p/(4s²), smallest at
// the end of [−γ, γ] farthest from m).
func (l Laplace) BetaClosed(gamma float64) (float64, bool) {
	return math.Exp(-(gamma+math.Abs(l.Loc))/l.Scale) / (8 * l.Scale * l.Scale * l.Scale), true
}

// LipClosed is 1/s: |score| = 1/s and the reverse hazard is at most 1/s.
func (l Laplace) LipClosed(gamma float64) (float64, bool) { return 1 / l.Scale, true }

// OmegaClosed is the unimodal end formula.
func (l Laplace) OmegaClosed(gamma, nu float64) (float64, bool) { return omegaEnds(l, gamma, nu), true }

// ---------------------------------------------------------------- ShiftedExp

// ShiftedExp is Shift + Exp(Rate): density Rate·e^{−Rate(x − Shift)} for
// x ≥ Shift. The paper's Theorem 3 needs Shift < −γ (a positive density on
// [−γ, γ]).
type ShiftedExp struct{ Shift, Rate float64 }

func (e ShiftedExp) check() error {
	if !finite(e.Shift, e.Rate) || e.Rate <= 0 {
		return fmt.Errorf("%w: exp needs a finite shift and a rate > 0, got (%g, %g)", ErrInvalid, e.Shift, e.Rate)
	}
	return nil
}

// Name returns "exp(shift,rate)".
func (e ShiftedExp) Name() string { return "exp(" + fmtG(e.Shift) + "," + fmtG(e.Rate) + ")" }

// LogPDF is log λ − λ(x − m) on [m, ∞).
func (e ShiftedExp) LogPDF(x float64) float64 {
	if x < e.Shift {
		return math.Inf(-1)
	}
	return math.Log(e.Rate) - e.Rate*(x-e.Shift)
}

// Score is −λ.
func (e ShiftedExp) Score(x float64) float64 { return -e.Rate }

// CDF is 1 − e^{−λ(x − m)}.
func (e ShiftedExp) CDF(x float64) float64 {
	if x <= e.Shift {
		return 0
	}
	return -math.Expm1(-e.Rate * (x - e.Shift))
}

// LogCDF is log(1 − e^{−λ(x − m)}).
func (e ShiftedExp) LogCDF(x float64) float64 {
	if x <= e.Shift {
		return math.Inf(-1)
	}
	return math.Log(-math.Expm1(-e.Rate * (x - e.Shift)))
}

// RevHazard is λ/(e^{λ(x − m)} − 1).
func (e ShiftedExp) RevHazard(x float64) float64 {
	if x <= e.Shift {
		return math.Inf(1)
	}
	return e.Rate / math.Expm1(e.Rate*(x-e.Shift))
}

// Quantile is m − log(1 − u)/λ.
func (e ShiftedExp) Quantile(u float64) float64 { return e.Shift - math.Log1p(-u)/e.Rate }

// Mode is the shift.
func (e ShiftedExp) Mode() float64 { return e.Shift }

// Support is [shift, ∞).
func (e ShiftedExp) Support() (float64, float64) { return e.Shift, math.Inf(1) }

// BetaClosed is λ³e^{−λ(γ−m)}/4 when m < −γ.
func (e ShiftedExp) BetaClosed(gamma float64) (float64, bool) {
	if e.Shift >= -gamma {
		return 0, true // p vanishes on part of [−γ, γ]
	}
	return e.Rate * e.Rate * e.Rate * math.Exp(-e.Rate*(gamma-e.Shift)) / 4, true
}

// LipClosed is max(λ, λ/(e^{λ(−γ−m)} − 1)) when m < −γ, +Inf otherwise.
func (e ShiftedExp) LipClosed(gamma float64) (float64, bool) {
	if e.Shift >= -gamma {
		return math.Inf(1), true
	}
	return math.Max(e.Rate, e.RevHazard(-gamma)), true
}

// OmegaClosed is e^{−λ(γ−ν−m)}(1 − e^{−λν}) (the decreasing density puts
// the least mass at the right end) when m ≤ −γ.
func (e ShiftedExp) OmegaClosed(gamma, nu float64) (float64, bool) {
	if e.Shift > -gamma {
		return 0, false
	}
	return math.Exp(-e.Rate*(gamma-nu-e.Shift)) * (-math.Expm1(-e.Rate * nu)), true
}

// ---------------------------------------------------------------- Uniform

// Uniform is U[Lo, Hi].
type Uniform struct{ Lo, Hi float64 }

func (u Uniform) check() error {
	if !finite(u.Lo, u.Hi) || !(u.Hi > u.Lo) {
		return fmt.Errorf("%w: uniform needs finite ends lo < hi, got (%g, %g)", ErrInvalid, u.Lo, u.Hi)
	}
	return nil
}

// Name returns "uniform(lo,hi)".
func (u Uniform) Name() string { return "uniform(" + fmtG(u.Lo) + "," + fmtG(u.Hi) + ")" }

// LogPDF is −log(hi − lo) on the support, −Inf outside.
func (u Uniform) LogPDF(x float64) float64 {
	if x < u.Lo || x > u.Hi {
		return math.Inf(-1)
	}
	return -math.Log(u.Hi - u.Lo)
}

// Score is 0.
func (u Uniform) Score(x float64) float64 { return 0 }

// CDF is (x − lo)/(hi − lo) clamped to [0, 1].
func (u Uniform) CDF(x float64) float64 {
	return math.Min(1, math.Max(0, (x-u.Lo)/(u.Hi-u.Lo)))
}

// LogCDF is log CDF.
func (u Uniform) LogCDF(x float64) float64 { return math.Log(u.CDF(x)) }

// RevHazard is 1/(x − lo) on the support.
func (u Uniform) RevHazard(x float64) float64 {
	switch {
	case x > u.Hi:
		return 0
	case x <= u.Lo:
		return math.Inf(1)
	}
	return 1 / (x - u.Lo)
}

// Quantile is lo + u·(hi − lo).
func (u Uniform) Quantile(p float64) float64 { return u.Lo + p*(u.Hi-u.Lo) }

// Mode is the midpoint (every point of the support is a mode).
func (u Uniform) Mode() float64 { return (u.Lo + u.Hi) / 2 }

// Support is [lo, hi].
func (u Uniform) Support() (float64, float64) { return u.Lo, u.Hi }

// BetaClosed is 0 (p′ = 0).
func (u Uniform) BetaClosed(gamma float64) (float64, bool) { return 0, true }

// LipClosed is 1/(−γ − lo) when [−γ, γ] ⊂ (lo, hi).
func (u Uniform) LipClosed(gamma float64) (float64, bool) {
	if !(u.Lo < -gamma && u.Hi > gamma) {
		return math.Inf(1), true
	}
	return 1 / (-gamma - u.Lo), true
}

// OmegaClosed is ν/(hi − lo) when [−γ, γ] ⊂ [lo, hi].
func (u Uniform) OmegaClosed(gamma, nu float64) (float64, bool) {
	if !(u.Lo <= -gamma && u.Hi >= gamma) {
		return 0, false
	}
	return nu / (u.Hi - u.Lo), true
}
