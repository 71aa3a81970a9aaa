package density

import (
	"math"

	"github.com/relurec/relurec/internal/quad"
)

// Beta returns the flatness β_γ(p) = inf_{|x|≤γ} p′(x)²/(4p(x)) of
// Mazumdar–Rawat (000 eq. (7), 003 eq. (10); the printed β_Y is β_γ, an erratum
// item 2): in closed form when p implements ClosedForms, else numerically
// (BetaNumeric). It is 0 whenever p has a stationary point in [−γ, γ].
func Beta(p Density, gamma float64) float64 {
	if c, ok := p.(ClosedForms); ok {
		if v, ok := c.BetaClosed(gamma); ok {
			return v
		}
	}
	return BetaNumeric(p, gamma)
}

// Lip returns L_γ(p) = max{sup_{|x|≤γ} p(x)/F(x), sup_{|x|≤γ} |p′(x)|/p(x)}
// (000 eq. (8) with the absolute log-derivative the proof needs),
// in closed form when available, else numerically (LipNumeric).
func Lip(p Density, gamma float64) float64 {
	if c, ok := p.(ClosedForms); ok {
		if v, ok := c.LipClosed(gamma); ok {
			return v
		}
	}
	return LipNumeric(p, gamma)
}

// Omega returns ω_{p,γ,ν}, the least mass P(B ∈ I) over intervals I ⊂ [−γ, γ]
// of length ν (the paper's lower bound on F(x, y) for x − y > ν), in closed
// form when available, else numerically (OmegaNumeric). It is NaN unless
// 0 < ν ≤ 2γ.
func Omega(p Density, gamma, nu float64) float64 {
	if !(nu > 0 && nu <= 2*gamma) {
		return math.NaN()
	}
	if c, ok := p.(ClosedForms); ok {
		if v, ok := c.OmegaClosed(gamma, nu); ok {
			return v
		}
	}
	return OmegaNumeric(p, gamma, nu)
}

// BetaNumeric is β_γ(p) from a 4001-point grid over [−γ, γ] polished by a
// golden-section search around the best grid point (a fallback).
func BetaNumeric(p Density, gamma float64) float64 {
	f := func(x float64) float64 {
		lp := p.LogPDF(x)
		if math.IsInf(lp, -1) {
			return 0
		}
		s := p.Score(x)
		return math.Exp(lp) * s * s / 4
	}
	return gridMin(f, -gamma, gamma)
}

// LipNumeric is L_γ(p) from grid maxima of the reverse hazard and |score|
// over [−γ, γ], polished by golden-section search.
func LipNumeric(p Density, gamma float64) float64 {
	rh := gridMin(func(x float64) float64 { return -p.RevHazard(x) }, -gamma, gamma)
	sc := gridMin(func(x float64) float64 {
		if math.IsInf(p.LogPDF(x), -1) {
			return math.Inf(-1)
		}
		return -math.Abs(p.Score(x))
	}, -gamma, gamma)
	return math.Max(-rh, -sc)
}

// OmegaNumeric is min over a ∈ [−γ, γ − ν] of F(a + ν) − F(a), by grid and
// golden-section search. NaN unless 0 < ν ≤ 2γ.
func OmegaNumeric(p Density, gamma, nu float64) float64 {
	if !(nu > 0 && nu <= 2*gamma) {
		return math.NaN()
	}
	return gridMin(func(a float64) float64 { return p.CDF(a+nu) - p.CDF(a) }, -gamma, gamma-nu)
}

