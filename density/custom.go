package density

import (
	"fmt"
	"math"
)

// Custom is a user density given by its log-pdf, score and CDF. Build it
// with NewCustom, which checks that it is a density. Quantile is found by
// bisection on the CDF, LogCDF is log CDF (no special tail care), and the
// Theorem 3 quantities use the numeric fallbacks.
type Custom struct {
	label         string
	logPDF, score func(float64) float64
	cdf           func(float64) float64
	mode          float64
	lo, hi        float64
}

// NewCustom returns the density with the given log p, score (log p)′ and CDF,
// supported on [lo, hi] (ends may be ±Inf) with mode in it. It returns an
// error wrapping ErrInvalid unless, numerically: the CDF is non-decreasing
// from 0 to 1, p ≥ 0 integrates to 1 within 1e-4, the CDF matches the
// integral of p within 1e-4, and the score matches the derivative of log p
// within 1e-3 (relative). A function that fails these is not the density the
// caller thinks it is, and the likelihood built on it would be wrong.
func NewCustom(label string, logPDF, score, cdf func(float64) float64, mode, lo, hi float64) (*Custom, error) {
	if logPDF == nil || score == nil || cdf == nil {
		return nil, fmt.Errorf("%w: custom density %q needs log-pdf, score and CDF functions", ErrInvalid, label)
	}
	if math.IsNaN(lo) || math.IsNaN(hi) || !(hi > lo) || math.IsNaN(mode) || mode < lo || mode > hi {
		return nil, fmt.Errorf("%w: custom density %q: support [%g, %g] with mode %g", ErrInvalid, label, lo, hi, mode)
	}
	c := &Custom{label: label, logPDF: logPDF, score: score, cdf: cdf, mode: mode, lo: lo, hi: hi}
	if err := checkNumerically(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Name returns the label.
func (c *Custom) Name() string { return "custom(" + c.label + ")" }

// LogPDF is the user's log p, −Inf outside the support.
func (c *Custom) LogPDF(x float64) float64 {
	if x < c.lo || x > c.hi {
		return math.Inf(-1)
	}
	return c.logPDF(x)
}

// Score is the user's score.
func (c *Custom) Score(x float64) float64 { return c.score(x) }

// CDF is the user's CDF.
func (c *Custom) CDF(x float64) float64 { return c.cdf(x) }

// LogCDF is log CDF.
func (c *Custom) LogCDF(x float64) float64 { return math.Log(c.cdf(x)) }

// RevHazard is exp(log p − log F).
func (c *Custom) RevHazard(x float64) float64 {
	lf := c.LogCDF(x)
	if math.IsInf(lf, -1) {
		return math.Inf(1)
	}
	return math.Exp(c.LogPDF(x) - lf)
}

// Quantile is found by bisection on the CDF.
func (c *Custom) Quantile(u float64) float64 { return quantileByBisection(c, u) }

// Mode is the given mode.
func (c *Custom) Mode() float64 { return c.mode }

// Support is the given support.
func (c *Custom) Support() (float64, float64) { return c.lo, c.hi }

// quantileByBisection solves F(x) = u, expanding a bracket around the mode
// on infinite supports.
func quantileByBisection(p Density, u float64) float64 {
	lo, hi := p.Support()
	m := p.Mode()
	if math.IsInf(lo, -1) {
		step := 1.0
		lo = m - step
		for i := 0; i < 200 && p.CDF(lo) > u; i++ {
			step *= 2
			lo = m - step
		}
	}
	if math.IsInf(hi, 1) {
		step := 1.0
		hi = m + step
		for i := 0; i < 200 && p.CDF(hi) < u; i++ {
			step *= 2
			hi = m + step
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-14*math.Max(1, math.Abs(lo)+math.Abs(hi)); i++ {
		mid := lo + (hi-lo)/2
		if p.CDF(mid) < u {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}

// checkNumerically runs the checks NewCustom documents on any density.
func checkNumerically(p Density) error {
	name := p.Name()
	a, b := effectiveRange(p, 1e-10)
	if !(b > a) || !finite(a, b) {
		return fmt.Errorf("%w: %s: could not find where its CDF rises from 0 to 1", ErrInvalid, name)
	}
	// Monotone CDF in [0, 1].
	prev := math.Inf(-1)
	for i := 0; i <= 400; i++ {
		x := a + (b-a)*float64(i)/400
		f := p.CDF(x)
		if math.IsNaN(f) || f < -1e-12 || f > 1+1e-12 {
			return fmt.Errorf("%w: %s: CDF(%g) = %g is not in [0, 1]", ErrInvalid, name, x, f)
		}
		if f < prev-1e-12 {
			return fmt.Errorf("%w: %s: CDF decreases at %g", ErrInvalid, name, x)
		}
		prev = f
		if lp := p.LogPDF(x); math.IsNaN(lp) || math.IsInf(lp, 1) {
			return fmt.Errorf("%w: %s: log p(%g) = %g", ErrInvalid, name, x, lp)
		}
	}
	pdf := func(x float64) float64 { return math.Exp(p.LogPDF(x)) }
	total := integrate(pdf, a, b, p.Mode(), 400)
	if math.Abs(total-1) > 1e-4 {
		return fmt.Errorf("%w: %s: the pdf integrates to %.6g, not 1", ErrInvalid, name, total)
	}
	for _, q := range []float64{0.1, 0.3, 0.5, 0.7, 0.9} {
		x := quantileByBisection(p, q)
		want := integrate(pdf, a, x, p.Mode(), 200) + p.CDF(a)
		if math.Abs(p.CDF(x)-want) > 1e-4 {
			return fmt.Errorf("%w: %s: CDF(%g) = %.6g but the pdf integrates to %.6g there", ErrInvalid, name, x, p.CDF(x), want)
		}
		if lp := p.LogPDF(x); !math.IsInf(lp, -1) {
			// One-sided differences, so that a kink (Laplace) passes.
			h := 1e-6 * math.Max(1, math.Abs(x))
			fwd := (p.LogPDF(x+h) - lp) / h
			bwd := (lp - p.LogPDF(x-h)) / h
			s := p.Score(x)
			near := func(v float64) bool { return finite(v) && math.Abs(s-v) <= 1e-3*math.Max(1, math.Abs(v)) }
			if finite(fwd) && finite(bwd) && !near(fwd) && !near(bwd) {
				return fmt.Errorf("%w: %s: score(%g) = %.6g but d/dx log p = %.6g", ErrInvalid, name, x, s, (fwd+bwd)/2)
			}
		}
	}
	return nil
}

// effectiveRange returns [a, b] inside the support with F(a) ≤ tail and
// F(b) ≥ 1 − tail (the support's ends where they are finite).
func effectiveRange(p Density, tail float64) (a, b float64) {
	lo, hi := p.Support()
	a, b = lo, hi
	if math.IsInf(lo, -1) {
		a = quantileByBisection(p, tail)
	}
	if math.IsInf(hi, 1) {
		b = quantileByBisection(p, 1-tail)
	}
	return a, b
}
