package generative

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
)

// Fit learns col(A) and the centred M from Y (n×d, one observation per
// row). Solver B (censored ALS) is the default: it needs no bias density and
// is fast. Options.Solver = SolverADMM runs Solver A, the paper's maximum
// likelihood with a rank constraint, which needs Options.Bias. Result.Reason
// says which ran and why. Inputs are not modified.
func Fit(ctx context.Context, Y *mat.Dense, opt Options) (*Result, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	switch opt.Solver {
	case SolverADMM:
		res, err := fitADMM(ctx, Y, opt, time.Now())
		if err != nil {
			return nil, err
		}
		res.Reason = "Solver A (maximum likelihood by ADMM) was requested"
		return res, nil
	default:
		res, err := fitALS(ctx, Y, opt, time.Now())
		if err != nil {
			return nil, err
		}
		res.Reason = "Solver B (censored ALS) is the default: it needs no bias density, and the column space does not depend on it"
		return res, nil
	}
}

// Validate checks the options without data: Rank ≥ 1, known Solver,
// OffSupport and Constraint values, finite non-negative numbers, a valid
// Bias density, and Bias given when Solver A runs. Errors wrap ErrInput.
func (o Options) Validate() error {
	if o.Rank < 1 {
		return errs.InvalidOption("Options", "Rank", "(the rank k) must be ≥ 1, got %d", o.Rank)
	}
	switch o.Solver {
	case "", SolverALS, SolverADMM:
	default:
		return errs.InvalidOption("Options", "Solver", "must be %s or %s, got %q", SolverALS, SolverADMM, o.Solver)
	}
	switch o.OffSupport {
	case "", OffConsistent, OffPaper, OffBoth:
	default:
		return errs.InvalidOption("Options", "OffSupport", "must be %s, %s or %s, got %q", OffConsistent, OffPaper, OffBoth, o.OffSupport)
	}
	switch o.Constraint {
	case "", ConstraintRank, ConstraintNuclear:
	default:
		return errs.InvalidOption("Options", "Constraint", "must be %s or %s, got %q", ConstraintRank, ConstraintNuclear, o.Constraint)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Gamma", o.Gamma}, {"Nu", o.Nu}, {"NuC", o.NuC}, {"Tau", o.Tau}, {"Rho", o.Rho}, {"Tol", o.Tol}, {"PosTol", o.PosTol}, {"CertTol", o.CertTol}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: f.name, Value: fmt.Sprint(f.v)}, " must be finite and ≥ 0")
		}
	}
	if o.MaxIter < 0 {
		return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "MaxIter", Value: strconv.Itoa(o.MaxIter)}, " must be ≥ 0")
	}
	if o.Bias != nil {
		if err := density.Validate(o.Bias); err != nil {
			return fmt.Errorf("%w: %w", ErrInput, err)
		}
	}
	if o.Solver == SolverADMM && o.Bias == nil {
		return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "Solver", Value: "admm"}, " (maximum likelihood) needs ", errs.Option{Struct: "Options", Field: "Bias"}, ", the bias density")
	}
	return nil
}

// check validates o and fills in the defaults.
func (o *Options) check() error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Solver == "" {
		o.Solver = SolverALS
	}
	if o.OffSupport == "" {
		o.OffSupport = OffConsistent
	}
	if o.Constraint == "" {
		o.Constraint = ConstraintRank
	}
	if o.Nu == 0 {
		o.Nu = 0.1
	}
	if o.Rho == 0 {
		o.Rho = 1
	}
	if o.CertTol == 0 {
		o.CertTol = 1e-6
	}
	return nil
}

// checkY validates Y (n×d, finite, non-negative, k < min(n, d), of a scale
// whose squares float64 holds: certify.CheckScale).
func checkY(Y *mat.Dense, k int) (n, d int, err error) {
	if Y == nil || Y.IsEmpty() {
		return 0, 0, fmt.Errorf("%w: Y is nil or empty", ErrInput)
	}
	n, d = Y.Dims()
	if k >= min(n, d) {
		return 0, 0, fmt.Errorf("%w: rank k = %d must be below min(n, d) = min(%d, %d); Y holds one observation (length d) per row", ErrInput, k, n, d)
	}
	for j := 0; j < n; j++ {
		for i, v := range Y.RawRowView(j) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, 0, fmt.Errorf("%w: Y has %v at row %d, column %d; remove or impute non-finite values", ErrInput, v, j, i)
			}
			if v < 0 {
				return 0, 0, fmt.Errorf("%w: Y[%d,%d] = %g is negative, but Y = ReLU(·) is ≥ 0 (is the file transposed or not a ReLU output?)", ErrInput, j, i, v)
			}
		}
	}
	return n, d, certify.CheckScale("Y", Y)
}

