package generative

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/linalg"
)

// rowInfo is the per-neuron data of the ML program in index form ([MR18, (24)–(29)]).
type rowInfo struct {
	s          int
	ymin, ymax float64
	kappa      float64 // off-support bound X_ij ≤ κ_i − β_i
	lo, hi     float64 // feasible interval of β_i (rows with s ≥ 1)
}

// rowInfos computes the per-row constants and feasible intervals, and
// returns an error wrapping ErrInfeasible naming the first row whose
// interval is empty.
func rowInfos(p *problem, bias density.Density, gamma, nu, nuc float64, off OffSupport) ([]rowInfo, error) {
	sLo, sHi := bias.Support()
	rows := make([]rowInfo, p.d)
	for i := range rows {
		r := &rows[i]
		r.s = p.s[i]
		if r.s == 0 {
			continue
		}
		r.ymin, r.ymax = math.Inf(1), math.Inf(-1)
		for j := 0; j < p.n; j++ {
			if p.posT[i*p.n+j] {
				y := p.yT[i*p.n+j]
				r.ymin = math.Min(r.ymin, y)
				r.ymax = math.Max(r.ymax, y)
			}
		}
		switch off {
		case OffPaper:
			r.kappa = r.ymin - nu
		case OffBoth:
			r.kappa = math.Min(-nuc, r.ymin-nu)
		default:
			r.kappa = -nuc
		}
		r.lo, r.hi = r.ymax-gamma, r.ymin+gamma
		if r.s < p.n {
			r.hi = math.Min(r.hi, r.kappa+gamma)
		}
		r.lo, r.hi = math.Max(r.lo, sLo), math.Min(r.hi, sHi)
		if !(r.lo <= r.hi) {
			return nil, errs.Options(ErrInfeasible, fmt.Sprintf("unit %d (column %d of Y) has positive entries in [%.4g, %.4g], so its bias must lie in [%.4g, %.4g] (∩ the support [%g, %g] of %s), which is empty: increase γ = %.4g (",
				i, i, r.ymin, r.ymax, r.ymax-gamma, math.Min(r.ymin+gamma, r.kappa+gamma), sLo, sHi, bias.Name(), gamma), errs.Option{Struct: "Options", Field: "Gamma"}, ")")
		}
	}
	return rows, nil
}

// LogLikelihood is the log-likelihood of [MR18, (34)], simplified, in index form,
// L(X, β) = Σ_{i: s_i ≥ 1} log p(β_i) + Σ_{i: s_i = 0} log F_B(−max_j X_ji),
// for X (n×d in this package's layout) on the feasible set, where β_i is
// the implied bias of neuron i. Constants (L_Y(0)) are dropped.
func LogLikelihood(Y, X *mat.Dense, beta []float64, bias density.Density, posTol float64) float64 {
	n, d := Y.Dims()
	sum := 0.0
	for i := 0; i < d; i++ {
		active, mx := false, math.Inf(-1)
		for j := 0; j < n; j++ {
			if Y.At(j, i) > posTol {
				active = true
			}
			mx = math.Max(mx, X.At(j, i))
		}
		if active {
			sum += bias.LogPDF(beta[i])
		} else {
			sum += bias.LogCDF(-mx)
		}
	}
	return sum
}

// LogLikelihoodSorted is the literal (33) with order statistics and the
// corrected index of [MR18, (29)] (the printed X_{i,(2)} should be X_{i,(1)}): for a neuron with s_i ≥ 1 positive
// entries it is log p(Y_(s_i) − X_(s_i)) (on the feasible set the shift
// Y_(s) − X_(s) is the same for every s ≤ s_i: the implied bias), and for a
// dead neuron log F(∞, X*) = log F_B(−max X). It sorts every row and exists
// to check LogLikelihood.
func LogLikelihoodSorted(Y, X *mat.Dense, bias density.Density, posTol float64) float64 {
	n, d := Y.Dims()
	sum := 0.0
	for i := 0; i < d; i++ {
		type pair struct{ y, x float64 }
		col := make([]pair, n)
		s := 0
		for j := 0; j < n; j++ {
			col[j] = pair{Y.At(j, i), X.At(j, i)}
			if col[j].y > posTol {
				s++
			}
		}
		if s == 0 {
			mx := math.Inf(-1)
			for _, c := range col {
				mx = math.Max(mx, c.x)
			}
			sum += bias.LogCDF(-mx)
			continue
		}
		// Order statistics of X: the top s entries sit where Y is positive
		// (feasibility), in the same order; Y_(s) − X_(s) is the bias.
		ys := make([]float64, n)
		xs := make([]float64, n)
		for j, c := range col {
			ys[j], xs[j] = c.y, c.x
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(ys)))
		sort.Sort(sort.Reverse(sort.Float64Slice(xs)))
		sum += bias.LogPDF(ys[s-1] - xs[s-1])
	}
	return sum
}

