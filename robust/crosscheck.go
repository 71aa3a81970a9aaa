package robust

import (
	"math"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
)

// bcd is block-coordinate descent on (47): c ← A⁺(v − e), e ← S_τ(v − Ac).
// It is exactly ISTA with step d on the e-LASSO min_e (1/2d)‖P(v − e)‖² +
// λ‖e‖₁, P = I − AA⁺ (eliminating c from (47)), so it converges (linearly once the
// outlier support settles). A cross-check of huberSSN, not the default.
func (s *Solver) bcd(v []float64, tau float64, maxIter int) ([]float64, int, bool) {
	l := append([]float64(nil), s.gram...)
	linalg.CholeskyInPlace(l, s.p)
	e := make([]float64, s.d)
	w := make([]float64, s.d)
	scale := math.Max(vec.MaxAbs(v), 1)
	var c []float64
	for it := 1; it <= maxIter; it++ {
		for i := range w {
			w[i] = v[i] - e[i]
		}
		c = s.atx(w)
		linalg.CholeskySolveInPlace(l, s.p, c)
		r := s.residual(v, c)
		change := 0.0
		for i, x := range r {
			ne := softThreshold(x, tau)
			change = math.Max(change, math.Abs(ne-e[i]))
			e[i] = ne
		}
		if change <= 1e-15*scale {
			return c, it, true
		}
	}
	return c, maxIter, false
}

// fista is FISTA with gradient-based adaptive restart (O'Donoghue–Candès) on
// the e-LASSO min_e ½‖P(v − e)‖² + τ‖e‖₁ (Lipschitz constant 1), followed by
// ĉ = A⁺(v − ê). A cross-check of huberSSN.
func (s *Solver) fista(v []float64, tau float64, maxIter int) ([]float64, int, bool) {
	l := append([]float64(nil), s.gram...)
	linalg.CholeskyInPlace(l, s.p)
	d := s.d
	// proj(x) returns P·x = x − A·G⁻¹·Aᵀx.
	proj := func(x []float64) []float64 {
		g := s.atx(x)
		linalg.CholeskySolveInPlace(l, s.p, g)
		return s.residual(x, g)
	}
	e := make([]float64, d)
	prev := make([]float64, d)
	y := make([]float64, d)
	w := make([]float64, d)
	t := 1.0
	scale := math.Max(vec.MaxAbs(v), 1)
	converged := false
	it := 1
	for ; it <= maxIter; it++ {
		for i := range w {
			w[i] = v[i] - y[i]
		}
		pw := proj(w)
		copy(prev, e)
		change, restart := 0.0, 0.0
		for i := range e {
			e[i] = softThreshold(y[i]+pw[i], tau)
			change = math.Max(change, math.Abs(e[i]-prev[i]))
			restart += (y[i] - e[i]) * (e[i] - prev[i])
		}
		if change <= 1e-15*scale {
			converged = true
			break
		}
		if restart > 0 {
			t = 1
			copy(y, e)
			continue
		}
		tn := (1 + math.Sqrt(1+4*t*t)) / 2
		beta := (t - 1) / tn
		for i := range y {
			y[i] = e[i] + beta*(e[i]-prev[i])
		}
		t = tn
	}
	for i := range w {
		w[i] = v[i] - e[i]
	}
	c := s.atx(w)
	linalg.CholeskySolveInPlace(l, s.p, c)
	return c, min(it, maxIter), converged
}

// sparse minimises Σ H_τ(v − Ac) + κ‖c_{1..k}‖₁ (κ = λ_c·d; the intercept
// is not penalised) by FISTA with restart (step 1/‖A‖², since the Huber
// Hessian is ⪯ AᵀA), then polishes with Newton steps on the support found,
// which make the answer exact once the support and signs are right.
func (s *Solver) sparse(v []float64, tau, kappa float64, maxIter int) ([]float64, int, bool) {
	c, it := s.sparseFISTA(v, tau, kappa, maxIter)
	// Newton polish on the support with fixed signs.
	for polish := 0; polish < 20; polish++ {
		if !s.supportNewtonStep(v, c, tau, kappa) {
			break
		}
	}
	return c, min(it, maxIter), it <= maxIter
}

