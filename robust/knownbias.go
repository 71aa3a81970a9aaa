package robust

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
)

// KnownBiasOptions controls RecoverKnownBias. The zero value works.
type KnownBiasOptions struct {
	// Tau is the Huber threshold τ = λ·d; 0 picks it by the MAD rule from
	// the residuals of the starting fit (as Options.Rule = "mad" does).
	Tau float64
	// MaxIter bounds the Gauss–Newton iterations. Default 100.
	MaxIter int
	// Tol stops the iteration when a step changes c by less than
	// Tol·max(1, ‖c‖). Default 1e-12.
	Tol float64
	// NoRefit skips the final least-squares refit on the rows the Huber fit
	// kept as inliers, leaving the (biased) Huber minimiser itself.
	NoRefit bool
}

// KnownBiasResult is a code recovered with the bias known.
type KnownBiasResult struct {
	// C estimates c* itself: with b known there is no μ scaling.
	C []float64 `json:"c"`
	// E is S_τ(v − ReLU(A·ĉ + b)), the estimated outliers.
	E        []float64 `json:"-"`
	Tau      float64   `json:"tau"`
	Outliers int       `json:"outliers"`
	// Objective is Σᵢ H_τ(vᵢ − ReLU(aᵢ·ĉ + bᵢ)).
	Objective float64 `json:"objective"`
	// Gradient is the largest entry of the gradient at ĉ of the problem it
	// solves (the Huber objective, or the refit's least squares on the kept
	// rows) relative to max‖aᵢ‖·‖v‖₁: a stationarity check, not a global
	// certificate (the problem is not convex).
	Gradient   float64 `json:"gradient"`
	Iterations int     `json:"iterations"`
	// RefitSteps counts the Gauss–Newton steps of the inlier refit.
	RefitSteps int           `json:"refit_steps"`
	Converged  bool          `json:"converged"`
	Warnings   []string      `json:"warnings,omitempty"`
	Elapsed    time.Duration `json:"-"`
}

// RecoverKnownBias recovers c* from v = ReLU(A·c* + b) + e + w when the bias
// vector b is known — a variant not in the
// paper (Mazumdar–Rawat treat b as unknown noise and estimate μ·c*):
//
//	ĉ = argmin_c (1/2d)·‖v − ReLU(A·c + b) − e‖² + λ‖e‖₁,
//
// which, after eliminating e (as in the linear case), is the
// nonlinear Huber regression Σᵢ H_τ(vᵢ − ReLU(aᵢ·c + bᵢ)), τ = λ·d. The
// problem is not convex. It starts from the rows with vᵢ > 0, where the model
// is linear (vᵢ − bᵢ = aᵢ·c + eᵢ + wᵢ once the unit is on), fitted by the
// convex Huber solver, then runs Gauss–Newton steps on the active inlier rows
// with an Armijo line search (the semismooth Newton of the linear case, with
// the ReLU's active set added). On noiseless data with sparse outliers it
// returns c* to rounding after a least-squares refit on the rows the Huber fit
// kept as inliers (our addition; Options.NoRefit skips it). Alternating soft-thresholding with gradient steps would also
// do; Gauss–Newton converges in a few steps instead of hundreds.
func RecoverKnownBias(A *mat.Dense, v, b []float64, opt KnownBiasOptions) (*KnownBiasResult, error) {
	began := time.Now()
	if err := checkKnownBias(A, v, b); err != nil {
		return nil, err
	}
	if opt.MaxIter <= 0 {
		opt.MaxIter = 100
	}
	if opt.Tol <= 0 {
		opt.Tol = 1e-12
	}
	start, err := knownBiasStart(A, v, b, opt.Tau)
	if err != nil {
		return nil, err
	}
	res := &KnownBiasResult{Tau: opt.Tau}
	if res.Tau <= 0 {
		res.Tau = start.Tau
	}
	d, k := A.Dims()
	p := &kbProblem{A: A, v: v, b: b, d: d, k: k, tau: res.Tau, z: make([]float64, d)}
	c := append([]float64(nil), start.C...)
	c, r, f := p.gaussNewton(c, opt, res)
	if !opt.NoRefit {
		c, r = p.refit(c, r, opt, res)
		f = p.objective(r)
	}
	res.C, res.Objective = c, f
	res.E = make([]float64, d)
	for i, t := range r {
		res.E[i] = softThreshold(t, p.tau)
		if res.E[i] != 0 {
			res.Outliers++
		}
	}
	res.Gradient = p.stationarity(r, res.E, opt.NoRefit)
	if !res.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("Gauss–Newton stopped after %d iterations without converging", res.Iterations))
	}
	if res.Outliers > d/2 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d entries were flagged as outliers: τ = %.3g is probably too small, or the start was poor", res.Outliers, d, p.tau))
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// checkKnownBias checks the shapes and finiteness of A, v and b.
func checkKnownBias(A *mat.Dense, v, b []float64) error {
	if A == nil || A.IsEmpty() {
		return fmt.Errorf("%w: A is nil or empty", ErrInput)
	}
	d, _ := A.Dims()
	if len(v) != d || len(b) != d {
		return fmt.Errorf("%w: A has %d rows but v has length %d and b has length %d; all three need one entry per observed coordinate", ErrInput, d, len(v), len(b))
	}
	if err := checkFiniteMat("A", A); err != nil {
		return err
	}
	for _, nx := range []struct {
		name string
		x    []float64
	}{{"v", v}, {"b", b}} {
		name, x := nx.name, nx.x
		for i, t := range x {
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return fmt.Errorf("%w: %s[%d] = %v; remove or impute non-finite values", ErrInput, name, i, t)
			}
		}
	}
	return nil
}