// Feasibility is how far (X, β) is from the constraint set [MR18, (29)]
// (n×d layout): the largest violation of each constraint.
type Feasibility struct {
	Equality   float64 `json:"equality"`   // max |X_ji − (Y_ji − β_i)| on positives
	Consistent float64 `json:"consistent"` // max (X_ji + β_i + ν_c)_+ on zeros: (K)
	PaperGap   float64 `json:"paper_gap"`  // max (X_ji − (min_Ω X_i − ν))_+ on zeros: (P)
	Box        float64 `json:"box"`        // max (|X_ji| − γ)_+: (B)
}

// CheckFeasible measures (X, β) against (E), (K) with margin ν_c, (P) with
// margin ν, and (B) with bound γ ([MR18, (29)]; the truth (M, b) has zero
// Equality, Consistent and Box violations, and zero PaperGap iff every row's
// gaps are ≥ ν).
func CheckFeasible(Y, X *mat.Dense, beta []float64, gamma, nu, nuc, posTol float64) Feasibility {
	n, d := Y.Dims()
	var f Feasibility
	for i := 0; i < d; i++ {
		minOmega := math.Inf(1)
		for j := 0; j < n; j++ {
			if Y.At(j, i) > posTol {
				minOmega = math.Min(minOmega, X.At(j, i))
			}
		}
		for j := 0; j < n; j++ {
			x := X.At(j, i)
			f.Box = math.Max(f.Box, math.Abs(x)-gamma)
			if Y.At(j, i) > posTol {
				f.Equality = math.Max(f.Equality, math.Abs(x-(Y.At(j, i)-beta[i])))
			} else {
				f.Consistent = math.Max(f.Consistent, x+beta[i]+nuc)
				if !math.IsInf(minOmega, 1) {
					f.PaperGap = math.Max(f.PaperGap, x-(minOmega-nu))
				}
			}
		}
	}
	f.Box, f.Consistent, f.PaperGap = math.Max(f.Box, 0), math.Max(f.Consistent, 0), math.Max(f.PaperGap, 0)
	return f
}

// FitADMM is Solver A: the maximum-likelihood program (34) of
// Mazumdar–Rawat in the simplified index form
//
//	maximise Σ_{s_i ≥ 1} log p(β_i) + Σ_{s_i = 0} log F_B(−max_j X_ij)
//	subject to (E), (K or P), (B) and rank(X) ≤ k or ‖X‖_* ≤ τ,
//
// by ADMM on the split X = Z: a row-separable (X, β)-step (bisection on the
// monotone derivative of a 1-D convex function per neuron), a projection of
// Z onto the low-rank set, and residual balancing of ρ. Differs from the
// paper: (34) as printed has no rank or nuclear constraint and is then
// under-determined; the constraint is added here.
func FitADMM(ctx context.Context, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	if err := opt.check(); err != nil {
		return nil, err
	}
	return fitADMM(ctx, Y, opt, began)
}

