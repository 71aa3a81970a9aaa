package hermite

import "math"

// BivariateNormalCDF returns Φ₂(h, k; ρ) = P(X ≤ h, Y ≤ k) for standard
// normal X, Y with correlation ρ ∈ [−1, 1], to about 1e-15 absolute.
//
// It is Genz's BVNU algorithm (A. Genz, "Numerical computation of
// rectangular bivariate and trivariate normal and t probabilities",
// Statistics and Computing 14, 2004, after Drezner and Wesolowsky 1990):
// for |ρ| < 0.925 a 6-, 12- or 20-point Gauss–Legendre rule on Plackett's
// integral over asin ρ; for |ρ| ≥ 0.925 an asymptotic expansion in √(1−ρ²)
// plus a Gauss–Legendre correction, which stays accurate as ρ → ±1. gonum has
// no bivariate normal CDF; the closed-form L2 distance between depth-2
// networks (metrics.L2Depth2, not in [ATV21]) needs it. ρ outside [−1, 1] is clamped; NaN in
// gives NaN.
func BivariateNormalCDF(h, k, rho float64) float64 {
	if math.IsNaN(h) || math.IsNaN(k) || math.IsNaN(rho) {
		return math.NaN()
	}
	rho = math.Max(-1, math.Min(1, rho))
	// P(X ≤ h, Y ≤ k) = P(−X ≥ −h, −Y ≥ −k), and (−X, −Y) has the same law.
	return bvnu(-h, -k, rho)
}

// Gauss–Legendre half-rules (nodes in (0, 1) and weights) of Genz's code for
// 6, 12 and 20 points.
var (
	bvnW = [3][]float64{
		{0.1713244923791705, 0.3607615730481384, 0.4679139345726904},
		{0.04717533638651177, 0.1069393259953183, 0.1600783285433464,
			0.2031674267230659, 0.2334925365383547, 0.2491470458134029},
		{0.01761400713915212, 0.04060142980038694, 0.06267204833410906,
			0.08327674157670475, 0.1019301198172404, 0.1181945319615184,
			0.1316886384491766, 0.1420961093183821, 0.1491729864726037,
			0.1527533871307259},
	}
	bvnX = [3][]float64{
		{0.9324695142031522, 0.6612093864662647, 0.2386191860831970},
		{0.9815606342467191, 0.9041172563704750, 0.7699026741943050,
			0.5873179542866171, 0.3678314989981802, 0.1252334085114692},
		{0.9931285991850949, 0.9639719272779138, 0.9122344282513259,
			0.8391169718222188, 0.7463319064601508, 0.6360536807265150,
			0.5108670019508271, 0.3737060887154196, 0.2277858511416451,
			0.07652652113349733},
	}
)

// bvnu returns P(X > h, Y > k) for correlation r (Genz's BVNU).
func bvnu(h, k, r float64) float64 {
	if math.IsInf(h, 1) || math.IsInf(k, 1) {
		return 0
	}
	if math.IsInf(h, -1) {
		return NormCDF(-k)
	}
	if math.IsInf(k, -1) {
		return NormCDF(-h)
	}
	var rule int
	switch ar := math.Abs(r); {
	case ar < 0.3:
		rule = 0
	case ar < 0.75:
		rule = 1
	default:
		rule = 2
	}
	w, x := bvnW[rule], bvnX[rule]
	hk := h * k
	bvn := 0.0
	if math.Abs(r) < 0.925 {
		hs := (h*h + k*k) / 2
		asr := math.Asin(r) / 2
		for i := range x {
			sn := math.Sin(asr * (1 - x[i]))
			bvn += w[i] * math.Exp((sn*hk-hs)/(1-sn*sn))
			sn = math.Sin(asr * (1 + x[i]))
			bvn += w[i] * math.Exp((sn*hk-hs)/(1-sn*sn))
		}
		return clamp01(bvn*asr/(2*math.Pi) + NormCDF(-h)*NormCDF(-k))
	}
	if r < 0 {
		k = -k
		hk = -hk
	}
	if math.Abs(r) < 1 {
		as := (1 - r) * (1 + r)
		a := math.Sqrt(as)
		bs := (h - k) * (h - k)
		c := (4 - hk) / 8
		d := (12 - hk) / 80
		asr := -(bs/as + hk) / 2
		if asr > -100 {
			bvn = a * math.Exp(asr) * (1 - c*(bs-as)*(1-d*bs)/3 + c*d*as*as)
		}
		if hk > -100 {
			b := math.Sqrt(bs)
			sp := math.Sqrt(2*math.Pi) * NormCDF(-b/a)
			bvn -= math.Exp(-hk/2) * sp * b * (1 - c*bs*(1-d*bs)/3)
		}
		a /= 2
		sum := 0.0
		for i := range x {
			for _, sgn := range [2]float64{-1, 1} {
				xs := a * (1 + sgn*x[i])
				xs *= xs
				asr := -(bs/xs + hk) / 2
				if asr <= -100 {
					continue
				}
				rs := math.Sqrt(1 - xs)
				sp := 1 + c*xs*(1+5*d*xs)
				ep := math.Exp(-hk*xs/(2*(1+rs)*(1+rs))) / rs
				sum += w[i] * math.Exp(asr) * (sp - ep)
			}
		}
		bvn = (a*sum - bvn) / (2 * math.Pi)
	}
	if r > 0 {
		return clamp01(bvn + NormCDF(-math.Max(h, k)))
	}
	if h >= k {
		return clamp01(-bvn)
	}
	var l float64
	if h < 0 {
		l = NormCDF(k) - NormCDF(h)
	} else {
		l = NormCDF(-h) - NormCDF(-k)
	}
	return clamp01(l - bvn)
}

func clamp01(p float64) float64 { return math.Max(0, math.Min(1, p)) }
