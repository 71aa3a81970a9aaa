package rpca

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// DebiasOptions controls Debias. The zero value works.
type DebiasOptions struct {
	// FlagTol: the first corrupted set is {|A − L₀|_ij > FlagTol·rms(A)}.
	// Default 1e-6.
	FlagTol float64
	// MaxFlagFrac is the largest fraction of flagged entries accepted;
	// beyond it the data are not "low rank plus sparse" and the step is
	// rejected. Default 0.5.
	MaxFlagFrac float64
	// MaxRounds bounds the re-flag rounds (default 10) and MaxIter the
	// alternating least-squares sweeps per round (default 200).
	MaxRounds, MaxIter int
}

// DebiasReport says what Debias did.
type DebiasReport struct {
	// Accepted reports that the refit is returned; Why explains a rejection.
	Accepted bool
	Why      string
	// Flagged (row-major n·m) marks the entries judged corrupted; Count is
	// their number.
	Flagged []bool
	Count   int
	// Rounds of re-flagging and total alternating least-squares Sweeps.
	Rounds, Sweeps int
	// Warning is set when the refit is accepted although the flags had not
	// settled (MaxRounds reached).
	Warning string
	// Residual is ‖(A − L)_Ω‖_F/‖A_Ω‖_F over the unflagged entries Ω after
	// the refit; Before is the same ratio for the input L₀ on the same Ω.
	Residual, Before float64
}

// Debias refits the low-rank part exactly once the support of the sparse
// part and the rank r are known: L = argmin_{rank r} ‖(A − L)_Ω‖_F over the
// entries Ω not flagged as corrupted, by alternating least squares
// (L = C·Qᵀ, each factor solved row by row with the other held orthonormal),
// started from the top-r row space of L₀. The corrupted set starts as
// {|A − L₀| > FlagTol·rms(A)} and is re-estimated after each refit as the
// entries whose residual exceeds 10× the RMS residual on Ω (with a floor of
// 1e-12·rms(A)), until it no longer changes. When A = M + S with M exactly
// rank r and S supported off Ω, the refit returns M to rounding error,
// whereas PCP itself is only accurate to its stopping tolerance.
//
// This step is our addition, not part of Bakshi et al. or of PCP. It is the
// "debias" (refit on the estimated support) familiar from the LASSO. Its cost
// is about 4·n·m·r·(r+1) flops per sweep; it converges linearly from a good
// start (≈ 10–30 sweeps from PCP's answer at 5% corruption).
func Debias(ctx context.Context, A, L0 *mat.Dense, rank int, opt DebiasOptions) (*mat.Dense, *DebiasReport, error) {
	a, n, m, err := checkMatrix(A)
	if err != nil {
		return nil, nil, err
	}
	l0, n0, m0, err := checkMatrix(L0)
	if err != nil {
		return nil, nil, err
	}
	if n0 != n || m0 != m {
		return nil, nil, fmt.Errorf("%w: L is %d×%d but A is %d×%d", ErrInput, n0, m0, n, m)
	}
	if rank < 1 || rank >= min(n, m) {
		return nil, nil, fmt.Errorf("%w: rank %d must be in [1, min(n, m) = %d)", ErrInput, rank, min(n, m))
	}
	if opt, err = opt.withDefaults(); err != nil {
		return nil, nil, err
	}
	k := rank
	nm := n * m
	rms := 0.0
	for _, v := range a {
		rms += v * v
	}
	rms = math.Sqrt(rms / float64(nm))
	rep := &DebiasReport{Flagged: make([]bool, nm)}
	if rms == 0 {
		rep.Accepted = true
		return mat.NewDense(n, m, nil), rep, nil
	}
	flag := rep.Flagged
	thr := opt.FlagTol * rms
	for i := range a {
		flag[i] = math.Abs(a[i]-l0[i]) > thr
	}
	rep.Before = maskedResidual(a, l0, flag)

	// Start: the top-r right singular vectors of L₀ (through its m×m or
	// the n×n Gram, whichever is smaller, then mapped to the m side).
	Q, err := startBasis(l0, n, m, k)
	if err != nil {
		return nil, nil, err
	}
	r := &debiasRefit{a: a, flag: flag, n: n, m: m, k: k, Q: Q, C: make([]float64, n*k), L: make([]float64, nm), rms: rms, rep: rep}
	floor := 1e-12 * rms
	for round := 1; round <= opt.MaxRounds; round++ {
		rep.Rounds = round
		cnt := countFlags(flag)
		rep.Count = cnt
		if float64(cnt) > opt.MaxFlagFrac*float64(nm) {
			rep.Why = fmt.Sprintf("%d of %d entries (%.0f%%) look corrupted, more than MaxFlagFrac = %.0f%%: the data are not low rank plus sparse", cnt, nm, 100*float64(cnt)/float64(nm), 100*opt.MaxFlagFrac)
			return nil, rep, nil
		}
		if ok, err := r.refit(ctx, opt.MaxIter); err != nil {
			return nil, nil, err
		} else if !ok {
			return nil, rep, nil
		}
		if !r.reflag(floor) {
			break
		}
		if round == opt.MaxRounds {
			rep.Warning = fmt.Sprintf("the corrupted-entry flags were still changing after %d rounds; the refit uses the last flags", opt.MaxRounds)
		}
	}
	rep.Count = countFlags(flag)
	rep.Residual = maskedResidual(a, r.L, flag)
	if float64(rep.Count) > opt.MaxFlagFrac*float64(nm) {
		rep.Why = fmt.Sprintf("after re-flagging, %d of %d entries (%.0f%%) look corrupted, more than MaxFlagFrac = %.0f%%", rep.Count, nm, 100*float64(rep.Count)/float64(nm), 100*opt.MaxFlagFrac)
		return nil, rep, nil
	}
	rep.Accepted = true
	return mat.NewDense(n, m, r.L), rep, nil
}

