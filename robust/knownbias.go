package robust

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

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
	if A == nil || A.IsEmpty() {
		return nil, fmt.Errorf("%w: A is nil or empty", ErrInput)
	}
	d, k := A.Dims()
	if len(v) != d || len(b) != d {
		return nil, fmt.Errorf("%w: A has %d rows but v has length %d and b has length %d; all three need one entry per observed coordinate", ErrInput, d, len(v), len(b))
	}
	if err := checkFiniteMat("A", A); err != nil {
		return nil, err
	}
	for _, nx := range []struct {
		name string
		x    []float64
	}{{"v", v}, {"b", b}} {
		name, x := nx.name, nx.x
		for i, t := range x {
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return nil, fmt.Errorf("%w: %s[%d] = %v; remove or impute non-finite values", ErrInput, name, i, t)
			}
		}
	}
	if opt.MaxIter <= 0 {
		opt.MaxIter = 100
	}
	if opt.Tol <= 0 {
		opt.Tol = 1e-12
	}

	// Start: the linear model on the rows where the unit fired.
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
	start, err := Recover(Aon, von, Options{Tau: opt.Tau, Linear: true})
	if err != nil {
		return nil, fmt.Errorf("the starting fit on the %d positive coordinates failed: %w", len(on), err)
	}
	res := &KnownBiasResult{Tau: opt.Tau}
	if res.Tau <= 0 {
		res.Tau = start.Tau
	}
	tau := res.Tau
	c := append([]float64(nil), start.C...)

	z := make([]float64, d)
	residual := func(c []float64) []float64 {
		zv := mat.NewVecDense(d, z)
		zv.MulVec(A, mat.NewVecDense(k, c))
		r := make([]float64, d)
		for i := range r {
			r[i] = v[i] - math.Max(z[i]+b[i], 0)
		}
		return r
	}
	objective := func(r []float64) float64 {
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
	gradient := func(r []float64) []float64 {
		g := make([]float64, k)
		for i, t := range r {
			if z[i]+b[i] <= 0 {
				continue
			}
			psi := math.Max(-tau, math.Min(tau, t))
			for j, a := range A.RawRowView(i) {
				g[j] -= psi * a
			}
		}
		return g
	}

	r := residual(c)
	f := objective(r)
	for res.Iterations = 1; res.Iterations <= opt.MaxIter; res.Iterations++ {
		g := gradient(r)
		// Generalized Hessian: active rows whose residual is inside the
		// Huber band; a tiny ridge keeps it invertible when few are.
		h := make([]float64, k*k)
		trace := 0.0
		for i, t := range r {
			if z[i]+b[i] <= 0 || math.Abs(t) > tau {
				continue
			}
			row := A.RawRowView(i)
			for p := 0; p < k; p++ {
				for q := 0; q <= p; q++ {
					h[p*k+q] += row[p] * row[q]
				}
				trace += row[p] * row[p]
			}
		}
		for p := 0; p < k; p++ {
			h[p*k+p] += 1e-12*trace/float64(k) + 1e-300
			for q := 0; q < p; q++ {
				h[q*k+p] = h[p*k+q]
			}
		}
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
			rt := residual(trial)
			if ft := objective(rt); ft <= f+1e-4*t*slope || ft < f {
				c, r, f, moved = trial, rt, ft, true
				break
			}
			t /= 2
		}
		if !moved {
			residual(c) // restore z for c
			res.Converged = true
			break
		}
		size := 0.0
		for j := range step {
			size = math.Max(size, math.Abs(t*step[j]))
		}
		if size <= opt.Tol*math.Max(1, maxAbs(c)) {
			res.Converged = true
			break
		}
	}
	res.Iterations = min(res.Iterations, opt.MaxIter)
	// The Huber minimiser is biased by the clipped pull of the outliers
	// (O(τ·s/d), as in (47)); a least-squares refit on the rows it kept as
	// inliers removes that bias — exact on noiseless data, the efficient
	// estimator under dense noise. Repeat while the inlier set changes.
	if !opt.NoRefit {
		for round := 0; round < 20; round++ {
			keep := make([]bool, d)
			for i, t := range r {
				keep[i] = math.Abs(t) <= tau
			}
			for it := 0; it < 50; it++ {
				var rows []int
				for i := range r {
					if keep[i] && z[i]+b[i] > 0 {
						rows = append(rows, i)
					}
				}
				if len(rows) <= k {
					break
				}
				J := mat.NewDense(len(rows), k, nil)
				rr := mat.NewDense(len(rows), 1, nil)
				for q, i := range rows {
					J.SetRow(q, A.RawRowView(i))
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
				r = residual(c)
				res.RefitSteps++
				if size <= opt.Tol*math.Max(1, maxAbs(c)) {
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
		f = objective(r)
	}
	res.C, res.Objective = c, f
	res.E = make([]float64, d)
	for i, t := range r {
		res.E[i] = softThreshold(t, tau)
		if res.E[i] != 0 {
			res.Outliers++
		}
	}
	// Stationarity of the problem ĉ solves: the Huber objective, or with the
	// refit the least squares on the kept rows (weight ψ(r)/r = 1 on them, 0
	// on the outliers), relative to max‖aᵢ‖·‖v‖₁.
	g := make([]float64, k)
	scale := 0.0
	for i, t := range r {
		scale += math.Abs(v[i])
		if z[i]+b[i] <= 0 {
			continue
		}
		w := math.Max(-tau, math.Min(tau, t))
		if !opt.NoRefit {
			w = 0
			if res.E[i] == 0 {
				w = t
			}
		}
		for j, a := range A.RawRowView(i) {
			g[j] += w * a
		}
	}
	rowNorm := 0.0
	for i := 0; i < d; i++ {
		rowNorm = math.Max(rowNorm, mat.Norm(A.RowView(i), 2))
	}
	res.Gradient = maxAbs(g) / math.Max(rowNorm*scale, 1e-300)
	if !res.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("Gauss–Newton stopped after %d iterations without converging", res.Iterations))
	}
	if res.Outliers > d/2 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d entries were flagged as outliers: τ = %.3g is probably too small, or the start was poor", res.Outliers, d, tau))
	}
	res.Elapsed = time.Since(began)
	return res, nil
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
