package twolayer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/ica"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// RouteICA is the ICA route for orthonormal V* and Gaussian X (Bakshi et al.
// Alg 3): FastICA on the k output channels, a least-squares start from the
// confidently active samples of each source, then the exact polish (Alg 5,
// margin form). FitICA reports it only with a met residual certificate.
const RouteICA = "ica+polish"

// ICAOptions controls FitICA and ICAStart. The zero value works.
type ICAOptions struct {
	// Options are the learner's options (Fit passes its own); the route
	// reads Hidden, Seed, CertTol and Progress, and FitICA and ICAStart
	// validate them as Fit does (Route is ignored). Hidden 0 infers k from
	// the numerical rank of Y (the route needs U* of full column rank, so
	// k ≤ m). Seed seeds FastICA's random start (and the refinement
	// fallback); the same seed gives the same result at any GOMAXPROCS.
	// CertTol is the relative residual ‖Y − f(XVᵀ)Uᵀ‖_F/‖Y‖_F below which
	// the answer counts as exact (default as Fit's).
	Options
	// Nonlinearity is FastICA's contrast: ica.Kurtosis (g(u) = u³, the
	// default), ica.Skewness (g(u) = u²) or ica.LogCosh.
	Nonlinearity ica.Nonlinearity
	// MaxIter bounds FastICA's iterations. Default 1000 (tolerance 1e-10).
	MaxIter int
}

// ICAEstimate is the output of ICAStart: the ICA estimate of the mixing
// matrix and the approximate hidden rows it gives, plus what the polish
// reuses.
type ICAEstimate struct {
	// V is k×d, unit rows: the least-squares rows fitted to the confidently
	// active samples of each source, signs already right (positive skewness).
	V *mat.Dense
	// K is the hidden width; Inferred says whether it came from rank(Y).
	K        int
	Inferred bool
	// SingularValues of Y, descending; ExactRank reports σ_{k+1}/σ_1 < 1e-10
	// (always false when k = m).
	SingularValues []float64
	ExactRank      bool
	// Basis is an n×k orthonormal basis of the column span of Y.
	Basis *mat.Dense
	// Reduction is P (m×k), the top-k right singular vectors of Y: the k
	// channels are Y·P = ReLU(X·V*ᵀ)·(PᵀU*)ᵀ, so the mixing matrix is PᵀU*
	// with κ(PᵀU*) = κ(U*) (the paper's sketch T, chosen as in [BJW19]
	// §2.5 [impl]; a Gaussian T would inflate κ by up to k²m/δ, Lemma 6).
	Reduction *mat.Dense
	// Mixing is FastICA's estimate (k×k) of PᵀU*·Π·D for a permutation Π and
	// positive diagonal D: column i is unit i's output weights in channel
	// coordinates times the standard deviation of its activation
	// (√0.340845 for unit rows of V*). Column i matches unit i of V.
	Mixing *mat.Dense
	// Activations is n×k: column i is Mixing⁻¹ applied to the channels,
	// ≈ ReLU(X·v_i)/D_i up to the ICA error, uncentred (Ẑ of Alg 3 step 4).
	Activations *mat.Dense
	// Positives[i] is the number of confidently active samples row i is
	// fitted on (the largest 30% of column i of Activations).
	Positives []int
	// FastICA's iterations, convergence, and its final row change.
	ICAIterations int
	ICAConverged  bool
	ICAChange     float64
	Warnings      []string
}