// knownBiasStart fits the linear model on the rows where the unit fired
// (vᵢ > 0, so vᵢ − bᵢ = aᵢ·c + eᵢ + wᵢ) by the convex Huber solver.
func knownBiasStart(A *mat.Dense, v, b []float64, tau float64) (*Result, error) {
	d, k := A.Dims()
	var on []int
	for i, t := range v {
		if t > 0 {
			on = append(on, i)
		}
	}
	if len(on) <= k+1 {
		return nil, fmt.Errorf("%w: only %d of %d coordinates of v are positive; the known-bias fit needs more than k + 1 = %d", ErrInput, len(on), d, k+1)
	}
	Aon := mat.NewDense(len(on), k, nil)
	von := make([]float64, len(on))
	for r, i := range on {
		Aon.SetRow(r, A.RawRowView(i))
		von[r] = v[i] - b[i]
	}
	start, err := Recover(Aon, von, Options{Tau: tau, Linear: true})
	if err != nil {
		return nil, fmt.Errorf("the starting fit on the %d positive coordinates failed: %w", len(on), err)
	}
	return start, nil
}

// kbProblem is the known-bias Huber problem Σ H_τ(vᵢ − ReLU(aᵢ·c + bᵢ)). z
// holds A·c for the c of the last residual call; the gradient, Hessian and
// stationarity read it.
type kbProblem struct {
	A       *mat.Dense
	v, b, z []float64
	d, k    int
	tau     float64
}

// residual returns v − ReLU(A·c + b) and sets z = A·c.
func (p *kbProblem) residual(c []float64) []float64 {
	zv := mat.NewVecDense(p.d, p.z)
	zv.MulVec(p.A, mat.NewVecDense(p.k, c))
	r := make([]float64, p.d)
	for i := range r {
		r[i] = p.v[i] - math.Max(p.z[i]+p.b[i], 0)
	}
	return r
}

// objective is Σ H_τ(rᵢ).
func (p *kbProblem) objective(r []float64) float64 {
	tau := p.tau
	f := 0.0
	for _, t := range r {
		if a := math.Abs(t); a <= tau {
			f += t * t / 2
		} else {
			f += tau*a - tau*tau/2
		}
	}
	return f
}

// gradient is the gradient of the objective at the c of the last residual.
func (p *kbProblem) gradient(r []float64) []float64 {
	g := make([]float64, p.k)
	for i, t := range r {
		if p.z[i]+p.b[i] <= 0 {
			continue
		}
		psi := math.Max(-p.tau, math.Min(p.tau, t))
		for j, a := range p.A.RawRowView(i) {
			g[j] -= psi * a
		}
	}
	return g
}

