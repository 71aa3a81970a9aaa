package hermite

import "math"

// NormPDF is the standard normal density φ(x).
func NormPDF(x float64) float64 { return InvSqrt2Pi * math.Exp(-x*x/2) }

// LogNormPDF is log φ(x), exact for any finite x.
func LogNormPDF(x float64) float64 { return -x*x/2 - 0.5*math.Log(2*math.Pi) }

// NormCDF is the standard normal distribution function Φ(x). It uses erfc so
// that the lower tail keeps full relative accuracy (Φ(−30) ≈ 4.9e-198).
func NormCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// LogNormCDF is log Φ(x), accurate far into the lower tail where Φ underflows:
// for x < −20 it uses the asymptotic series of the Mills ratio,
// log Φ(x) = log φ(x) − log(−x) + log(1 − 1/x² + 3/x⁴ − 15/x⁶ + 105/x⁸).
func LogNormCDF(x float64) float64 {
	if x > -20 {
		if x > 5 {
			return math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
		}
		return math.Log(NormCDF(x))
	}
	z := 1 / (x * x)
	series := 1 - z*(1-z*(3-z*(15-z*105)))
	return LogNormPDF(x) - math.Log(-x) + math.Log(series)
}

// NormHazard is the inverse Mills ratio φ(x)/(1 − Φ(x)) = φ(x)/Φ(−x), the
// Gaussian hazard, computed without cancellation for large x (where it tends
// to x) and without underflow for very negative x (where it tends to 0).
func NormHazard(x float64) float64 {
	if x < 20 {
		return math.Exp(LogNormPDF(x) - LogNormCDF(-x))
	}
	// φ(x)/Φ(−x) = x / (1 − 1/x² + 3/x⁴ − 15/x⁶ + 105/x⁸ …) for large x.
	z := 1 / (x * x)
	return x / (1 - z*(1-z*(3-z*(15-z*105))))
}
