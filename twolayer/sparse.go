package twolayer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/rpca"
)

// RouteSparse is the sparse-noise route: robust PCA of Y, the exact route on
// the cleaned outputs, and output weights by ℓ1 regression on the original Y.
const RouteSparse = "rpca+tensor+polish+l1"

// sparseFlagTol: after the fit, an entry of Y counts as corrupted when its
// residual exceeds sparseFlagTol·rms(Y). Exact fits leave ~1e-15·rms on
// clean entries, so anything far above rounding but below this is reported
// through the certificate's residual rather than flagged.
const sparseFlagTol = 1e-6

// SparseOptions controls FitSparse. The zero value works.
type SparseOptions struct {
	// Options are the usual learner options (Hidden, Seed, Whiten, CertTol,
	// Progress); Route is ignored.
	Options
	// RPCA tunes the principal component pursuit; its Rank defaults to
	// Options.Hidden and its Progress to Options.Progress (stage "rpca").
	RPCA rpca.Options
	// MaxCorrupted is the largest fraction of flagged entries the
	// certificate accepts. Default 0.25 (PCP's guarantees need a small
	// constant fraction).
	MaxCorrupted float64
}

// SparseDiagnostics reports what the sparse-noise route found.
type SparseDiagnostics struct {
	// PCPIterations, PCPConverged, PCPResidual and PCPRank describe the
	// robust PCA; Debiased reports that its exact refit was accepted.
	PCPIterations int     `json:"pcp_iterations"`
	PCPConverged  bool    `json:"pcp_converged"`
	PCPResidual   float64 `json:"pcp_residual"`
	PCPRank       int     `json:"pcp_rank"`
	Debiased      bool    `json:"debiased"`
	// PCPFlagged is the number of entries PCP put in S.
	PCPFlagged int `json:"pcp_flagged"`
	// Flagged is the number of entries of Y whose residual under the final
	// network exceeds 1e-6·rms(Y), and FlaggedFraction that over n·m.
	Flagged         int     `json:"flagged"`
	FlaggedFraction float64 `json:"flagged_fraction"`
	// FullResidual is ‖Y − ReLU(XVᵀ)Uᵀ‖_F/‖Y‖_F over all entries, corrupted
	// ones included (large by design).
	FullResidual float64 `json:"full_residual"`
	// L1Zeros is, per output, the number of samples the ℓ1 regression for
	// U fitted exactly.
	L1Zeros []int `json:"l1_zeros"`
	// Mask is the row-major n·m mask of the flagged entries.
	Mask []bool `json:"-"`
}

// SparseResult is a Result plus the sparse route's diagnostics. The
// embedded Result is what Fit-style callers use (&sr.Result).
type SparseResult struct {
	Result
	Sparse SparseDiagnostics
}