// FitALS runs Solver B, censored alternating least squares (ours): a
// "Tobit" relaxation of the rank-constrained ML program in the centred gauge,
// Z = V·Uᵀ + 1·oᵀ with Σ_j V_j = 0. Paper: the estimator of 000 §3.2 is the
// ML program (34); this replaces its likelihood by squared penalties with
// the same zero set on noiseless data (every exact explanation of Y of rank
// k minimises both), and adds the rank constraint (34) lacks.
func FitALS(ctx context.Context, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	if err := opt.check(); err != nil {
		return nil, err
	}
	return fitALS(ctx, Y, opt, began)
}

// fitALS is FitALS with opt already checked.
func fitALS(ctx context.Context, Y *mat.Dense, opt Options, began time.Time) (*Result, error) {
	n, d, err := checkY(Y, opt.Rank)
	if err != nil {
		return nil, err
	}
	k := opt.Rank
	p := newProblem(Y, opt.PosTol)
	if p.normO == 0 {
		return nil, fmt.Errorf("%w: Y has no positive entry: every unit is dead, nothing can be learnt", ErrInput)
	}
	cfg := alsConfig{k: k, nuc: opt.NuC, hinge: true, maxIter: opt.MaxIter, tol: opt.Tol, stage: "censored ALS", prog: opt.Progress}
	if cfg.maxIter == 0 {
		cfg.maxIter = 500
	}
	if cfg.tol == 0 {
		cfg.tol = 1e-10
	}
	st, err := runALS(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	res := resultFromFactors(p, st, k, opt)
	res.Route = RouteALS
	res.Diagnostics.Iterations, res.Diagnostics.Converged, res.Diagnostics.Objective = st.iters, st.conv, st.obj
	if !st.conv {
		res.Warnings = append(res.Warnings, fmt.Sprintf("censored ALS stopped after %d sweeps without meeting its tolerance", st.iters))
	}
	finish(res, p, opt, n, d)
	res.Elapsed = time.Since(began)
	return res, nil
}

// resultFromFactors turns Z = V·Uᵀ + 1·oᵀ into a Result.
func resultFromFactors(p *problem, st *alsState, k int, opt Options) *Result {
	n, d := p.n, p.d
	U := mat.NewDense(d, k, append([]float64(nil), st.u...))
	V := mat.NewDense(n, k, append([]float64(nil), st.v...))
	mc := mat.NewDense(n, d, nil)
	mc.Mul(V, U.T())
	res := &Result{Factor: U, Codes: V, MCentred: mc, Offset: append([]float64(nil), st.o...)}
	return res
}

// finish fills the basis, certificate, diagnostics and the prior-chosen
// gauge of a result whose MCentred and Offset are set.
func finish(res *Result, p *problem, opt Options, n, d int) {
	k := opt.Rank
	diag := &res.Diagnostics
	diag.N, diag.D, diag.K = n, d, k
	for _, s := range p.s {
		if s == 0 {
			diag.DeadRows++
		}
		if s <= k {
			diag.RarelyActive++
		}
		if s >= k+2 {
			diag.WellObserved++
		}
		if s == n {
			diag.FullyActive++
		}
	}
	pos := 0
	for _, s := range p.s {
		pos += s
	}
	diag.FractionPositive = float64(pos) / float64(n*d)
	if diag.RarelyActive > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d units are active on at most k = %d observations (%d never): their rows of A are essentially not identifiable from the data", diag.RarelyActive, d, k, diag.DeadRows))
	}
	// Basis: top-k left singular vectors of the centred M̂ (in R^d).
	if _, s, v, err := linalg.ThinSVD(res.MCentred); err == nil {
		diag.SingularValues = append([]float64(nil), s[:min(k+1, len(s))]...)
		res.Basis = mat.DenseCopyOf(v.Slice(0, d, 0, k))
	} else {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the SVD of the fitted M failed (%v); no basis", err))
	}
	if res.Factor == nil && res.Basis != nil {
		res.Factor = mat.DenseCopyOf(res.Basis)
	}
	if res.Codes == nil && res.Basis != nil {
		res.Codes = mat.NewDense(n, k, nil)
		res.Codes.Mul(res.MCentred, res.Basis)
	}
	// Certificate: does Ẑ = M̂c + 1ôᵀ explain Y?
	var eq, viol float64
	mc := res.MCentred.RawMatrix()
	for j := 0; j < n; j++ {
		for i := 0; i < d; i++ {
			z := mc.Data[j*mc.Stride+i] + res.Offset[i]
			if p.pos[j*d+i] {
				eq += (z - p.y[j*d+i]) * (z - p.y[j*d+i])
			} else {
				viol = math.Max(viol, z+opt.NuC)
			}
		}
	}
	c := &res.Certificate
	c.EqualityResidual = math.Sqrt(eq) / p.normO
	c.CensorViolation = viol / p.maxY
	c.Tol = opt.CertTol
	c.Met = c.EqualityResidual <= c.Tol && c.CensorViolation <= c.Tol
	if opt.Bias != nil {
		gamma := opt.Gamma
		if gamma == 0 {
			gamma = defaultGamma(p, opt.Bias)
		}
		if diag.Gamma == 0 {
			diag.Gamma = gamma
		}
		if 2*gamma >= opt.Nu {
			diag.Theorem3Bound = density.Theorem3Bound(opt.Bias, diag.Gamma, opt.Nu, d, 0)
		}
		if res.M == nil {
			gaugeFix(res, opt.Bias)
		}
	}
}