// fitADMM is FitADMM with opt already checked.
func fitADMM(ctx context.Context, Y *mat.Dense, opt Options, began time.Time) (*Result, error) {
	if opt.Bias == nil {
		return nil, fmt.Errorf("%w: Solver A needs the bias density", ErrInput)
	}
	n, d, err := checkY(Y, opt.Rank)
	if err != nil {
		return nil, err
	}
	s, err := newADMMRun(Y, opt, n, d)
	if err != nil {
		return nil, err
	}
	iters, converged := 0, false
	var rPri, rDual float64
	for it := 1; it <= s.opt.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.rowStep()
		if err := s.project(); err != nil {
			return nil, err
		}
		var epsPri, epsDual float64
		rPri, rDual, epsPri, epsDual = s.dualStep()
		iters = it
		if opt.Progress != nil && it%10 == 0 {
			opt.Progress("maximum likelihood (ADMM)", it, s.opt.MaxIter)
		}
		if it > 1 && rPri <= epsPri && rDual <= epsDual {
			converged = true
			break
		}
		if it%10 == 0 {
			s.balance(rPri, rDual)
		}
	}
	res := s.result(iters, converged)
	p := s.p
	if !converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("ADMM stopped after %d iterations without converging (primal residual %.2e, dual %.2e)", iters, rPri, rDual))
	}
	finish(res, p, opt, n, d)
	res.Elapsed = time.Since(began)
	return res, nil
}

// admmRow is the (X, β)-step for one neuron:
// given the target row t, the optimal x for a fixed β is explicit, and β
// minimises a 1-D convex function whose derivative is bisected.
func admmRow(p *problem, r *rowInfo, bias density.Density, gamma, rho float64, t, x []float64, beta *float64, i int) {
	n := p.n
	if r.s == 0 {
		// ψ'(m) = RevHazard(−m) − ρΣ_j[t_j − m]_+ over m ∈ [−γ, γ].
		dpsi := func(m float64) float64 {
			s := 0.0
			for _, tj := range t {
				if tj > m {
					s += tj - m
				}
			}
			return bias.RevHazard(-m) - rho*s
		}
		m := bisect(dpsi, -gamma, gamma)
		for j, tj := range t {
			x[j] = math.Max(-gamma, math.Min(tj, m))
		}
		// The bias is only known to lie below −max x; report the mode of p
		// truncated there.
		*beta = math.Min(bias.Mode(), -m)
		return
	}
	y, pos := p.yT[i*n:(i+1)*n], p.posT[i*n:(i+1)*n]
	kappa := r.kappa
	dphi := func(b float64) float64 {
		g := -bias.Score(b)
		for j := 0; j < n; j++ {
			if pos[j] {
				g += rho * (b + t[j] - y[j])
			} else if kappa-b < gamma {
				if v := t[j] - kappa + b; v > 0 {
					g += rho * v
				}
			}
		}
		return g
	}
	b := bisect(dphi, r.lo, r.hi)
	*beta = b
	u := math.Min(gamma, kappa-b)
	for j := 0; j < n; j++ {
		if pos[j] {
			x[j] = y[j] - b
		} else {
			x[j] = math.Max(-gamma, math.Min(t[j], u))
		}
	}
}