// FitSparse learns Y = ReLU(X·Vᵀ)·Uᵀ + E exactly when E is sparse: a
// fraction of the entries of Y carry arbitrary corruptions at random
// positions (Bakshi et al. §8, Theorem 14 and Corollary 8; [BJW19, §8]
// P4). Steps:
//
//  1. Principal component pursuit splits Y = L + S (rpca.PCP, inexact
//     augmented Lagrangian), followed by the exact refit of L on the entries
//     not flagged as corrupted (rpca.Debias, our addition).
//  2. The exact route (TensorStart + ExactPolish, with its retries) runs on
//     the cleaned L, which is exactly ReLU(X·V*ᵀ)·U*ᵀ once the debias
//     succeeds.
//  3. U is the row-wise ℓ1 regression of the original Y on ReLU(X·Vᵀ)
//     (linalg.L1Regress): it ignores the corrupted entries, so U is exact
//     even if step 1 mis-flagged a few entries.
//  4. Certificate: the residual on the entries not flagged as corrupted
//     (|residual| ≤ 1e-6·rms(Y)), which must be ≤ CertTol, and the flagged
//     fraction, which must be ≤ MaxCorrupted.
//
// Deviations from the paper: PCP is solved by the augmented Lagrangian
// rather than an interior-point method; the debias refit and the ℓ1
// regression for U (exact under sparse corruption) are not in the paper; the
// paper requires U* with orthonormal, incoherent columns and k ≤
// m/(μ̄·log² n), which is not checked (the certificate is). Failure to
// certify returns an error wrapping ErrNotExact; when the failure is the
// final certificate, the uncertified result is returned alongside the error
// for inspection. Inputs are not modified.
func FitSparse(ctx context.Context, X, Y *mat.Dense, opt SparseOptions) (*SparseResult, error) {
	if err := opt.validateRoute(); err != nil {
		return nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	return fitSparse(ctx, p, opt)
}

// fitSparse is FitSparse on a resolved problem.
func fitSparse(ctx context.Context, p *problem, opt SparseOptions) (*SparseResult, error) {
	began := time.Now()
	o := opt.Options.withDefaults()
	o.Route = "auto"
	X, Y, n, m := p.X, p.Y, p.n, p.m
	if opt.MaxCorrupted < 0 || opt.MaxCorrupted >= 1 || math.IsNaN(opt.MaxCorrupted) {
		return nil, fmt.Errorf("%w: MaxCorrupted %v must be in [0, 1) (0 means 0.25)", ErrInput, opt.MaxCorrupted)
	}
	if opt.MaxCorrupted == 0 {
		opt.MaxCorrupted = 0.25
	}
	if o.Hidden >= m {
		return nil, fmt.Errorf("%w: the sparse-noise route needs k < m to tell the low-rank part from corruptions, got k = %d, m = %d", ErrInput, o.Hidden, m)
	}
	sr := &SparseResult{}
	res := &sr.Result
	sd := &sr.Sparse
	pc, err := sparsePCP(ctx, Y, opt, o, sr)
	if err != nil {
		return nil, err
	}
	if o.Hidden == 0 {
		o.Hidden = pc.Rank
	}
	L := pc.L
	st, err := TensorStart(ctx, X, L, o)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, errs.Texts(st.Warnings)...)
	diag := &res.Diagnostics
	diag.Hidden, diag.HiddenInferred = st.K, opt.Hidden == 0
	diag.SingularValuesY = st.SingularValues
	diag.TensorOrder = st.Order
	diag.Whitened, diag.CondCovariance = st.Whitened, st.CondCov
	diag.JennrichTries, diag.JennrichGap = st.JennrichTries, st.JennrichGap
	V, _, _, _, reason, ok, err := exactRoute(ctx, X, L, certify.Float64Roundoff, st, o, res, false, &certifiedRows{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: on the robust-PCA outputs (PCP residual %.1e, %d entries flagged, debias accepted %v): %s", ErrNotExact, pc.Residual, pc.NNZ, sd.Debiased, reason)
	}
	F := activations(X, V)
	o.progress("l1 regression", 0, 1)
	Ut, rep, err := linalg.L1Regress(F, Y, linalg.L1Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: ℓ1 regression for U: %v", ErrNotExact, err)
	}
	o.progress("l1 regression", 1, 1)
	U := mat.DenseCopyOf(Ut.T())
	sd.L1Zeros = rep.Zeros

	var P mat.Dense
	P.Mul(F, U.T())
	num, den := flagUnexplained(Y, &P, sd)
	res.Certificate.Residual = math.Sqrt(num / math.Max(den, math.SmallestNonzeroFloat64))
	res.Certificate.Tol = o.CertTol
	res.Certificate.Samples = n
	res.Certificate.Met = res.Certificate.Residual <= o.CertTol && sd.FlaggedFraction <= opt.MaxCorrupted
	diag.CondF = linalg.Cond(F)
	res.Model = nn.NewTwoLayer(V, U).Canonical()
	res.Route = RouteSparse
	res.Reason = fmt.Sprintf("robust PCA (%d iterations, rank %d, %d entries flagged, debiased %v) then %s; U by ℓ1 regression on the original Y: residual %.1e on the %.2f%% of entries not flagged as corrupted",
		pc.Iterations, pc.Rank, pc.NNZ, sd.Debiased, reason, res.Certificate.Residual, 100*(1-sd.FlaggedFraction))
	if sd.Flagged != pc.NNZ {
		res.Warnings = append(res.Warnings, errs.Textf("robust PCA flagged %d entries, the final network leaves %d unexplained", pc.NNZ, sd.Flagged))
	}
	res.Elapsed = time.Since(began)
	if !res.Certificate.Met {
		return sr, fmt.Errorf("%w: residual %.1e on the unflagged entries (tol %.0e), %.1f%% of entries flagged (max %.0f%%)", ErrNotExact, res.Certificate.Residual, o.CertTol, 100*sd.FlaggedFraction, 100*opt.MaxCorrupted)
	}
	return sr, nil
}

// sparsePCP is the sparse route's first step (§8): robust PCA (rpca.PCP)
// splits Y into a low-rank part and sparse corruptions. Its figures and
// warnings go into sr; a result with no low-rank part, or with more than
// opt.MaxCorrupted of the entries flagged, is an error wrapping ErrNotExact.
func sparsePCP(ctx context.Context, Y *mat.Dense, opt SparseOptions, o Options, sr *SparseResult) (*rpca.Result, error) {
	ro := opt.RPCA
	if ro.Rank == 0 {
		ro.Rank = o.Hidden
	}
	if ro.Progress == nil && o.Progress != nil {
		ro.Progress = func(it, maxIter int, _ float64) { o.Progress("rpca", it, maxIter) }
	}
	pc, err := rpca.PCP(ctx, Y, ro)
	if err != nil {
		if errors.Is(err, rpca.ErrInput) {
			return nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		return nil, err
	}
	res := &sr.Result
	sd := &sr.Sparse
	sd.PCPIterations, sd.PCPConverged, sd.PCPResidual, sd.PCPRank = pc.Iterations, pc.Converged, pc.Residual, pc.Rank
	sd.Debiased = pc.Debias != nil && pc.Debias.Accepted
	sd.PCPFlagged = pc.NNZ
	for _, w := range pc.Warnings {
		res.Warnings = append(res.Warnings, errs.Message{"robust PCA: " + w})
	}
	if pc.Rank == 0 {
		return nil, fmt.Errorf("%w: robust PCA found no low-rank part in Y", ErrNotExact)
	}
	n, m := Y.Dims()
	if frac := float64(pc.NNZ) / float64(n*m); frac > opt.MaxCorrupted {
		return nil, fmt.Errorf("%w: robust PCA put %.0f%% of the entries of Y in the sparse part (more than %.0f%%): Y is not a low-rank matrix plus sparse corruption; principal component pursuit needs the rank (%d here) well below m = %d and the corruption confined to a small fraction of the entries", ErrNotExact, 100*frac, 100*opt.MaxCorrupted, pc.Rank, m)
	}
	return pc, nil
}

// flagUnexplained prepares the sparse route's certificate on the entries
// the final network (outputs P) does not explain: an entry whose residual
// exceeds sparseFlagTol·rms(Y) is flagged in sd.Mask; num and den are the
// squared residual and squared Y over the unflagged entries. It sets
// sd's flag count, fraction and full relative residual.
func flagUnexplained(Y, P *mat.Dense, sd *SparseDiagnostics) (num, den float64) {
	n, m := Y.Dims()
	rms := 0.0
	yd := Y.RawMatrix()
	for i := 0; i < n; i++ {
		for _, v := range yd.Data[i*yd.Stride : i*yd.Stride+m] {
			rms += v * v
		}
	}
	full := math.Sqrt(rms)
	rms = math.Sqrt(rms / float64(n*m))
	sd.Mask = make([]bool, n*m)
	all := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			y := Y.At(i, j)
			e := y - P.At(i, j)
			all += e * e
			if math.Abs(e) > sparseFlagTol*rms {
				sd.Mask[i*m+j] = true
				sd.Flagged++
				continue
			}
			num += e * e
			den += y * y
		}
	}
	sd.FlaggedFraction = float64(sd.Flagged) / float64(n*m)
	sd.FullResidual = math.Sqrt(all) / full
	return num, den
}
