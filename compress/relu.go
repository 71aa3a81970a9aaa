package compress

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/hermite"
)

// ReLUOptions tunes Alg 5 (ReLUMLE, MethodReLU). The zero value works.
type ReLUOptions struct {
	// Sigma is the noise standard deviation σ of the observation model
	// Z = ReLU(X̌M + G). 0 estimates it as the RMS residual of rank-r least
	// squares on the positive entries (the paper leaves σ to the user),
	// floored at 1e-3 of the RMS target.
	Sigma float64
	// Constraint is the set Ψ (α, τ). Its zero value here means no box and
	// no nuclear constraint (Ψ = col(X̌)), the practical choice; set Alpha or
	// Tau (or Kappa) to impose them as in Theorem 4.9.
	Constraint ConvexOptions
	// MaxIter bounds the accelerated gradient iterations. Default 300.
	MaxIter int
	// Tol is the relative change of the iterate at which to stop. Default
	// 1e-6.
	Tol float64
}

// MLEInfo reports a ReLUMLE solve.
type MLEInfo struct {
	Sigma      float64 `json:"sigma"`
	Iterations int     `json:"iterations"`
	Converged  bool    `json:"converged"`
	Objective  float64 `json:"objective"` // F(Ŷ), see TobitObjective
	Restarts   int     `json:"restarts"`
}

// TobitObjective returns F(Y) = Σ_{Z>0} ½(Z − Y)² + Σ_{Z=0} −σ²·log(1 − Φ(Y/σ)),
// the negative censored-Gaussian log-likelihood of (P′) multiplied by σ² with
// constants dropped (Appendix C), and, if grad is non-nil, writes ∇F into it:
// Y − Z on positive entries, σ·h(Y/σ) on zero ones, h the Gaussian hazard
// φ/(1 − Φ). Every second derivative lies in [0, 1] (Lemma B.1), so ∇F is
// 1-Lipschitz. The tails are evaluated with the stable log-CDF and hazard of
// package hermite (no overflow or cancellation for |Y/σ| up to 1e150).
// y, z and a non-nil grad must have the same shape; it panics otherwise (a
// programming error: ReLUMLE checks its arguments at the edge).
func TobitObjective(y, z *mat.Dense, sigma float64, grad *mat.Dense) float64 {
	r, c := y.Dims()
	if zr, zc := z.Dims(); zr != r || zc != c {
		panic(fmt.Sprintf("compress: TobitObjective: y is %d×%d but z is %d×%d; they must have the same shape", r, c, zr, zc))
	}
	if grad != nil {
		if gr, gc := grad.Dims(); gr != r || gc != c {
			panic(fmt.Sprintf("compress: TobitObjective: y is %d×%d but grad is %d×%d; they must have the same shape", r, c, gr, gc))
		}
	}
	var f float64
	s2 := sigma * sigma
	for i := 0; i < r; i++ {
		yr, zr := y.RawRowView(i)[:c], z.RawRowView(i)[:c]
		var gr []float64
		if grad != nil {
			gr = grad.RawRowView(i)[:c]
		}
		for j, yv := range yr {
			if zv := zr[j]; zv > 0 {
				d := yv - zv
				f += 0.5 * d * d
				if gr != nil {
					gr[j] = d
				}
			} else {
				t := yv / sigma
				f -= s2 * hermite.LogNormCDF(-t)
				if gr != nil {
					gr[j] = sigma * hermite.NormHazard(t)
				}
			}
		}
	}
	return f
}