// hessian is the generalized Hessian (k×k, row-major): the active rows
// whose residual is inside the Huber band, plus a tiny ridge that keeps it
// invertible when few are.
func (p *kbProblem) hessian(r []float64) []float64 {
	k := p.k
	h := make([]float64, k*k)
	trace := 0.0
	for i, t := range r {
		if p.z[i]+p.b[i] <= 0 || math.Abs(t) > p.tau {
			continue
		}
		row := p.A.RawRowView(i)
		for a := 0; a < k; a++ {
			for q := 0; q <= a; q++ {
				h[a*k+q] += row[a] * row[q]
			}
			trace += row[a] * row[a]
		}
	}
	for a := 0; a < k; a++ {
		h[a*k+a] += 1e-12*trace/float64(k) + 1e-300
		for q := 0; q < a; q++ {
			h[q*k+a] = h[a*k+q]
		}
	}
	return h
}

// gaussNewton runs Gauss–Newton steps with an Armijo line search from c,
// recording the iterations and convergence in res; it returns c, its
// residual and objective.
func (p *kbProblem) gaussNewton(c []float64, opt KnownBiasOptions, res *KnownBiasResult) ([]float64, []float64, float64) {
	k := p.k
	r := p.residual(c)
	f := p.objective(r)
	for res.Iterations = 1; res.Iterations <= opt.MaxIter; res.Iterations++ {
		g := p.gradient(r)
		h := p.hessian(r)
		step := make([]float64, k)
		for j := range step {
			step[j] = -g[j]
		}
		if !linalg.CholeskyInPlace(h, k) {
			break
		}
		linalg.CholeskySolveInPlace(h, k, step)
		slope := 0.0
		for j := range step {
			slope += g[j] * step[j]
		}
		t, moved := 1.0, false
		for ls := 0; ls < 40; ls++ {
			trial := make([]float64, k)
			for j := range trial {
				trial[j] = c[j] + t*step[j]
			}
			rt := p.residual(trial)
			if ft := p.objective(rt); ft <= f+1e-4*t*slope || ft < f {
				c, r, f, moved = trial, rt, ft, true
				break
			}
			t /= 2
		}
		if !moved {
			p.residual(c) // restore z for c
			res.Converged = true
			break
		}
		size := 0.0
		for j := range step {
			size = math.Max(size, math.Abs(t*step[j]))
		}
		if size <= opt.Tol*math.Max(1, vec.MaxAbs(c)) {
			res.Converged = true
			break
		}
	}
	res.Iterations = min(res.Iterations, opt.MaxIter)
	return c, r, f
}

// refit removes the bias of the Huber minimiser, the clipped pull of the
// outliers (O(τ·s/d), as in (47)), by a least-squares refit on the rows it
// kept as inliers — exact on noiseless data, the efficient estimator under
// dense noise — repeated while the inlier set changes. It counts its steps
// in res.RefitSteps and returns c and its residual.
func (p *kbProblem) refit(c, r []float64, opt KnownBiasOptions, res *KnownBiasResult) ([]float64, []float64) {
	d, k, tau := p.d, p.k, p.tau
	for round := 0; round < 20; round++ {
		keep := make([]bool, d)
		for i, t := range r {
			keep[i] = math.Abs(t) <= tau
		}
		for it := 0; it < 50; it++ {
			var rows []int
			for i := range r {
				if keep[i] && p.z[i]+p.b[i] > 0 {
					rows = append(rows, i)
				}
			}
			if len(rows) <= k {
				break
			}
			J := mat.NewDense(len(rows), k, nil)
			rr := mat.NewDense(len(rows), 1, nil)
			for q, i := range rows {
				J.SetRow(q, p.A.RawRowView(i))
				rr.Set(q, 0, r[i])
			}
			step, err := linalg.LstSq(J, rr)
			if err != nil {
				break
			}
			size := 0.0
			for j := range c {
				c[j] += step.At(j, 0)
				size = math.Max(size, math.Abs(step.At(j, 0)))
			}
			r = p.residual(c)
			res.RefitSteps++
			if size <= opt.Tol*math.Max(1, vec.MaxAbs(c)) {
				break
			}
		}
		same := true
		for i, t := range r {
			if keep[i] != (math.Abs(t) <= tau) {
				same = false
				break
			}
		}
		if same {
			break
		}
	}
	return c, r
}