// countFlags returns the number of entries flagged as corrupted.
func countFlags(flag []bool) int {
	cnt := 0
	for _, f := range flag {
		if f {
			cnt++
		}
	}
	return cnt
}

// withDefaults checks Debias's options (all ≥ 0, MaxFlagFrac ≤ 1) and
// fills in the defaults of those left zero.
func (opt DebiasOptions) withDefaults() (DebiasOptions, error) {
	if opt.FlagTol < 0 || opt.MaxFlagFrac < 0 || opt.MaxFlagFrac > 1 || opt.MaxRounds < 0 || opt.MaxIter < 0 {
		return opt, fmt.Errorf("%w: debias options must be ≥ 0 (and MaxFlagFrac ≤ 1): %+v", ErrInput, opt)
	}
	if opt.FlagTol == 0 {
		opt.FlagTol = 1e-6
	}
	if opt.MaxFlagFrac == 0 {
		opt.MaxFlagFrac = 0.5
	}
	if opt.MaxRounds == 0 {
		opt.MaxRounds = 10
	}
	if opt.MaxIter == 0 {
		opt.MaxIter = 200
	}
	return opt, nil
}

// debiasRefit holds Debias's alternating least squares: A (a, n×m
// row-major), the corrupted-entry flags, the factors L = C·Qᵀ (C n×k, Q
// m×k) and L itself.
type debiasRefit struct {
	a       []float64
	flag    []bool
	n, m, k int
	Q, C, L []float64
	rms     float64
	rep     *DebiasReport
}