// ICAStart runs steps 1–4 of Bakshi et al. Alg 3 ([BJW19, Alg 3]): it
// reduces Y (n×m) to k channels with its top-k right singular vectors, runs
// FastICA on them (their sources are the hidden activations, independent
// rectified Gaussians when V* has orthonormal rows and X ~ N(0, I)), signs
// each component so that its source is positively skewed (erratum §8.10:
// ICA does not identify signs, and a rectified Gaussian has skewness +1.64),
// and fits each row of V by least squares on the samples where that source is
// confidently positive.
//
// Deviation from the paper: Alg 3 thresholds Ẑ at τ = 1/poly(ℓ) and reads
// the sparsity pattern off it, which needs 1/poly ICA accuracy; FastICA's
// error is ~n^{-1/2}, so here Ẑ only gives a start for the margin-based
// exact polish (FitICA), which needs only that.
func ICAStart(ctx context.Context, X, Y *mat.Dense, opt ICAOptions) (*ICAEstimate, error) {
	if err := opt.validateRoute(); err != nil {
		return nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	return icaStart(ctx, p, opt)
}

// icaStart is ICAStart on a resolved problem.
func icaStart(ctx context.Context, p *problem, opt ICAOptions) (*ICAEstimate, error) {
	X, Y, n, m := p.X, p.Y, p.n, p.m
	red0, err := reduceOutputs(p, opt.Hidden, "the ICA route", tensorFloor)
	if err != nil {
		return nil, err
	}
	vY, k := red0.V, red0.K
	est := &ICAEstimate{SingularValues: red0.S, Warnings: red0.Warnings, Inferred: red0.Inferred, K: k, ExactRank: red0.ExactRank}
	est.Basis = red0.svd.UCols(k)
	est.Reduction = mat.DenseCopyOf(vY.Slice(0, m, 0, k))
	red := mat.NewDense(n, k, nil)
	red.Mul(Y, est.Reduction)
	if err := icaUnmix(ctx, X, red, opt, est, 0); err != nil {
		return nil, err
	}
	return est, nil
}

// icaUnmix is steps 2–4 of ICAStart on the k reduced channels red (n×k) of
// the samples X (n×d): FastICA, the uncentred sources Ẑ and the
// least-squares rows. It sets est's Mixing, Activations, V, Positives and
// FastICA fields (est.K is k) and appends to its warnings.
//
// tol is FastICA's tolerance (0: its default, 1e-10).
func icaUnmix(ctx context.Context, X, red *mat.Dense, opt ICAOptions, est *ICAEstimate, tol float64) error {
	n, d := X.Dims()
	k := est.K

	// 2–3. FastICA on the channels. A run that misses its tolerance is kept
	// (the polish's certificate, not FastICA's, decides exactness) but
	// reported.
	res, err := ica.FastICA(ctx, red, ica.Options{
		Components:   k,
		Nonlinearity: opt.Nonlinearity,
		MaxIter:      opt.MaxIter,
		Tol:          tol,
		Seed:         opt.Seed,
		Progress:     func(it, total int) { opt.progress("fastica", it, total) },
	})
	switch {
	case errors.Is(err, ica.ErrNotConverged) && res != nil:
		est.Warnings = append(est.Warnings, fmt.Sprintf("FastICA did not converge (%v); its last iterate only seeds the exact polish, whose certificate decides", err))
	case errors.Is(err, ica.ErrRankDeficient):
		return fmt.Errorf("%w: the %d output channels are rank deficient: %v", ErrInput, k, err)
	case err != nil:
		return fmt.Errorf("twolayer: FastICA: %w", err)
	}
	est.ICAIterations, est.ICAConverged, est.ICAChange = res.Iterations, res.Converged, res.Change
	est.Mixing = res.Mixing

	// 4. Ẑ = Mixing⁻¹·(channels), uncentred: the centred sources plus the
	// unmixed mean. Inactive samples sit near 0, active ones are ≈ f/D.
	var off mat.VecDense
	off.MulVec(res.Unmixing, mat.NewVecDense(k, res.Mean))
	Z := res.Sources
	for q := 0; q < n; q++ {
		row := Z.RawRowView(q)
		for i := range row {
			row[i] += off.AtVec(i)
		}
	}
	est.Activations = Z

	// Preliminary rows: least squares x_q·v = Ẑ_qi on the confidently
	// active samples. Exactly half the samples activate a unit (v·x is
	// symmetric), so the top 30% of Ẑ_i lie well inside the active set: a
	// quantile, unlike a threshold from the spread of the negative entries,
	// does not depend on how the other sources leak into this one (that
	// leakage is one-signed for some units).
	est.V = mat.NewDense(k, d, nil)
	est.Positives = make([]int, k)
	top := max(int(icaActiveQuantile*float64(n)), 1)
	col := make([]float64, n)
	scratch := make([]int, n)
	for i := 0; i < k; i++ {
		row, positives, err := icaSourceRow(ctx, X, Z, i, top, col, scratch)
		if err != nil {
			return err
		}
		est.Positives[i] = positives
		est.V.SetRow(i, row)
	}
	normalizeRows(est.V)
	return nil
}

// icaSourceRow is the preliminary row of source i (see icaUnmix): least
// squares x_q·v = Ẑ_qi on its top samples of Z, by the normal equations
// or, when they do not suffice, by QR. It returns the row and the number
// of samples it was fitted on; col and scratch are n-long buffers.
func icaSourceRow(ctx context.Context, X, Z *mat.Dense, i, top int, col []float64, scratch []int) ([]float64, int, error) {
	n, d := X.Dims()
	for q := 0; q < n; q++ {
		col[q] = Z.At(q, i)
	}
	rows := smallest(col, -1, top, scratch)
	// The normal equations (chunked Gram, no copy of the rows) suffice
	// for Gaussian samples; QR takes over when they do not.
	sol, _, err := linalg.GramLstSq(ctx, len(rows), d, 1, 0, func(lo, hi int, dst blas64.General) {
		for j := lo; j < hi; j++ {
			row := dst.Data[(j-lo)*dst.Stride : (j-lo)*dst.Stride+d+1]
			copy(row[:d], X.RawRowView(rows[j]))
			row[d] = Z.At(rows[j], i)
		}
	})
	if err != nil {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		A := mat.NewDense(len(rows), d, nil)
		b := mat.NewDense(len(rows), 1, nil)
		for j, q := range rows {
			A.SetRow(j, X.RawRowView(q))
			b.Set(j, 0, Z.At(q, i))
		}
		if sol, err = linalg.LstSq(A, b); err != nil {
			return nil, 0, fmt.Errorf("%w: the active samples of source %d do not determine a row: %v", ErrInput, i, err)
		}
	}
	return mat.Col(nil, 0, sol), len(rows), nil
}

// FitICA learns Y = ReLU(X·Vᵀ)·Uᵀ exactly for orthonormal V* and standard
// Gaussian X — Bakshi et al. Alg 3 (Theorem 4) in the practical form of
// [BJW19, Alg 3]: ICAStart (output reduction, FastICA, skewness signs,
// least-squares start), then ExactPolish (Alg 5 margin form; the paper's
// steps 4–8 threshold Ẑ at τ instead), then U by least squares (QR). If the
// polish leaves units uncertified, the start is refined by least squares
// (Refine) and polished again. The answer is returned only when every unit
// passed its own check and the relative residual over all n samples is ≤
// CertTol; otherwise the error wraps ErrNotExact and says what failed.
//
// The exact steps only need the start to be close; orthonormality is what
// makes FastICA's sources independent. A certified answer whose V is not
// orthonormal carries a warning (the route worked outside its assumption).
func FitICA(ctx context.Context, X, Y *mat.Dense, opt ICAOptions) (*Result, error) {
	if err := opt.validateRoute(); err != nil {
		return nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	return fitICA(ctx, p, opt)
}

// fitICA is FitICA on a resolved problem.
func fitICA(ctx context.Context, p *problem, opt ICAOptions) (*Result, error) {
	began := time.Now()
	X, Y := p.X, p.Y
	opt.Options = opt.Options.resolve(p)
	est, err := icaStart(ctx, p, opt)
	if err != nil {
		return nil, err
	}
	k := est.K
	res := &Result{Route: RouteICA, Warnings: errs.Texts(est.Warnings)}
	diag := &res.Diagnostics
	diag.Hidden, diag.HiddenInferred, diag.SingularValuesY = k, est.Inferred, est.SingularValues
	if k < Y.RawMatrix().Cols && !est.ExactRank {
		return nil, fmt.Errorf("%w: Y is not exactly rank %d (σ_%d/σ_1 = %.1e > %.0e): the outputs carry noise, and the ICA route is exact-only; use the noisy route", ErrNotExact, k, k+1, est.SingularValues[k]/est.SingularValues[0], p.rankTol)
	}

	ip := &icaPolisher{ctx: ctx, p: p, opt: opt, basis: est.Basis, res: res, found: &certifiedRows{}}
	found := ip.found
	if err := ip.polish(est.V, "exact polish"); err != nil {
		return nil, err
	}
	how := "every unit was polished to an exact row"
	if len(found.rows) < k {
		if err := ip.refinedStart(est.V, k); err != nil {
			return nil, err
		}
		how = "every unit was polished to an exact row after refining the ICA start"
	}
	diag.PolishedUnits = len(found.rows)
	if len(found.rows) < k {
		whys := ""
		for i, r := range diag.Units {
			if !r.OK {
				whys += fmt.Sprintf("; unit %d: %s", i, r.Why)
			}
		}
		return nil, fmt.Errorf("%w: only %d of %d units could be certified exact (is V* orthonormal, X standard Gaussian and Y noiseless?)%s", ErrNotExact, len(found.rows), k, whys)
	}
	V := mat.NewDense(k, X.RawMatrix().Cols, nil)
	for i, row := range found.rows[:k] {
		V.SetRow(i, row)
	}
	F := activations(X, V)
	Ut, err := linalg.LstSq(F, Y)
	if err != nil {
		return nil, fmt.Errorf("%w: the hidden activations are rank deficient (%v)", ErrNotExact, err)
	}
	U := mat.DenseCopyOf(Ut.T())
	resid := residualOf(F, Y, U)
	res.Certificate = Certificate{Residual: resid, Tol: opt.CertTol, Samples: X.RawMatrix().Rows, Met: resid <= opt.CertTol}
	if !res.Certificate.Met {
		return nil, fmt.Errorf("%w: every unit polished but the residual %.1e exceeds %.0e", ErrNotExact, resid, opt.CertTol)
	}
	if dev := orthonormalityGap(V); dev > 1e-6 {
		res.Warnings = append(res.Warnings, errs.Textf("the recovered V is not orthonormal (max |V·Vᵀ − I| = %.1e): the ICA route's assumption does not hold, although the residual certifies this answer", dev))
	}
	status := fmt.Sprintf("FastICA (%v) converged in %d iterations", opt.Nonlinearity, est.ICAIterations)
	if !est.ICAConverged {
		status = fmt.Sprintf("FastICA (%v) stopped unconverged after %d iterations (change %.1e)", opt.Nonlinearity, est.ICAIterations, est.ICAChange)
	}
	res.Reason = fmt.Sprintf("%s; %s; residual %.1e ≤ %.0e", status, how, resid, opt.CertTol)
	res.Model = nn.NewTwoLayer(V, U).Canonical()
	diag.CondF = linalg.Cond(F)
	res.Elapsed = time.Since(began)
	return res, nil
}

// icaPolisher holds what fitICA's polishes share: the problem, the basis
// of col(Y), the result being filled in and the rows certified so far.
type icaPolisher struct {
	ctx   context.Context
	p     *problem
	opt   ICAOptions
	basis *mat.Dense
	res   *Result
	found *certifiedRows
}

// polish runs ExactPolish from the rows start (stage names it in progress),
// adds the rows it certifies to found, and warns of the units whose
// skewness sign it corrected.
func (ip *icaPolisher) polish(start *mat.Dense, stage string) error {
	opt, res := ip.opt, ip.res
	diag := &res.Diagnostics
	Vp, reps, err := ExactPolish(ip.ctx, ip.p.X, ip.basis, start, PolishOptions{Roundoff: ip.p.roundoff, Progress: func(done, total int) { opt.progress(stage, done, total) }})
	if err != nil {
		return err
	}
	ip.found.add(Vp, reps)
	diag.Units = reps
	for i, r := range reps {
		if r.OK && r.Sign < 0 {
			res.Warnings = append(res.Warnings, errs.Textf("unit %d: the skewness sign rule gave the wrong sign (the polish corrected it)", i))
		}
		if r.OK {
			diag.InitAngleError = math.Max(diag.InitAngleError, r.Angle)
		}
	}
	return nil
}

// refinedStart looks for the units the ICA start V0 left uncertified: a
// least-squares refinement of the start (Refine) polished again.
func (ip *icaPolisher) refinedStart(V0 *mat.Dense, k int) error {
	X, Y, opt, found := ip.p.X, ip.p.Y, ip.opt, ip.found
	before := len(found.rows)
	U0, _, err := SolveU(X, Y, V0, nn.ReLU)
	if err != nil {
		return err
	}
	ref, err := Refine(ip.ctx, X, Y, V0, U0, nn.ReLU, 0, func(done, total int) { opt.progress("refine start", done, total) })
	if err != nil {
		return err
	}
	if err := ip.polish(ref.V, "exact polish (refined start)"); err != nil {
		return err
	}
	ip.res.Warnings = append(ip.res.Warnings, errs.Textf("the ICA start left %d of %d units uncertified; a least-squares refinement of the start (%d iterations) certified %d more", k-before, k, ref.Iterations, len(found.rows)-before))
	return nil
}

// icaActiveQuantile is the fraction of samples, those with the largest
// estimated activation, taken as active for the least-squares start.
const icaActiveQuantile = 0.3

// orthonormalityGap returns max |(V·Vᵀ − I)_ij|.
func orthonormalityGap(V *mat.Dense) float64 {
	var G mat.Dense
	G.Mul(V, V.T())
	r, _ := G.Dims()
	worst := 0.0
	for i := 0; i < r; i++ {
		G.Set(i, i, G.At(i, i)-1)
	}
	for _, v := range G.RawMatrix().Data {
		worst = math.Max(worst, math.Abs(v))
	}
	return worst
}
