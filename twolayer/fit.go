package twolayer

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Fit learns Y ≈ ReLU(X·Vᵀ)·Uᵀ and chooses the route from the data:
//
//   - If Y is exactly rank k (σ_{k+1}/σ_1 < 1e-10; or k = m, where rank cannot
//     tell), the tensor start is polished to an exact answer (Alg 4 + Alg 5).
//     The route is RouteExact only if every unit passed its own check and the
//     relative residual over all samples is ≤ CertTol. If some unit failed,
//     the start is first refined by least squares and polished again.
//   - Otherwise (noise), or if the polish cannot certify, the noisy route runs:
//     signs by projections (Alg 6), U by least squares (Lemma 20), and with
//     Options.Refine a local refinement whose effect is reported separately.
//
// Result.Reason says which branch was taken and why. Route "exact" returns an
// error wrapping ErrNotExact instead of falling back. Inputs are not modified.
func Fit(ctx context.Context, X, Y *mat.Dense, opt Options) (*Result, error) {
	began := time.Now()
	opt = opt.withDefaults()
	if err := opt.check(); err != nil {
		return nil, err
	}
	st, err := TensorStart(ctx, X, Y, opt)
	if err != nil {
		return nil, err
	}
	k, m := st.K, Y.RawMatrix().Cols
	res := &Result{Warnings: append([]string{}, st.Warnings...)}
	diag := &res.Diagnostics
	diag.Hidden, diag.HiddenInferred = k, st.Inferred
	diag.SingularValuesY = st.SingularValues
	diag.TensorOrder = st.Order
	diag.Whitened, diag.CondCovariance = st.Whitened, st.CondCov
	diag.JennrichTries, diag.JennrichGap = st.JennrichTries, st.JennrichGap
	if st.JennrichGap < 1e-3 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the tensor decomposition's eigenvalue gap is small (%.1e): the start may be inaccurate", st.JennrichGap))
	}

	finish := func(V, U *mat.Dense) (*Result, error) {
		res.Model = nn.NewTwoLayer(V, U).Canonical()
		res.Certificate.Residual = relResidual(X, Y, V, U)
		res.Certificate.Tol = opt.CertTol
		res.Certificate.Samples = X.RawMatrix().Rows
		res.Certificate.Met = res.Route == RouteExact && res.Certificate.Residual <= opt.CertTol
		_, cond, err := SolveU(X, Y, V)
		if err == nil {
			diag.CondF = cond
		}
		res.Elapsed = time.Since(began)
		return res, nil
	}

	tryExact := opt.Route != "noisy"
	why := ""
	if tryExact && k < m && !st.ExactRank {
		tryExact = false
		why = fmt.Sprintf("Y is not exactly rank %d (σ_%d/σ_1 = %.1e > %.0e): the outputs carry noise", k, k+1, st.SingularValues[k]/st.SingularValues[0], exactRankTol)
	}
	if tryExact {
		V, U, reason, ok, err := exactRoute(ctx, X, Y, st, opt, res)
		if err != nil {
			return nil, err
		}
		if ok {
			res.Route, res.Reason = RouteExact, reason
			return finish(V, U)
		}
		why = reason
	}
	if opt.Route == "exact" {
		return nil, fmt.Errorf("%w: %s", ErrNotExact, why)
	}
	if opt.Route == "noisy" {
		why = "the noisy route was requested"
	}

	V, U, err := noisyRoute(ctx, X, Y, st.V, opt, res)
	if err != nil {
		return nil, err
	}
	res.Route, res.Reason = RouteNoisy, why
	return finish(V, U)
}