// ReLUMLE returns the censored-Gaussian maximum-likelihood estimate Ŷ of the
// pre-activations X̌M from post-ReLU observations z = ReLU(X̌M + G) over Ψ
// (Alg 5; problems (P′)/(P_*) of [ZS25, §4.1, Theorem 4.9]): minimise F (see
// TobitObjective) over Y ∈ Ψ by FISTA with step 1 (∇F is 1-Lipschitz), with
// an adaptive restart whenever F increases, each step projected onto Ψ by
// ProjectPsi warm from the previous iterate (alpha = tau = +Inf leave only the
// subspace, projected exactly). The problem is strictly convex when X̌ has
// full column rank, so the estimate is unique (Lemma 4.11). Exact zeros of z
// are the censored entries, as ReLU outputs are. On hitting MaxIter the last
// iterate is returned with an error wrapping ErrNotConverged. A nil sub, a z
// that is nil, non-finite or not of the subspace's row count, or a y0 of
// another shape than z gives an error wrapping ErrInput.
func ReLUMLE(z *mat.Dense, sub *Subspace, sigma, alpha, tau float64, y0 *mat.Dense, o ReLUOptions) (*mat.Dense, MLEInfo, error) {
	if o.MaxIter == 0 {
		o.MaxIter = 300
	}
	if o.Tol == 0 {
		o.Tol = 1e-6
	}
	info := MLEInfo{Sigma: sigma}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return nil, info, fmt.Errorf("compress: ReLU MLE needs σ > 0, got %g: %w", sigma, ErrInput)
	}
	const fn = "compress.ReLUMLE"
	if err := checkSubspaceArg(fn, "z", z, sub); err != nil {
		return nil, info, err
	}
	r, c := z.Dims()
	if y0 != nil {
		if _, _, err := certify.CheckMatrix(fn, "y0", y0, r, c, fmt.Sprintf("nil or %d×%d (z's shape)", r, c)); err != nil {
			return nil, info, err
		}
	}
	onlySub := math.IsInf(alpha, 1) && math.IsInf(tau, 1)
	co := o.Constraint.withDefaults()
	proj := func(v *mat.Dense) (*mat.Dense, error) {
		if onlySub {
			return sub.Project(v), nil
		}
		p, _, err := ProjectPsi(v, sub, alpha, tau, co)
		if err != nil && p == nil {
			return nil, err
		}
		return p, nil
	}
	var y *mat.Dense
	var err error
	if y0 != nil {
		y, err = proj(y0)
	} else {
		y, err = proj(z)
	}
	if err != nil {
		return nil, info, err
	}
	v := mat.DenseCopyOf(y)
	g := mat.NewDense(r, c, nil)
	t := 1.0
	fy := TobitObjective(y, z, sigma, nil)
	for it := 1; it <= o.MaxIter; it++ {
		TobitObjective(v, z, sigma, g)
		var step mat.Dense
		step.Sub(v, g)
		yn, err := proj(&step)
		if err != nil {
			return nil, info, err
		}
		fn := TobitObjective(yn, z, sigma, nil)
		info.Iterations = it
		if fn > fy {
			// Adaptive restart (O'Donoghue & Candès 2015): drop momentum and
			// take a plain projected gradient step from y, which cannot
			// increase F with step 1/L.
			info.Restarts++
			t = 1
			TobitObjective(y, z, sigma, g)
			step.Sub(y, g)
			if yn, err = proj(&step); err != nil {
				return nil, info, err
			}
			fn = TobitObjective(yn, z, sigma, nil)
		}
		tn := (1 + math.Sqrt(1+4*t*t)) / 2
		var dlt mat.Dense
		dlt.Sub(yn, y)
		change := mat.Norm(&dlt, 2)
		v = mat.DenseCopyOf(&dlt)
		v.Scale((t-1)/tn, v)
		v.Add(v, yn)
		y, fy, t = yn, fn, tn
		if change <= o.Tol*math.Max(mat.Norm(y, 2), 1e-300) {
			info.Converged = true
			break
		}
	}
	info.Objective = fy
	if !info.Converged {
		return y, info, fmt.Errorf("compress: ReLU MLE: %d iterations without reaching tolerance %g: %w", o.MaxIter, o.Tol, ErrNotConverged)
	}
	return y, info, nil
}

// fitReLU is MethodReLU: the Tobit MLE of the pre-activations from
// Z = ReLU(XW + b) over the affine span of X̌, then Alg 2c on the estimate.
func fitReLU(p Problem, o LayerOptions) (*Fit, error) {
	ro := o.ReLU
	q := p
	q.X = headRows(p.X, ro.Constraint.MaxRows)
	q.Xc = headRows(p.Xc, ro.Constraint.MaxRows)
	y := preact(q.X, q.W, q.Bias)
	zr, zc := y.Dims()
	z := mat.NewDense(zr, zc, nil)
	z.Apply(func(_, _ int, v float64) float64 { return math.Max(v, 0) }, y)
	sub, err := NewSubspace(withOnes(q.xcheck()))
	if err != nil {
		return nil, err
	}
	// Least squares on Z: the warm start, and the σ heuristic.
	ls, err := fitOnTarget(q, o, z)
	if err != nil {
		return nil, err
	}
	r := o.Rank
	if r <= 0 {
		r = ls.MaxRank()
	}
	y0 := ls.Rank(r).Apply(q.xcheck())
	sigma := ro.Sigma
	if sigma == 0 {
		var ss float64
		n := 0
		for i := 0; i < zr; i++ {
			for j := 0; j < zc; j++ {
				if zv := z.At(i, j); zv > 0 {
					d := zv - y0.At(i, j)
					ss += d * d
					n++
				}
			}
		}
		rms := mat.Norm(y, 2) / math.Sqrt(float64(zr*zc))
		sigma = 1e-3 * rms
		if n > 0 {
			sigma = math.Max(sigma, math.Sqrt(ss/float64(n)))
		}
	}
	alpha, tau := math.Inf(1), math.Inf(1)
	co := ro.Constraint
	if co.Alpha != 0 || co.Tau != 0 || co.Kappa > 0 {
		if alpha, tau, err = co.radii(z, sub, o.Rank); err != nil {
			return nil, err
		}
	}
	yhat, info, merr := ReLUMLE(z, sub, sigma, alpha, tau, y0, ro)
	if merr != nil && yhat == nil {
		return nil, merr
	}
	f, err := fitOnTarget(q, o, yhat)
	if err != nil {
		return nil, err
	}
	f.Iterations, f.Converged = info.Iterations, info.Converged
	f.Warnings = append(f.Warnings, fmt.Sprintf("σ = %.4g", sigma))
	if merr != nil {
		f.Warnings = append(f.Warnings, merr.Error())
	}
	return f, nil
}
