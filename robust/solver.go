package robust

import (
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
)

// Solver holds what every solve with the same A shares: the (optionally
// intercept-augmented) matrix, its Gram matrix AᵀA and column norms. It is
// safe for concurrent use by several goroutines. It keeps a reference to
// A's storage (never writing to it): do not modify A while the Solver is in
// use.
type Solver struct {
	a       blas64.General // d×p, p = k (+1 with an intercept)
	d, k, p int
	gram    []float64 // p×p, row-major, full
	colNorm []float64
	opt     Options
}

// NewSolver checks A (d×k, finite, d > k, full column rank) and the options,
// and precomputes AᵀA (one d·k² pass). Errors wrap ErrInput.
func NewSolver(A *mat.Dense, opt Options) (*Solver, error) {
	if A == nil || A.IsEmpty() {
		return nil, fmt.Errorf("%w: A is nil or empty", ErrInput)
	}
	d, k := A.Dims()
	if err := checkFiniteMat("A", A); err != nil {
		return nil, err
	}
	p := k
	if opt.Intercept {
		p++
	}
	if d <= p {
		return nil, fmt.Errorf("%w: A is %d×%d: robust recovery needs more observations than unknowns (d > k%s)", ErrInput, d, k, map[bool]string{true: " + 1 with the intercept", false: ""}[opt.Intercept])
	}
	if err := opt.check(d); err != nil {
		return nil, err
	}
	s := &Solver{d: d, k: k, p: p, opt: opt}
	var data []float64
	if raw := A.RawMatrix(); !opt.Intercept && raw.Stride == k {
		data = raw.Data[:d*k] // read-only use: no copy of a possibly large A
	} else {
		data = make([]float64, d*p)
		for i := 0; i < d; i++ {
			copy(data[i*p:i*p+k], A.RawRowView(i))
			if opt.Intercept {
				data[i*p+k] = 1
			}
		}
	}
	s.a = blas64.General{Rows: d, Cols: p, Stride: p, Data: data}
	s.gram = make([]float64, p*p)
	// Gemm rather than Syrk: gonum's Gemm is blocked and parallel, its Syrk
	// is not, and this d·p² product is the largest cost of a single solve.
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, s.a, s.a, 0, blas64.General{Rows: p, Cols: p, Stride: p, Data: s.gram})
	for i := 0; i < p; i++ {
		for j := 0; j < i; j++ {
			m := (s.gram[i*p+j] + s.gram[j*p+i]) / 2
			s.gram[i*p+j], s.gram[j*p+i] = m, m
		}
	}
	s.colNorm = make([]float64, p)
	for j := 0; j < p; j++ {
		s.colNorm[j] = math.Sqrt(s.gram[j*p+j])
		if s.colNorm[j] == 0 {
			return nil, fmt.Errorf("%w: column %d of A is zero", ErrInput, j)
		}
	}
	// Full column rank, checked on the Cholesky factor of the Gram matrix.
	l := append([]float64(nil), s.gram...)
	if !linalg.CholeskyInPlace(l, p) || cholCond(l, p) > 1e7 {
		return nil, fmt.Errorf("%w: A (%d×%d%s) is numerically rank deficient (κ(A) > 1e7): the code is not identifiable", ErrInput, d, k, map[bool]string{true: " with the intercept column", false: ""}[opt.Intercept])
	}
	return s, nil
}

// Dims returns d and k.
func (s *Solver) Dims() (d, k int) { return s.d, s.k }

// Recover solves (47) for one observation v (length d) with a fresh Solver.
// To solve many observations with the same A, use NewSolver and Solve, or
// RecoverAll.
func Recover(A *mat.Dense, v []float64, opt Options) (*Result, error) {
	s, err := NewSolver(A, opt)
	if err != nil {
		return nil, err
	}
	return s.Solve(v)
}

// Solve recovers (ĉ, ê) from v with the solver's options.
func (s *Solver) Solve(v []float64) (*Result, error) {
	return s.solve(v, s.opt.OracleZW)
}