// stationarity is the largest gradient entry of the problem ĉ solves — the
// Huber objective, or with the refit the least squares on the kept rows
// (weight ψ(r)/r = 1 on them, 0 on the outliers) — relative to
// max‖aᵢ‖·‖v‖₁.
func (p *kbProblem) stationarity(r, e []float64, noRefit bool) float64 {
	g := make([]float64, p.k)
	scale := 0.0
	for i, t := range r {
		scale += math.Abs(p.v[i])
		if p.z[i]+p.b[i] <= 0 {
			continue
		}
		w := math.Max(-p.tau, math.Min(p.tau, t))
		if !noRefit {
			w = 0
			if e[i] == 0 {
				w = t
			}
		}
		for j, a := range p.A.RawRowView(i) {
			g[j] += w * a
		}
	}
	rowNorm := 0.0
	for i := 0; i < p.d; i++ {
		rowNorm = math.Max(rowNorm, mat.Norm(p.A.RowView(i), 2))
	}
	return vec.MaxAbs(g) / math.Max(rowNorm*scale, 1e-300)
}

// KnownBiasBatch is RecoverKnownBiasAll's answer for n observations.
type KnownBiasBatch struct {
	// C is n×k (estimates of c*, not μ·c*), E is n×d.
	C, E   *mat.Dense
	PerRow []*KnownBiasResult
	// AllConverged reports that every row's Gauss–Newton converged;
	// MaxGradient is the worst row's stationarity.
	AllConverged bool
	MaxGradient  float64
}

// RecoverKnownBiasAll runs RecoverKnownBias on every row of V (n×d) with
// the same A and b, reporting progress after each row. Errors name the row.
func RecoverKnownBiasAll(ctx context.Context, A, V *mat.Dense, b []float64, opt KnownBiasOptions, progress func(done, total int)) (*KnownBiasBatch, error) {
	if A == nil || V == nil || A.IsEmpty() || V.IsEmpty() {
		return nil, fmt.Errorf("%w: A and V are required and must not be empty", ErrInput)
	}
	n, d := V.Dims()
	_, k := A.Dims()
	out := &KnownBiasBatch{C: mat.NewDense(n, k, nil), E: mat.NewDense(n, d, nil), AllConverged: true}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := RecoverKnownBias(A, V.RawRowView(i), b, opt)
		if err != nil {
			return nil, fmt.Errorf("observation %d: %w", i, err)
		}
		out.C.SetRow(i, r.C)
		out.E.SetRow(i, r.E)
		r.C, r.E = nil, nil
		out.PerRow = append(out.PerRow, r)
		out.AllConverged = out.AllConverged && r.Converged
		out.MaxGradient = math.Max(out.MaxGradient, r.Gradient)
		if progress != nil {
			progress(i+1, n)
		}
	}
	return out, nil
}

// Batch reports b in the shape of RecoverAll's result, so callers handle
// both variants alike: Rule "known-bias", Mu NaN (with b known ĉ estimates
// c* itself), the Gauss–Newton convergence as the certificate and the
// worst relative gradient as the stationarity.
func (b *KnownBiasBatch) Batch() *BatchResult {
	br := &BatchResult{C: b.C, E: b.E, AllCertified: b.AllConverged, MaxStationarity: b.MaxGradient}
	for _, pr := range b.PerRow {
		br.PerRow = append(br.PerRow, &Result{Tau: pr.Tau, Rule: "known-bias", Mu: math.NaN(), Outliers: pr.Outliers,
			Iterations: pr.Iterations, Converged: pr.Converged, Warnings: pr.Warnings})
	}
	return br
}