// sparseFISTA is sparse's first stage: FISTA with restart, step 1/‖A‖²,
// from c = 0 until the largest change of c falls to 1e-13 of its scale or
// maxIter steps. It returns c and the step count (maxIter+1 when it did
// not converge).
func (s *Solver) sparseFISTA(v []float64, tau, kappa float64, maxIter int) ([]float64, int) {
	p := s.p
	lip := s.gramNorm()
	step := 1 / lip
	prox := func(x []float64) {
		for j := 0; j < s.k; j++ {
			x[j] = softThreshold(x[j], kappa*step)
		}
	}
	grad := func(c []float64) []float64 { // Aᵀψ(v − Ac) = −∇loss
		r := s.residual(v, c)
		for i, x := range r {
			r[i] = math.Max(-tau, math.Min(tau, x))
		}
		return s.atx(r)
	}
	c := make([]float64, p)
	prev := make([]float64, p)
	y := make([]float64, p)
	t := 1.0
	it := 1
	cscale := 0.0
	for ; it <= maxIter; it++ {
		g := grad(y)
		copy(prev, c)
		for j := range c {
			c[j] = y[j] + step*g[j]
		}
		prox(c)
		change, restart := 0.0, 0.0
		for j := range c {
			change = math.Max(change, math.Abs(c[j]-prev[j]))
			restart += (y[j] - c[j]) * (c[j] - prev[j])
			cscale = math.Max(cscale, math.Abs(c[j]))
		}
		if change <= 1e-13*math.Max(cscale, 1e-300) {
			break
		}
		if restart > 0 {
			t = 1
			copy(y, c)
			continue
		}
		tn := (1 + math.Sqrt(1+4*t*t)) / 2
		beta := (t - 1) / tn
		for j := range y {
			y[j] = c[j] + beta*(c[j]-prev[j])
		}
		t = tn
	}
	return c, it
}

// supportNewtonStep takes one Newton step of sparse's objective on the
// support of c (the penalised coordinates that are non-zero, and the
// intercept) with their signs fixed, which makes the answer exact once the
// support and signs are right. It updates c in place and reports whether
// to go on: false when the support is empty, the system is singular, a
// sign would flip (the support is not final; c is left as it is) or the
// step was negligible.
func (s *Solver) supportNewtonStep(v, c []float64, tau, kappa float64) bool {
	p := s.p
	var supp []int
	for j := 0; j < p; j++ {
		if c[j] != 0 || j >= s.k {
			supp = append(supp, j)
		}
	}
	if len(supp) == 0 {
		return false
	}
	r := s.residual(v, c)
	psi := make([]float64, s.d)
	sig := make([]int8, s.d)
	outl := huberScore(r, tau, psi, sig, nil)
	g := s.atx(psi)
	h := make([]float64, p*p)
	s.inlierGram(h, outl, sig)
	m := len(supp)
	hs := make([]float64, m*m)
	rhs := make([]float64, m)
	for a, ja := range supp {
		for b, jb := range supp {
			hs[a*m+b] = h[ja*p+jb]
		}
		rhs[a] = g[ja]
		if ja < s.k {
			if c[ja] > 0 {
				rhs[a] -= kappa
			} else {
				rhs[a] += kappa
			}
		}
		hs[a*m+a] += 1e-12 * h[ja*p+ja]
	}
	if !linalg.CholeskyInPlace(hs, m) {
		return false
	}
	linalg.CholeskySolveInPlace(hs, m, rhs)
	trial := append([]float64(nil), c...)
	for a, j := range supp {
		trial[j] += rhs[a]
		if j < s.k && trial[j]*c[j] <= 0 { // a sign flip: the support is not final
			return false
		}
	}
	size := math.Sqrt(vec.Dot(rhs, rhs))
	copy(c, trial)
	return !(size <= 1e-15*math.Max(1, math.Sqrt(vec.Dot(c, c))))
}

// gramNorm is ‖AᵀA‖₂ by power iteration (60 steps, then 1% headroom).
func (s *Solver) gramNorm() float64 {
	p := s.p
	x := make([]float64, p)
	for j := range x {
		x[j] = 1 / math.Sqrt(float64(p))
	}
	lam := 0.0
	for it := 0; it < 60; it++ {
		y := make([]float64, p)
		for i := 0; i < p; i++ {
			y[i] = vec.Dot(s.gram[i*p:(i+1)*p], x)
		}
		lam = math.Sqrt(vec.Dot(y, y))
		if lam == 0 {
			return 1
		}
		for j := range x {
			x[j] = y[j] / lam
		}
	}
	return lam * 1.01
}