// solve is Solve with an oracle vector for the threshold rule that needs
// one (Options.OracleZW): the estimate, the outliers ê, the KKT
// certificate, the scaled ĉ/μ, and warnings.
func (s *Solver) solve(v, oracle []float64) (*Result, error) {
	began := time.Now()
	if len(v) != s.d {
		return nil, fmt.Errorf("%w: v has length %d but A has %d rows", ErrInput, len(v), s.d)
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: v[%d] = %v; remove or impute non-finite values", ErrInput, i, x)
		}
	}
	o := s.opt
	res := &Result{Solver: string(o.Solver), Mu: math.NaN()}
	c, err := s.estimate(v, oracle, res)
	if err != nil {
		return nil, err
	}
	res.Lambda = res.Tau / float64(s.d)
	r := s.residual(v, c)
	e := make([]float64, s.d)
	if len(o.KnownSupport) > 0 {
		for _, i := range o.KnownSupport {
			e[i] = r[i]
		}
	} else {
		for i, x := range r {
			e[i] = softThreshold(x, res.Tau)
		}
	}
	for _, x := range e {
		if x != 0 {
			res.Outliers++
		}
	}
	res.Certificate = s.certify(v, c, e, res.Tau, o.SparseC*float64(s.d), o.kktTol())
	res.C = c[:s.k:s.k]
	if o.Intercept {
		res.Intercept = c[s.k]
	}
	res.E = e
	res.Direction = unit(res.C)
	switch {
	case o.Linear:
		res.Mu = 1
	case o.Bias != nil:
		res.Mu = ScaleMoments(o.Bias).Mu
	}
	if !math.IsNaN(res.Mu) {
		res.CScaled = make([]float64, s.k)
		for j := range res.CScaled {
			res.CScaled[j] = res.C[j] / res.Mu
		}
		if res.Mu < 0.05 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("μ = %.3g is small: the bias mostly switches the units off, the signal is weak and ĉ/μ amplifies its error", res.Mu))
		}
	}
	s.warnOutcome(res)
	res.Elapsed = time.Since(began)
	return res, nil
}

// estimate computes ĉ (with the intercept last): by least squares off a
// known outlier support, else with the Huber threshold τ (threshold) by
// the solver the options choose. It records the rule, τ, the solver, its
// iterations and convergence in res.
func (s *Solver) estimate(v, oracle []float64, res *Result) ([]float64, error) {
	o := s.opt
	var c []float64
	switch {
	case len(o.KnownSupport) > 0:
		res.Rule, res.Tau, res.Solver = "known-support", math.Inf(1), "lstsq"
		var err error
		c, err = s.knownSupport(v, o.KnownSupport)
		if err != nil {
			return nil, err
		}
		res.Iterations, res.Converged = 1, true
	default:
		tau, rule, c0, err := s.threshold(v, oracle)
		if err != nil {
			return nil, err
		}
		res.Tau, res.Rule = tau, rule
		switch {
		case o.SparseC > 0:
			res.Solver = "fista+ssn (sparse c)"
			c, res.Iterations, res.Converged = s.sparse(v, tau, o.SparseC*float64(s.d), o.maxIter())
		case o.Solver == SolverBCD:
			c, res.Iterations, res.Converged = s.bcd(v, tau, o.maxIter())
		case o.Solver == SolverFISTA:
			c, res.Iterations, res.Converged = s.fista(v, tau, o.maxIter())
		default:
			c, res.Iterations, res.Converged = s.huberSSN(v, tau, c0, o.maxIter())
		}
	}
	return c, nil
}

// warnOutcome warns of a solver that did not converge, an unmet KKT
// certificate, and more than half the entries flagged as outliers.
func (s *Solver) warnOutcome(res *Result) {
	if !res.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the %s solver stopped after %d iterations without converging", res.Solver, res.Iterations))
	}
	if !res.Certificate.Met {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the KKT certificate is not met (stationarity %.1e, sign %.1e, box %.1e > %.0e)",
			res.Certificate.Stationarity, res.Certificate.SignViolation, res.Certificate.BoxViolation, res.Certificate.Tol))
	}
	if res.Outliers > s.d/2 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d entries were flagged as outliers: τ = %.3g is probably too small", res.Outliers, s.d, res.Tau))
	}
}