// defaultGamma is max(Y) plus the larger |quantile| of the bias at 1e-3 and
// 1 − 1e-3: on the positive entries M = Y − b, so this bounds ‖M‖_∞ unless
// a bias falls outside its central 99.8%.
func defaultGamma(p *problem, bias density.Density) float64 {
	q := math.Max(math.Abs(bias.Quantile(1e-3)), math.Abs(bias.Quantile(1-1e-3)))
	return p.maxY + q
}

// gaugeFix picks w maximising Σ_i log p(ô_i − (Ûw)_i) (the ML
// chooses the gauge through the prior) and sets Bias = ô − Ûw and
// M = M̂c + 1·(Ûw)ᵀ. Rows the factor does not touch only add constants.
func gaugeFix(res *Result, bias density.Density) {
	U := res.Factor
	d, k := U.Dims()
	o := res.Offset
	f := func(w []float64) float64 {
		s := 0.0
		for i := 0; i < d; i++ {
			b := o[i]
			for l := 0; l < k; l++ {
				b -= U.At(i, l) * w[l]
			}
			s -= bias.LogPDF(b)
		}
		return s
	}
	grad := func(g, w []float64) {
		for l := range g {
			g[l] = 0
		}
		for i := 0; i < d; i++ {
			b := o[i]
			for l := 0; l < k; l++ {
				b -= U.At(i, l) * w[l]
			}
			sc := bias.Score(b)
			for l := 0; l < k; l++ {
				g[l] += sc * U.At(i, l)
			}
		}
	}
	w0 := make([]float64, k)
	if math.IsInf(f(w0), 1) {
		res.Warnings = append(res.Warnings, "the fitted offsets fall outside the bias density's support: the gauge of M and the bias estimate were not computed")
		return
	}
	r, err := optimize.Minimize(optimize.Problem{Func: f, Grad: grad}, w0, &optimize.Settings{MajorIterations: 200}, &optimize.BFGS{})
	w := w0
	if err == nil || (r != nil && f(r.X) < f(w0)) {
		w = r.X
	}
	uw := make([]float64, d)
	for i := 0; i < d; i++ {
		for l := 0; l < k; l++ {
			uw[i] += U.At(i, l) * w[l]
		}
	}
	res.Bias = make([]float64, d)
	for i := range res.Bias {
		res.Bias[i] = o[i] - uw[i]
	}
	n, _ := res.MCentred.Dims()
	res.M = mat.DenseCopyOf(res.MCentred)
	for j := 0; j < n; j++ {
		row := res.M.RawRowView(j)
		for i := range row {
			row[i] += uw[i]
		}
	}
	ss := 0.0
	for _, x := range uw {
		ss += x * x
	}
	res.Diagnostics.GaugeShift = math.Sqrt(ss)
}
