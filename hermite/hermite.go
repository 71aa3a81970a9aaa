package hermite

import (
	"fmt"
	"math"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/quad"
)

// InvSqrt2Pi is 1/√(2π), the standard normal density at 0.
const InvSqrt2Pi = 0.398942280401432677939946059934381868475858631164934657665925

// He returns the probabilists' Hermite polynomial He_n(x), computed by the
// three-term recurrence He_{n+1}(x) = x·He_n(x) − n·He_{n−1}(x). The He_n are
// orthogonal under N(0,1) with E[He_n·He_m] = n!·δ_nm.
func He(n int, x float64) float64 {
	if n < 0 {
		panic(fmt.Sprintf("hermite: negative order %d", n))
	}
	p0, p1 := 1.0, x
	if n == 0 {
		return p0
	}
	for k := 1; k < n; k++ {
		p0, p1 = p1, x*p1-float64(k)*p0
	}
	return p1
}

// Activation is a scalar function whose Gaussian Hermite coefficients decide
// which moment tensor a learner can use ([BJW19, Alg 4]: the order r with
// c_r ≠ 0).
type Activation interface {
	// Name is a short identifier, e.g. "relu".
	Name() string
	// Eval returns the activation at x.
	Eval(x float64) float64
	// Coeff returns c_r = E_{z~N(0,1)}[f(z)·He_r(z)]. By Stein's identity
	// E[f(v·x)·H_r(x)] = c_r·v^{⊗r} for a unit vector v and x ~ N(0, I).
	Coeff(r int) float64
}

// ReLU is max(x, 0).
type ReLU struct{}

// Name returns "relu".
func (ReLU) Name() string { return "relu" }

// Eval returns max(x, 0).
func (ReLU) Eval(x float64) float64 { return math.Max(x, 0) }

// Coeff returns the ReLU's Hermite coefficient in closed form: c_0 = 1/√(2π),
// c_1 = 1/2 and, for r ≥ 2, c_r = φ(0)·He_{r−2}(0) (the second derivative of
// the ReLU is the Dirac delta at 0). Every odd c_r with r ≥ 3 is zero, which is
// why the order-3 tensor of Bakshi et al. Alg 4 vanishes for the ReLU.
func (ReLU) Coeff(r int) float64 {
	switch {
	case r < 0:
		return 0
	case r == 0:
		return InvSqrt2Pi
	case r == 1:
		return 0.5
	default:
		return InvSqrt2Pi * He(r-2, 0)
	}
}

// Coeff computes c_r = E[f(z)·He_r(z)] for any activation by Gauss–Hermite
// quadrature on a rectified function split at 0 (where a rectified f has its
// kink): each half line uses a substitution-free composite Gauss–Legendre rule
// on [0, 12] with the Gaussian weight, accurate to ~1e-13 for polynomially
// bounded f that are smooth away from 0.
func Coeff(f func(float64) float64, r int) float64 {
	integrand := func(z float64) float64 {
		return f(z) * He(r, z) * math.Exp(-z*z/2) * InvSqrt2Pi
	}
	return quad.GaussLegendre(integrand, -12, 0, 96) + quad.GaussLegendre(integrand, 0, 12, 96)
}

// TensorOrder returns argmax over r ∈ {3, 4} of |c_r| (ties to 3) — the
// moment order the tensor method must use (an erratum to [BJW19, Alg 4],
// which prints order 3): 4 for the
// ReLU (c_3 = 0), 3 for ReLU² (c_4 = 0), for ReLU³ (c_3 = 3 > c_4 = 2.394)
// and for e^x − 1 (c_3 = 1.786 > c_4 = 1.387), 4 for √ReLU (|c_3| = 0.215 <
// |c_4| = 0.308). It works for any
// Activation, by its Coeff. It returns an error if both coefficients vanish
// or are not finite, wrapping errs.ErrInput.
func TensorOrder(a Activation) (int, error) {
	c3r, c4r := a.Coeff(3), a.Coeff(4)
	if err := checkCoeff(a, 3, c3r); err != nil {
		return 0, err
	}
	if err := checkCoeff(a, 4, c4r); err != nil {
		return 0, err
	}
	c3, c4 := math.Abs(c3r), math.Abs(c4r)
	if c3 < 1e-8 && c4 < 1e-8 {
		return 0, fmt.Errorf("%w: hermite: activation %s has c_3 = c_4 = 0; no order-3 or order-4 moment identifies its units", errs.ErrInput, a.Name())
	}
	if c3 >= c4 {
		return 3, nil
	}
	return 4, nil
}