// refit runs up to maxIter sweeps of alternating least squares on the
// unflagged entries, each factor solved row by row with the other held
// orthonormal. ok is false, with rep.Why set, when a row or column has
// fewer than k unflagged entries.
func (r *debiasRefit) refit(ctx context.Context, maxIter int) (ok bool, err error) {
	a, flag, n, m, k, Q, C, rms := r.a, r.flag, r.n, r.m, r.k, r.Q, r.C, r.rms
	nm := n * m
	prev := math.Inf(1)
	for it := 0; it < maxIter; it++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		r.rep.Sweeps++
		orthonormalize(Q, m, k)
		if bad := solveFactor(a, flag, n, m, k, Q, C, true); bad > 0 {
			r.rep.Why = fmt.Sprintf("%d rows have fewer than %d unflagged entries: the low-rank part is not determined there", bad, k)
			return false, nil
		}
		orthonormalize(C, n, k)
		if bad := solveFactor(a, flag, n, m, k, C, Q, false); bad > 0 {
			r.rep.Why = fmt.Sprintf("%d columns have fewer than %d unflagged entries: the low-rank part is not determined there", bad, k)
			return false, nil
		}
		product(C, Q, n, m, k, r.L)
		sse := 0.0
		for i := range a {
			if !flag[i] {
				e := a[i] - r.L[i]
				sse += e * e
			}
		}
		// Stop at rounding level or when a sweep gains < 10%: the fit
		// has stagnated (at the truth, or at a fit biased by a missed
		// corruption, which the re-flag then catches).
		if sse <= float64(nm)*(4e-16*rms)*(4e-16*rms) || sse > 0.81*prev {
			break
		}
		prev = sse
	}
	return true, nil
}

// reflag re-estimates the corrupted entries from the residual of the
// refit: those above 10× the RMS residual on the unflagged entries (at
// least floor). It reports whether any flag changed.
func (r *debiasRefit) reflag(floor float64) bool {
	a, flag := r.a, r.flag
	sse, cntIn := 0.0, 0
	for i := range a {
		if !flag[i] {
			e := a[i] - r.L[i]
			sse += e * e
			cntIn++
		}
	}
	t := math.Max(10*math.Sqrt(sse/float64(max(cntIn, 1))), floor)
	changed := false
	for i := range a {
		f := math.Abs(a[i]-r.L[i]) > t
		if f != flag[i] {
			changed = true
			flag[i] = f
		}
	}
	return changed
}

// maskedResidual returns ‖(a − l)_Ω‖/‖a_Ω‖ over the unflagged entries.
func maskedResidual(a, l []float64, flag []bool) float64 {
	num, den := 0.0, 0.0
	for i := range a {
		if !flag[i] {
			e := a[i] - l[i]
			num += e * e
			den += a[i] * a[i]
		}
	}
	if den == 0 {
		return 0
	}
	return math.Sqrt(num / den)
}

// startBasis returns an m×k row-major matrix spanning the top-k right
// singular space of the n×m matrix l.
func startBasis(l []float64, n, m, k int) ([]float64, error) {
	w := newSVT(n, m)
	_, V, err := w.eig(l)
	if err != nil {
		return nil, err
	}
	Q := make([]float64, m*k)
	if n >= m {
		for j := 0; j < m; j++ {
			for c := 0; c < k; c++ {
				Q[j*k+c] = V.At(j, c)
			}
		}
		return Q, nil
	}
	// Wide: right vectors are Lᵀ·u (unnormalised; orthonormalize fixes it).
	for i := 0; i < n; i++ {
		row := l[i*m : (i+1)*m]
		for c := 0; c < k; c++ {
			u := V.At(i, c)
			for j, v := range row {
				Q[j*k+c] += u * v
			}
		}
	}
	return Q, nil
}

// orthonormalize replaces the r×k row-major matrix f by a basis of its
// column span with orthonormal columns, by Cholesky QR applied twice
// (CholQR2: the second pass restores orthogonality to rounding for any
// κ(f) ≲ 1e6). Only the span matters to the masked solves that follow, so a
// rank-deficient f is left as is.
func orthonormalize(f []float64, r, k int) {
	g := make([]float64, k*k)
	for pass := 0; pass < 2; pass++ {
		clear(g)
		for i := 0; i < r; i++ {
			x := f[i*k : (i+1)*k]
			for p := 0; p < k; p++ {
				for s := 0; s <= p; s++ {
					g[p*k+s] += x[p] * x[s]
				}
			}
		}
		for p := 0; p < k; p++ {
			for s := p + 1; s < k; s++ {
				g[p*k+s] = g[s*k+p]
			}
		}
		if !linalg.CholeskyInPlace(g, k) {
			return
		}
		// f ← f·R⁻¹ with R = Lᵀ: solve xᵀ·Lᵀ = fᵀ row by row, i.e. L·x = f_i.
		for i := 0; i < r; i++ {
			x := f[i*k : (i+1)*k]
			for p := 0; p < k; p++ {
				t := x[p]
				for s := 0; s < p; s++ {
					t -= g[p*k+s] * x[s]
				}
				x[p] = t / g[p*k+p]
			}
		}
	}
}