// exactRoute polishes the start; if units fail, it refines by least squares
// and polishes once more. ok reports a certified exact answer.
func exactRoute(ctx context.Context, X, Y *mat.Dense, st *Start, opt Options, res *Result) (V, U *mat.Dense, reason string, ok bool, err error) {
	attempt := func(start *mat.Dense) (V, U *mat.Dense, failed []int, resid float64, err error) {
		V, reps, err := ExactPolish(ctx, X, st.Basis, start, func(done, total int) { opt.progress("exact polish", done, total) })
		if err != nil {
			return nil, nil, nil, 0, err
		}
		maxAngle := 0.0
		for i, r := range reps {
			if !r.OK {
				failed = append(failed, i)
			}
			maxAngle = math.Max(maxAngle, r.Angle)
		}
		res.Diagnostics.PolishedUnits = len(reps) - len(failed)
		res.Diagnostics.Units = reps
		res.Diagnostics.InitAngleError = maxAngle
		if len(failed) > 0 {
			return nil, nil, failed, 0, nil
		}
		U, _, err = SolveU(X, Y, V)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		return V, U, nil, relResidual(X, Y, V, U), nil
	}
	V, U, failed, resid, err := attempt(st.V)
	if err != nil {
		return nil, nil, "", false, err
	}
	if len(failed) == 0 && resid <= opt.CertTol {
		return V, U, fmt.Sprintf("Y is exactly rank %d and every unit was polished to an exact row; residual %.1e ≤ %.0e", st.K, resid, opt.CertTol), true, nil
	}
	if len(failed) == 0 {
		return nil, nil, fmt.Sprintf("every unit polished but the residual %.1e exceeds %.0e", resid, opt.CertTol), false, nil
	}
	if len(failed) == st.K {
		return nil, nil, "no unit could be polished to an exact row: the data are not exactly a ReLU network of this width (noise?)", false, nil
	}
	// Second chance: a least-squares refinement moves a rough start into the
	// polish's margin.
	Vs, _, err := RecoverSigns(ctx, X, Y, st.V)
	if err != nil {
		return nil, nil, "", false, err
	}
	Us, _, err := SolveU(X, Y, Vs)
	if err != nil {
		return nil, nil, "", false, err
	}
	ref, err := Refine(ctx, X, Y, Vs, Us, 0, func(done, total int) { opt.progress("refine start", done, total) })
	if err != nil {
		return nil, nil, "", false, err
	}
	V, U, failed2, resid, err := attempt(ref.V)
	if err != nil {
		return nil, nil, "", false, err
	}
	if len(failed2) == 0 && resid <= opt.CertTol {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the tensor start was too rough for units %v; a least-squares refinement (%d iterations) brought it within the polish margin", failed, ref.Iterations))
		return V, U, fmt.Sprintf("Y is exactly rank %d and every unit was polished to an exact row after refining the start; residual %.1e ≤ %.0e", st.K, resid, opt.CertTol), true, nil
	}
	return nil, nil, fmt.Sprintf("the exact polish could not certify units %v even after refining the start (wrong sign, noise, or too few samples)", failed2), false, nil
}

// noisyRoute is Alg 6 + Lemma 20, optionally refined.
func noisyRoute(ctx context.Context, X, Y, Vstart *mat.Dense, opt Options, res *Result) (V, U *mat.Dense, err error) {
	V, _, err = RecoverSigns(ctx, X, Y, Vstart)
	if err != nil {
		return nil, nil, err
	}
	U, _, err = SolveU(X, Y, V)
	if err != nil {
		return nil, nil, err
	}
	if !opt.Refine {
		res.Warnings = append(res.Warnings, "this is the paper's moment estimate, which is consistent but statistically inefficient; the optional refinement (Options.Refine, --refine) usually lowers the weight error 10–100× on noisy data")
		return V, U, nil
	}
	ref, err := Refine(ctx, X, Y, V, U, 0, func(done, total int) { opt.progress("refine", done, total) })
	if err != nil {
		return nil, nil, err
	}
	res.Diagnostics.ResidualBeforeRefine = ref.Before
	res.Diagnostics.RefineIterations = ref.Iterations
	res.Diagnostics.RefineConverged = ref.Converged
	if !ref.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the refinement stopped without converging (%s after %d iterations)", ref.Status, ref.Iterations))
	}
	if ref.After > ref.Before {
		res.Warnings = append(res.Warnings, "the refinement did not lower the residual; keeping the unrefined estimate")
		return V, U, nil
	}
	return ref.V, ref.U, nil
}