// gridMin minimises f on [a, b]: the best of 4001 grid points, then a
// golden-section search on the bracket of its neighbours.
func gridMin(f func(float64) float64, a, b float64) float64 {
	const n = 4000
	if b <= a {
		return f(a)
	}
	h := (b - a) / n
	best, bi := math.Inf(1), 0
	for i := 0; i <= n; i++ {
		if v := f(a + float64(i)*h); v < best {
			best, bi = v, i
		}
	}
	lo := a + float64(max(bi-1, 0))*h
	hi := a + float64(min(bi+1, n))*h
	const g = 0.6180339887498949
	x1, x2 := hi-g*(hi-lo), lo+g*(hi-lo)
	f1, f2 := f(x1), f(x2)
	for i := 0; i < 100 && hi-lo > 1e-15*math.Max(1, math.Abs(lo)); i++ {
		if f1 < f2 {
			hi, x2, f2 = x2, x1, f1
			x1 = hi - g*(hi-lo)
			f1 = f(x1)
		} else {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + g*(hi-lo)
			f2 = f(x2)
		}
	}
	return math.Min(best, math.Min(f1, f2))
}

// DefaultC0 is the constant of Theorem 3 obtained by following its proof
// literally, with the printed "C₀ ≥ 4/e" corrected to 4e and the factor 2 of
// (39): C₀ = 8e ≈ 21.7 (the proof's "C₀ ≥ 4/e" should read 4e).
const DefaultC0 = 8 * math.E

// Theorem3Bound returns the right side of Theorem 3 (000 eq. (35), 003
// eq. (12)), C₀·L_γ(p)·γ·d/(β_γ(p)·ω_{p,γ,ν}), a high-probability bound on
// ‖M − M̂‖_F² for the maximum-likelihood estimate. c0 ≤ 0 means DefaultC0.
// It is +Inf (the theorem says nothing) when β_γ = 0 or ω = 0, and NaN for
// a ν outside (0, 2γ]. Because of the gauge freedom M → M − Aw1ᵀ the bound is only meaningful for the row-centred error.
func Theorem3Bound(p Density, gamma, nu float64, d int, c0 float64) float64 {
	if c0 <= 0 {
		c0 = DefaultC0
	}
	beta, lip, omega := Beta(p, gamma), Lip(p, gamma), Omega(p, gamma, nu)
	if math.IsNaN(omega) {
		return math.NaN()
	}
	if beta <= 0 || omega <= 0 {
		return math.Inf(1)
	}
	return c0 * lip * gamma * float64(d) / (beta * omega)
}

// AbsQuantile returns the u-quantile of |B|: the t ≥ 0 with
// F(t) − F(−t) = u, by bisection. Used by robust's plug-in threshold.
func AbsQuantile(p Density, u float64) float64 {
	g := func(t float64) float64 { return p.CDF(t) - p.CDF(-t) }
	hi := 1.0
	for i := 0; i < 200 && g(hi) < u; i++ {
		hi *= 2
	}
	lo := 0.0
	for i := 0; i < 200 && hi-lo > 1e-13*math.Max(1, hi); i++ {
		mid := (lo + hi) / 2
		if g(mid) < u {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Expect returns E[f(B)] = ∫ f(x)p(x)dx by composite Gauss–Legendre
// quadrature over the range holding all but 1e-14 of the mass, split at the
// mode (where a Laplace density has its kink) and at the support's ends.
// It is accurate to ~1e-10 for smooth f of polynomial growth.
func Expect(p Density, f func(float64) float64) float64 {
	a, b := effectiveRange(p, 1e-15)
	pdf := func(x float64) float64 {
		lp := p.LogPDF(x)
		if math.IsInf(lp, -1) {
			return 0
		}
		return f(x) * math.Exp(lp)
	}
	return integrate(pdf, a, b, p.Mode(), 200)
}

// integrate is ∫_a^b f with panels composite 8-point Gauss–Legendre panels
// on each side of split (when split is inside (a, b)).
func integrate(f func(float64) float64, a, b, split float64, panels int) float64 {
	if split > a && split < b {
		return quad.GaussLegendre(f, a, split, panels) + quad.GaussLegendre(f, split, b, panels)
	}
	return quad.GaussLegendre(f, a, b, panels)
}