// residual returns v − A·c.
func (s *Solver) residual(v, c []float64) []float64 {
	r := append([]float64(nil), v...)
	blas64.Gemv(blas.NoTrans, -1, s.a, blas64.Vector{N: s.p, Inc: 1, Data: c}, 1, blas64.Vector{N: s.d, Inc: 1, Data: r})
	return r
}

// atx returns Aᵀ·x.
func (s *Solver) atx(x []float64) []float64 {
	g := make([]float64, s.p)
	blas64.Gemv(blas.Trans, 1, s.a, blas64.Vector{N: s.d, Inc: 1, Data: x}, 0, blas64.Vector{N: s.p, Inc: 1, Data: g})
	return g
}

// ols returns the least-squares solution G⁻¹Aᵀv.
func (s *Solver) ols(v []float64) []float64 {
	l := append([]float64(nil), s.gram...)
	linalg.CholeskyInPlace(l, s.p) // cannot fail: checked in NewSolver
	c := s.atx(v)
	linalg.CholeskySolveInPlace(l, s.p, c)
	return c
}

// huberSSN minimises Σ H_τ(v − Ac) by semismooth Newton (our solver of (47)): the
// generalized Hessian is A_Iᵀ A_I over the rows with |r_i| ≤ τ, assembled as
// AᵀA minus the outlier rows (or directly when those are the majority), a
// ridge ε = 1e-10·tr/p keeps it invertible when |I| < p, and an Armijo line
// search on the Huber objective guarantees descent. Once the inlier set and
// the outliers' signs stop changing, the Newton step lands on the exact
// minimiser of that quadratic piece, so it stops after a confirming step.
func (s *Solver) huberSSN(v []float64, tau float64, c0 []float64, maxIter int) (c []float64, iters int, converged bool) {
	p, d := s.p, s.d
	if c0 == nil {
		c = s.ols(v)
	} else {
		c = append([]float64(nil), c0...)
	}
	if math.IsInf(tau, 1) {
		// Least squares: the OLS start is the answer; one refinement step
		// removes the Cholesky rounding.
		s.refineLeastSquares(v, c)
		return c, 1, true
	}
	trace := 0.0
	for j := 0; j < p; j++ {
		trace += s.gram[j*p+j]
	}
	ridge := 1e-10 * trace / float64(p)
	r := s.residual(v, c)
	psi := make([]float64, d)
	h := make([]float64, p*p)
	u := make([]float64, d)
	var outl []int
	var prevSig []int8
	sig := make([]int8, d)
	stable := 0
	f := huberLoss(r, tau)
	for iters = 1; iters <= maxIter; iters++ {
		outl = huberScore(r, tau, psi, sig, outl[:0])
		g := s.atx(psi)
		s.inlierGram(h, outl, sig)
		for j := 0; j < p; j++ {
			h[j*p+j] += ridge
		}
		if !linalg.CholeskyInPlace(h, p) {
			return c, iters, false
		}
		delta := append([]float64(nil), g...)
		linalg.CholeskySolveInPlace(h, p, delta)
		slope := vec.Dot(g, delta)
		// u = A·Δ; trial residuals are r − t·u.
		blas64.Gemv(blas.NoTrans, 1, s.a, blas64.Vector{N: p, Inc: 1, Data: delta}, 0, blas64.Vector{N: d, Inc: 1, Data: u})
		trial := make([]float64, d)
		t, fNew := huberLineSearch(r, u, trial, tau, f, slope)
		if fNew > f { // no decrease at all: rounding level reached
			return c, iters, true
		}
		for j := range c {
			c[j] += t * delta[j]
		}
		step := t * math.Sqrt(vec.Dot(delta, delta))
		if iters%8 == 0 {
			r = s.residual(v, c) // limit drift of the updated residual
		} else {
			copy(r, trial)
		}
		f = fNew
		if prevSig != nil && t == 1 && slices.Equal(prevSig, sig) {
			stable++
		} else {
			stable = 0
		}
		prevSig = append(prevSig[:0], sig...)
		if step <= 1e-15*math.Max(1, math.Sqrt(vec.Dot(c, c))) || stable >= 2 {
			return c, iters, true
		}
	}
	return c, maxIter, false
}