// solveFactor solves, for every row (rows=true: each of the n rows of A;
// rows=false: each of the m columns), the k-dimensional least-squares
// problem on the unflagged entries against the fixed factor, writing the
// result into out. It returns the number of rows/columns whose masked Gram
// matrix was singular (those keep their previous value).
func solveFactor(a []float64, flag []bool, n, m, k int, fixed, out []float64, rows bool) int {
	bad := 0
	if rows {
		g := make([]float64, k*k)
		b := make([]float64, k)
		for i := 0; i < n; i++ {
			clear(g)
			clear(b)
			for j := 0; j < m; j++ {
				if flag[i*m+j] {
					continue
				}
				q := fixed[j*k : (j+1)*k]
				v := a[i*m+j]
				for p := 0; p < k; p++ {
					b[p] += v * q[p]
					for s := 0; s <= p; s++ {
						g[p*k+s] += q[p] * q[s]
					}
				}
			}
			if !solveSym(g, b, k) {
				bad++
				continue
			}
			copy(out[i*k:(i+1)*k], b)
		}
		return bad
	}
	// Columns: accumulate all m Gram matrices in one pass over A's rows.
	G := make([]float64, m*k*k)
	B := make([]float64, m*k)
	for i := 0; i < n; i++ {
		c := fixed[i*k : (i+1)*k]
		for j := 0; j < m; j++ {
			if flag[i*m+j] {
				continue
			}
			v := a[i*m+j]
			g := G[j*k*k : (j+1)*k*k]
			bj := B[j*k : (j+1)*k]
			for p := 0; p < k; p++ {
				bj[p] += v * c[p]
				for s := 0; s <= p; s++ {
					g[p*k+s] += c[p] * c[s]
				}
			}
		}
	}
	for j := 0; j < m; j++ {
		bj := B[j*k : (j+1)*k]
		if !solveSym(G[j*k*k:(j+1)*k*k], bj, k) {
			bad++
			continue
		}
		copy(out[j*k:(j+1)*k], bj)
	}
	return bad
}

// solveSym solves g·x = b in place (b ← x) for a symmetric positive definite
// k×k g given by its lower triangle; g is overwritten. It reports false when
// g is numerically singular.
func solveSym(g, b []float64, k int) bool {
	for p := 0; p < k; p++ {
		for s := p + 1; s < k; s++ {
			g[p*k+s] = g[s*k+p]
		}
	}
	maxDiag := 0.0
	for p := 0; p < k; p++ {
		maxDiag = math.Max(maxDiag, g[p*k+p])
	}
	if !linalg.CholeskyInPlace(g, k) {
		return false
	}
	minPiv := math.Inf(1)
	for p := 0; p < k; p++ {
		minPiv = math.Min(minPiv, g[p*k+p]*g[p*k+p])
	}
	if minPiv < 1e-12*maxDiag {
		return false
	}
	linalg.CholeskySolveInPlace(g, k, b)
	return true
}

// product writes C·Qᵀ (C n×k, Q m×k, row-major) into out (n×m).
func product(C, Q []float64, n, m, k int, out []float64) {
	for i := 0; i < n; i++ {
		c := C[i*k : (i+1)*k]
		row := out[i*m : (i+1)*m]
		for j := 0; j < m; j++ {
			q := Q[j*k : (j+1)*k]
			s := 0.0
			for p := 0; p < k; p++ {
				s += c[p] * q[p]
			}
			row[j] = s
		}
	}
}
