package hermite

import (
	"fmt"
	"math"
	"strconv"

	"github.com/relurec/relurec/errs"
)

// RectPow is the rectified power max(x, 0)^C for a real C > 0 ([BJW19,
// App. 9.1]). C = 2 gives ReLU², whose order-4 coefficient
// vanishes, so its tensor order is 3. Its Name matches nn.RectPow(C).
type RectPow struct{ C float64 }

// Name returns "relupow<C>", e.g. "relupow2" (nn's spelling).
func (a RectPow) Name() string {
	if a.C == 1 {
		return "relu"
	}
	return "relupow" + strconv.FormatFloat(a.C, 'g', -1, 64)
}

// Eval returns max(x, 0)^C.
func (a RectPow) Eval(x float64) float64 {
	if x > 0 {
		return math.Pow(x, a.C)
	}
	return 0
}

// Coeff returns c_r = E[max(z,0)^C·He_r(z)] in closed form: expanding
// He_r(z) = Σ_j h_{r,j} z^j gives c_r = Σ_j h_{r,j}·M(C + j) with the
// half-line Gaussian moments M(p) = ∫_0^∞ z^p φ(z) dz = 2^{p/2}·Γ((p+1)/2)/(2√π).
// Unlike quadrature it stays exact for C < 1, where z^C has an unbounded
// derivative at 0. For r ≤ 8 the alternating sum loses at most a few digits.
// It returns NaN unless C > 0.
func (a RectPow) Coeff(r int) float64 {
	if !(a.C > 0) || math.IsInf(a.C, 0) || r < 0 {
		return math.NaN()
	}
	s := 0.0
	for j, h := range heCoeffs(r) {
		if h != 0 {
			s += h * halfMoment(a.C+float64(j))
		}
	}
	return s
}

// RectExp is the rectified exponential e^{max(x,0)} − 1 (Bakshi et al.
// App. 9.1). Every coefficient is positive, c_3 > c_4, so its tensor order
// is 3. Its Name matches nn.RectExp.
type RectExp struct{}

// Name returns "reluexp".
func (RectExp) Name() string { return "reluexp" }

// Eval returns e^{max(x,0)} − 1.
func (RectExp) Eval(x float64) float64 {
	if x > 0 {
		return math.Expm1(x)
	}
	return 0
}

// Coeff returns c_r = E[(e^{max(z,0)} − 1)·He_r(z)] in closed form:
// Σ_j h_{r,j}·(e^{1/2}·I_j − M(j)), where I_j = ∫_0^∞ z^j φ(z − 1) dz (the
// Gaussian shifted by completing the square in e^z φ(z)) follows the
// recurrence I_0 = Φ(1), I_1 = Φ(1) + φ(1), I_j = I_{j−1} + (j−1)·I_{j−2},
// and M(j) is the half-line moment of RectPow.Coeff.
func (RectExp) Coeff(r int) float64 {
	if r < 0 {
		return math.NaN()
	}
	h := heCoeffs(r)
	I := make([]float64, len(h))
	for j := range I {
		switch j {
		case 0:
			I[0] = NormCDF(1)
		case 1:
			I[1] = NormCDF(1) + NormPDF(1)
		default:
			I[j] = I[j-1] + float64(j-1)*I[j-2]
		}
	}
	s := 0.0
	for j, c := range h {
		if c != 0 {
			s += c * (math.Exp(0.5)*I[j] - halfMoment(float64(j)))
		}
	}
	return s
}

// heCoeffs returns the monomial coefficients of He_r: He_r(z) = Σ_j h[j]·z^j,
// from He_{n+1} = z·He_n − n·He_{n−1}.
func heCoeffs(r int) []float64 {
	prev, cur := []float64{1}, []float64{0, 1}
	if r == 0 {
		return prev
	}
	for n := 1; n < r; n++ {
		next := make([]float64, n+2)
		for j, c := range cur {
			next[j+1] += c
		}
		for j, c := range prev {
			next[j] -= float64(n) * c
		}
		prev, cur = cur, next
	}
	return cur
}

// halfMoment is ∫_0^∞ z^p φ(z) dz = 2^{p/2}·Γ((p+1)/2)/(2√π) for p > −1.
func halfMoment(p float64) float64 {
	lg, _ := math.Lgamma((p + 1) / 2)
	return math.Exp(p/2*math.Ln2+lg) / (2 * math.Sqrt(math.Pi))
}

// Coeffs returns c_0 … c_maxOrder of a, the Hermite coefficients that decide
// its tensor order (TensorOrder).
func Coeffs(a Activation, maxOrder int) []float64 {
	out := make([]float64, maxOrder+1)
	for r := range out {
		out[r] = a.Coeff(r)
	}
	return out
}

// checkCoeff is used by TensorOrder to refuse activations whose coefficients
// are not numbers (RectPow with C ≤ 0, or with C so large, say 400, that
// its Gaussian moments overflow float64). The error wraps errs.ErrInput:
// the activation is the caller's choice.
func checkCoeff(a Activation, r int, c float64) error {
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return fmt.Errorf("%w: hermite: activation %s has no finite Hermite coefficient c_%d (%v), which the tensor method needs", errs.ErrInput, a.Name(), r, c)
	}
	return nil
}