// huberScore writes the Huber score ψ_τ(r) to psi and the outliers'
// signs to sig (0 for the inliers, |r_i| ≤ τ), and appends the outliers'
// indices to outl.
func huberScore(r []float64, tau float64, psi []float64, sig []int8, outl []int) []int {
	for i, x := range r {
		switch {
		case x > tau:
			psi[i], sig[i] = tau, 1
			outl = append(outl, i)
		case x < -tau:
			psi[i], sig[i] = -tau, -1
			outl = append(outl, i)
		default:
			psi[i], sig[i] = x, 0
		}
	}
	return outl
}

// huberLineSearch is huberSSN's Armijo backtracking along a Newton step:
// from t = 1, halved up to 59 times, the trial residuals r − t·u (written
// to trial) until the Huber objective falls by 1e-4·t·slope below f. It
// returns t and the objective there.
func huberLineSearch(r, u, trial []float64, tau, f, slope float64) (t, fNew float64) {
	t = 1.0
	for ls := 0; ls < 60; ls++ {
		for i := range trial {
			trial[i] = r[i] - t*u[i]
		}
		fNew = huberLoss(trial, tau)
		if fNew <= f-1e-4*t*slope || ls == 59 {
			break
		}
		t /= 2
	}
	return t, fNew
}

// refineLeastSquares takes one step of iterative refinement of the
// least-squares solution c (in place): c += G⁻¹Aᵀ(v − A·c), which removes
// the Cholesky rounding of the OLS start.
func (s *Solver) refineLeastSquares(v, c []float64) {
	p := s.p
	r := s.residual(v, c)
	l := append([]float64(nil), s.gram...)
	linalg.CholeskyInPlace(l, p)
	g := s.atx(r)
	linalg.CholeskySolveInPlace(l, p, g)
	for j := range c {
		c[j] += g[j]
	}
}

// inlierGram writes Σ_{i inlier} a_i a_iᵀ into h from whichever set is
// smaller: the Gram matrix minus the outlier rows (a downdate that loses at
// most a factor 2 of relative accuracy, since the inliers are then at least
// half the rows), or the inlier rows directly.
func (s *Solver) inlierGram(h []float64, outl []int, sig []int8) {
	p := s.p
	sub := blas64.Symmetric{Uplo: blas.Upper, N: p, Stride: p, Data: h}
	if 2*len(outl) <= s.d {
		copy(h, s.gram)
		if len(outl) > 0 {
			rows := make([]float64, len(outl)*p)
			for n, i := range outl {
				copy(rows[n*p:(n+1)*p], s.a.Data[i*p:(i+1)*p])
			}
			blas64.Syrk(blas.Trans, -1, blas64.General{Rows: len(outl), Cols: p, Stride: p, Data: rows}, 1, sub)
		}
	} else {
		var rows []float64
		m := 0
		for i := 0; i < s.d; i++ {
			if sig[i] == 0 {
				rows = append(rows, s.a.Data[i*p:(i+1)*p]...)
				m++
			}
		}
		for j := range h {
			h[j] = 0
		}
		if m > 0 {
			blas64.Syrk(blas.Trans, 1, blas64.General{Rows: m, Cols: p, Stride: p, Data: rows}, 0, sub)
		}
	}
	for i := 0; i < p; i++ {
		for j := 0; j < i; j++ {
			h[i*p+j] = h[j*p+i]
		}
	}
}

// huberLoss is Σ H_τ(r_i) with H_τ(r) = r²/2 for |r| ≤ τ, τ|r| − τ²/2 beyond.
func huberLoss(r []float64, tau float64) float64 {
	sum := 0.0
	for _, x := range r {
		a := math.Abs(x)
		if a <= tau {
			sum += a * a / 2
		} else {
			sum += tau*a - tau*tau/2
		}
	}
	return sum
}

// softThreshold is S_τ(x) = sign(x)·max(|x| − τ, 0).
func softThreshold(x, tau float64) float64 {
	switch {
	case x > tau:
		return x - tau
	case x < -tau:
		return x + tau
	}
	return 0
}