// bisect returns the root of the nondecreasing g on [lo, hi], or the end
// where g keeps one sign.
func bisect(g func(float64) float64, lo, hi float64) float64 {
	if g(lo) >= 0 {
		return lo
	}
	if g(hi) <= 0 {
		return hi
	}
	for it := 0; it < 100 && hi-lo > 1e-13*math.Max(1, math.Abs(lo)+math.Abs(hi)); it++ {
		mid := lo + (hi-lo)/2
		if g(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}

// ProjectNuclearBall returns the Euclidean projection of W onto
// {Z : ‖Z‖_* ≤ τ}: the singular values are projected onto
// {σ ≥ 0, Σσ ≤ τ} by the sort-based simplex projection (Duchi et al. 2008)
// and the singular vectors kept (the Z-update).
func ProjectNuclearBall(W *mat.Dense, tau float64) (*mat.Dense, error) {
	if W == nil || W.IsEmpty() || !(tau >= 0) {
		return nil, fmt.Errorf("%w: nil or empty matrix, or radius %v < 0", ErrInput, tau)
	}
	return projectNuclear(W, tau)
}

func projectNuclear(W *mat.Dense, tau float64) (*mat.Dense, error) {
	u, s, v, err := linalg.ThinSVD(W)
	if err != nil {
		return nil, err
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	if sum <= tau {
		return mat.DenseCopyOf(W), nil
	}
	// θ with Σ max(σ_i − θ, 0) = τ (s is sorted descending).
	theta, cum := 0.0, 0.0
	for i, x := range s {
		cum += x
		t := (cum - tau) / float64(i+1)
		if i == len(s)-1 || s[i+1] <= t {
			theta = t
			break
		}
	}
	r, c := W.Dims()
	out := mat.NewDense(r, c, nil)
	us := mat.DenseCopyOf(u)
	for j := range s {
		f := math.Max(s[j]-theta, 0)
		for i := 0; i < r; i++ {
			us.Set(i, j, us.At(i, j)*f)
		}
	}
	out.Mul(us, v.T())
	return out, nil
}

// admmRun is the state of one FitADMM run, in the paper's d×n layout: the
// iterates X, Z, the scaled dual U, the previous Z and a scratch T (all d·n,
// row i = neuron i), the biases β, the penalty ρ and the warm start q of the
// rank-k projection.
type admmRun struct {
	p    *problem
	rows []rowInfo
	// opt are the caller's options with ADMM's defaults filled in (Gamma,
	// MaxIter, Tol as ε_rel, Tau).
	opt     Options
	n, d, k int
	// rho is the current penalty, from opt.Rho, balanced as ADMM runs.
	rho            float64
	X, Z, U, Zp, T []float64
	beta           []float64
	q              *mat.Dense
	qInit          bool
}

// admmEpsAbs is the absolute tolerance of ADMM's residual tests.
const admmEpsAbs = 1e-7

// newADMMRun resolves the defaults (γ, iterations, tolerance, τ), builds the
// per-neuron data and the start Z₀.
func newADMMRun(Y *mat.Dense, opt Options, n, d int) (*admmRun, error) {
	k := opt.Rank
	p := newProblem(Y, opt.PosTol)
	if opt.Gamma == 0 {
		opt.Gamma = defaultGamma(p, opt.Bias)
	}
	rows, err := rowInfos(p, opt.Bias, opt.Gamma, opt.Nu, opt.NuC, opt.OffSupport)
	if err != nil {
		return nil, err
	}
	if opt.MaxIter == 0 {
		opt.MaxIter = 2000
	}
	if opt.Tol == 0 {
		opt.Tol = 1e-5
	}
	if opt.Tau == 0 {
		opt.Tau = opt.Gamma * math.Sqrt(float64(k*d*n))
	}
	s := &admmRun{p: p, rows: rows, opt: opt, n: n, d: d, k: k, rho: opt.Rho}
	N := d * n
	s.X, s.Z, s.U, s.Zp, s.T = make([]float64, N), make([]float64, N), make([]float64, N), make([]float64, N), make([]float64, N)
	s.beta = make([]float64, d)
	s.q = mat.NewDense(d, k, nil)
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// start sets Z₀ = the rank-k part of the row-centred Y plus each row's mean
// (the SVD(YP⊥) initialisation).
func (s *admmRun) start() error {
	d, n, k := s.d, s.n, s.k
	yc := mat.NewDense(d, n, append([]float64(nil), s.p.yT...))
	mean := make([]float64, d)
	for i := 0; i < d; i++ {
		row := yc.RawRowView(i)
		for _, v := range row {
			mean[i] += v / float64(n)
		}
		for j := range row {
			row[j] -= mean[i]
		}
	}
	uk, sk, vk, err := linalg.TopK(yc, k)
	if err != nil {
		return fmt.Errorf("initial SVD: %w", err)
	}
	for i := 0; i < d; i++ {
		for j := 0; j < n; j++ {
			v := 0.0
			for l := 0; l < k; l++ {
				v += uk.At(i, l) * sk[l] * vk.At(j, l)
			}
			s.Z[i*n+j] = v
		}
	}
	return nil
}

// rowStep is the row-separable (X, β)-step, in parallel over neurons.
func (s *admmRun) rowStep() {
	n := s.n
	for l := range s.T {
		s.T[l] = s.Z[l] - s.U[l]
	}
	parallel.For(s.d, func(_, i int) {
		admmRow(s.p, &s.rows[i], s.opt.Bias, s.opt.Gamma, s.rho, s.T[i*n:(i+1)*n], s.X[i*n:(i+1)*n], &s.beta[i], i)
	})
}

// project is the Z-step: Z = the projection of X + U onto the nuclear ball
// or, by default, the rank-k set (two warm-started power iterations after
// the first exact top-k SVD). The previous Z is kept in Zp.
func (s *admmRun) project() error {
	d, n, k := s.d, s.n, s.k
	copy(s.Zp, s.Z)
	W := make([]float64, d*n)
	for l := range W {
		W[l] = s.X[l] + s.U[l]
	}
	wm := mat.NewDense(d, n, W)
	if s.opt.Constraint == ConstraintNuclear {
		zm, err := projectNuclear(wm, s.opt.Tau)
		if err != nil {
			return err
		}
		copy(s.Z, zm.RawMatrix().Data)
		return nil
	}
	if !s.qInit {
		uk, _, _, err := linalg.TopK(wm, k)
		if err != nil {
			return err
		}
		s.q.Copy(uk)
		s.qInit = true
	} else {
		for pw := 0; pw < 2; pw++ {
			var t1 mat.Dense
			t1.Mul(wm.T(), s.q)
			var t2 mat.Dense
			t2.Mul(wm, &t1)
			var qr mat.QR
			qr.Factorize(&t2)
			var qq mat.Dense
			qr.QTo(&qq)
			s.q.Copy(qq.Slice(0, d, 0, k))
		}
	}
	var c mat.Dense
	c.Mul(s.q.T(), wm)
	zm := mat.NewDense(d, n, s.Z)
	zm.Mul(s.q, &c)
	return nil
}

// dualStep updates the scaled dual U and returns the primal and dual
// residuals and their tolerances (Boyd et al.'s stopping rule).
func (s *admmRun) dualStep() (rPri, rDual, epsPri, epsDual float64) {
	X, Z, U, Zp := s.X, s.Z, s.U, s.Zp
	var nx, nz, nu2, dd, dz float64
	for l := range X {
		U[l] += X[l] - Z[l]
		dd += (X[l] - Z[l]) * (X[l] - Z[l])
		dz += (Z[l] - Zp[l]) * (Z[l] - Zp[l])
		nx += X[l] * X[l]
		nz += Z[l] * Z[l]
		nu2 += U[l] * U[l]
	}
	N := len(X)
	rPri, rDual = math.Sqrt(dd), s.rho*math.Sqrt(dz)
	epsPri = admmEpsAbs*math.Sqrt(float64(N)) + s.opt.Tol*math.Max(math.Sqrt(nx), math.Sqrt(nz))
	epsDual = admmEpsAbs*math.Sqrt(float64(N)) + s.opt.Tol*s.rho*math.Sqrt(nu2)
	return rPri, rDual, epsPri, epsDual
}

// balance doubles or halves ρ (rescaling U) when one residual exceeds the
// other tenfold.
func (s *admmRun) balance(rPri, rDual float64) {
	switch {
	case rPri > 10*rDual:
		s.rho *= 2
		for l := range s.U {
			s.U[l] /= 2
		}
	case rDual > 10*rPri:
		s.rho /= 2
		for l := range s.U {
			s.U[l] *= 2
		}
	}
}

// result turns the final Z and β into a Result: M̂ = Z (low rank),
// transposed to n×d, its centred form and offset, and the objective.
func (s *admmRun) result(iters int, converged bool) *Result {
	d, n, Z, beta := s.d, s.n, s.Z, s.beta
	Mhat := mat.NewDense(n, d, nil)
	for i := 0; i < d; i++ {
		for j := 0; j < n; j++ {
			Mhat.Set(j, i, Z[i*n+j])
		}
	}
	mc := mat.DenseCopyOf(Mhat)
	centreColumns(mc)
	offset := make([]float64, d)
	for i := 0; i < d; i++ {
		for j := 0; j < n; j++ {
			offset[i] += Z[i*n+j] / float64(n)
		}
		offset[i] += beta[i]
	}
	res := &Result{MCentred: mc, Offset: offset, M: Mhat, Bias: beta, Route: RouteADMM}
	res.Diagnostics.Gamma, res.Diagnostics.Rho = s.opt.Gamma, s.rho
	res.Diagnostics.Iterations, res.Diagnostics.Converged = iters, converged
	obj := 0.0
	for i := 0; i < d; i++ {
		if s.rows[i].s > 0 {
			obj += s.opt.Bias.LogPDF(beta[i])
		} else {
			mx := math.Inf(-1)
			for j := 0; j < n; j++ {
				mx = math.Max(mx, Z[i*n+j])
			}
			obj += s.opt.Bias.LogCDF(-mx)
		}
	}
	res.Diagnostics.Objective = obj
	return res
}