// knownSupport is least squares on the rows outside the known outlier set.
func (s *Solver) knownSupport(v []float64, supp []int) ([]float64, error) {
	p := s.p
	out := make([]bool, s.d)
	var rows []int
	for _, i := range supp {
		if i < 0 || i >= s.d {
			return nil, fmt.Errorf("%w: known outlier position %d outside [0, %d)", ErrInput, i, s.d)
		}
		if !out[i] {
			out[i] = true
			rows = append(rows, i)
		}
	}
	if s.d-len(rows) <= p {
		return nil, fmt.Errorf("%w: only %d rows remain outside the known support, need more than %d", ErrInput, s.d-len(rows), p)
	}
	sig := make([]int8, s.d)
	for _, i := range rows {
		sig[i] = 1
	}
	h := make([]float64, p*p)
	s.inlierGram(h, rows, sig)
	if !linalg.CholeskyInPlace(h, p) {
		return nil, fmt.Errorf("%w: A restricted to the rows outside the known support is rank deficient", ErrInput)
	}
	vv := append([]float64(nil), v...)
	for _, i := range rows {
		vv[i] = 0
	}
	c := s.atx(vv)
	linalg.CholeskySolveInPlace(h, p, c)
	// One step of iterative refinement.
	r := s.residual(v, c)
	for _, i := range rows {
		r[i] = 0
	}
	g := s.atx(r)
	linalg.CholeskySolveInPlace(h, p, g)
	for j := range c {
		c[j] += g[j]
	}
	return c, nil
}

// Certify returns the KKT certificate of (c, e) for (47) with threshold τ
// [MR18, (47)]: Aᵀr = 0, r_i = τ·sign(e_i) where e_i ≠ 0, |r_i| ≤ τ
// where e_i = 0, for r = v − Ac − e. It is how tests and callers check a
// solution from any solver. c has length k (k + 1 with Options.Intercept).
func (s *Solver) Certify(v, c, e []float64, tau float64) KKT {
	return s.certify(v, c, e, tau, s.opt.SparseC*float64(s.d), s.opt.kktTol())
}

func (s *Solver) certify(v, c, e []float64, tau, kappa, tol float64) KKT {
	r := s.residual(v, c)
	for i := range r {
		r[i] -= e[i]
	}
	g := s.atx(r)
	vn := math.Sqrt(vec.Dot(v, v))
	var k KKT
	for j := 0; j < s.p; j++ {
		viol := math.Abs(g[j])
		if kappa > 0 && j < s.k {
			switch {
			case c[j] > 0:
				viol = math.Abs(g[j] - kappa)
			case c[j] < 0:
				viol = math.Abs(g[j] + kappa)
			default:
				viol = math.Max(math.Abs(g[j])-kappa, 0)
			}
		}
		if scale := s.colNorm[j]*vn + kappa; scale > 0 {
			k.Stationarity = math.Max(k.Stationarity, viol/scale)
		}
	}
	if !math.IsInf(tau, 1) && tau > 0 {
		scale := tau + vec.MaxAbs(v)
		for i, x := range e {
			if x != 0 {
				want := tau
				if x < 0 {
					want = -tau
				}
				k.SignViolation = math.Max(k.SignViolation, math.Abs(r[i]-want)/scale)
			} else {
				k.BoxViolation = math.Max(k.BoxViolation, math.Max(math.Abs(r[i])-tau, 0)/scale)
			}
		}
	}
	k.Tol = tol
	k.Met = k.Stationarity <= tol && k.SignViolation <= tol && k.BoxViolation <= tol
	return k
}

func unit(x []float64) []float64 {
	n := math.Sqrt(vec.Dot(x, x))
	out := make([]float64, len(x))
	if n == 0 {
		return out
	}
	for i := range x {
		out[i] = x[i] / n
	}
	return out
}

// cholCond estimates κ(A) = √κ(AᵀA) from the diagonal of the Cholesky factor
// (a lower bound that catches numerically dependent columns).
func cholCond(l []float64, p int) float64 {
	lo, hi := math.Inf(1), 0.0
	for j := 0; j < p; j++ {
		lo = math.Min(lo, l[j*p+j])
		hi = math.Max(hi, l[j*p+j])
	}
	return hi / lo
}

func checkFiniteMat(name string, m *mat.Dense) error {
	r, c := m.Dims()
	for i := 0; i < r; i++ {
		for j, x := range m.RawRowView(i)[:c] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: %s has %v at row %d, column %d; remove or impute non-finite values", ErrInput, name, x, i, j)
			}
		}
	}
	return nil
}
