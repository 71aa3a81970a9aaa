package rpca

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

// ErrInput marks errors caused by the caller's data or options: a nil or
// empty matrix, NaN/Inf entries, negative or non-finite options. The CLI maps
// it to exit code 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// Options controls PCP. The zero value works; the defaults are those of
// Candès–Li–Ma–Wright 2011 and the inexact ALM of Lin–Chen–Ma 2010.
type Options struct {
	// Lambda is the weight of ‖S‖₁. Default 1/√max(n, m) (Candès, Li, Ma,
	// Wright 2011; [BJW19, §8] omits λ).
	Lambda float64
	// Mu0 is the initial penalty μ of the augmented Lagrangian. Default
	// 1.25/‖A‖₂ (Lin, Chen, Ma 2010).
	Mu0 float64
	// Rho is the factor μ grows by each iteration. Default 1.5; must be ≥ 1.
	Rho float64
	// MuMax caps μ. Default 1e7·Mu0.
	MuMax float64
	// Tol stops the iteration when ‖A − L − S‖_F/‖A‖_F < Tol. Default 1e-9.
	Tol float64
	// MaxIter bounds the iterations. Default 500.
	MaxIter int
	// Rank fixes the rank of L used by the debias step. 0 (default) takes
	// the numerical rank of the PCP solution L: the singular values above
	// RankTol·σ₁.
	Rank int
	// RankTol is the relative singular value threshold for the rank of L.
	// Default 1e-6.
	RankTol float64
	// NoDebias skips the debias step (see Debias) and returns the plain PCP
	// solution, which is only as accurate as Tol allows.
	NoDebias bool
	// FlagTol: the debias step starts from the entries with
	// |A − L|_ij > FlagTol·rms(A) as the corrupted set. Default 1e-6.
	FlagTol float64
	// Progress, if non-nil, is called after every iteration with the
	// iteration number, MaxIter and the current relative residual
	// ‖A − L − S‖_F/‖A‖_F.
	Progress func(iter, maxIter int, residual float64)
}

// Result is a decomposition A = L + S with L low rank and S sparse.
type Result struct {
	// L is the low-rank part and S = A − L on the flagged entries (0
	// elsewhere) after the debias step, or the PCP iterate without it.
	L, S *mat.Dense
	// Rank is the rank of L; NNZ the number of non-zero entries of S.
	Rank int
	NNZ  int
	// Flagged marks (row-major, n·m entries) the entries of S that are
	// non-zero: the entries judged corrupted.
	Flagged []bool
	// Lambda and MuFinal are the λ used and the last μ.
	Lambda, MuFinal float64
	// Iterations of the augmented Lagrangian; Converged reports that
	// ‖A − L − S‖_F/‖A‖_F fell below Tol; Residual is that ratio at the end
	// of the PCP iteration.
	Iterations int
	Converged  bool
	Residual   float64
	// SingularValues are L's non-zero singular values from the last
	// thresholding step of PCP, descending.
	SingularValues []float64
	// Debias reports the debias step (nil if it was skipped).
	Debias   *DebiasReport
	Warnings []string
}

// PCP decomposes A (n×m) into a low-rank L plus a sparse S by principal
// component pursuit, min ‖L‖_* + λ‖S‖₁ subject to L + S = A (Candès, Li, Ma,
// Wright 2011), which is step 1 of Bakshi et al.'s sparse-noise algorithm
// [BJW19, §8, Theorem 14]. It is solved by the inexact augmented
// Lagrangian method (Lin, Chen, Ma 2010):
//
//	L ← SVT_{1/μ}(A − S + Λ/μ),  S ← soft_{λ/μ}(A − L + Λ/μ),
//	Λ ← Λ + μ(A − L − S),        μ ← min(ρμ, μ_max),
//
// until ‖A − L − S‖_F/‖A‖_F < Tol. The singular value thresholding goes
// through the Gram matrix of the short side (m×m when n ≥ m), so each
// iteration costs one n·m² Gram product, an m×m symmetric eigensolve and
// 4·n·m·r flops for the rank-r result — never an SVD of the n×m matrix.
//
// Deviation from the paper: the paper solves the program by an interior-point
// method; the augmented Lagrangian is the practical solver. Our addition: unless NoDebias, the PCP answer is then made exact
// by Debias (refit of a rank-r L on the entries not flagged as corrupted),
// because PCP alone is accurate only to about Tol.
//
// A is not modified. Bad input gives an error wrapping ErrInput.
func PCP(ctx context.Context, A *mat.Dense, opt Options) (*Result, error) {
	a, n, m, err := checkMatrix(A)
	if err != nil {
		return nil, err
	}
	if err := opt.fill(n, m); err != nil {
		return nil, err
	}
	nm := n * m
	normF := 0.0
	maxAbs := 0.0
	for _, v := range a {
		normF += v * v
		maxAbs = math.Max(maxAbs, math.Abs(v))
	}
	normF = math.Sqrt(normF)
	res := &Result{Lambda: opt.Lambda, L: mat.NewDense(n, m, nil), S: mat.NewDense(n, m, nil), Flagged: make([]bool, nm)}
	if normF == 0 {
		res.Converged = true
		return res, nil
	}
	sv, err := pcpIterate(ctx, a, res, opt, normF, maxAbs)
	if err != nil {
		return nil, err
	}
	res.SingularValues = sv
	if !res.Converged {
		res.Warnings = append(res.Warnings, fmt.Sprintf("PCP stopped after %d iterations with relative residual %.1e > tol %.0e", res.Iterations, res.Residual, opt.Tol))
	}
	res.Rank = 0
	for _, s := range sv {
		if s > opt.RankTol*sv[0] {
			res.Rank++
		}
	}
	if err := res.applyDebias(ctx, A, opt); err != nil {
		return nil, err
	}
	// S is A − L on the flagged entries, so that L + S = A there exactly.
	L, S := res.L.RawMatrix().Data, res.S.RawMatrix().Data
	res.NNZ = 0
	for i := range S {
		if res.Flagged[i] {
			S[i] = a[i] - L[i]
			res.NNZ++
		} else {
			S[i] = 0
		}
	}
	return res, nil
}

// pcpIterate runs the inexact augmented Lagrangian iteration (Lin, Chen,
// Ma 2010, Algorithm 5) on a (A row-major; ‖A‖_F = normF, max |A| =
// maxAbs) until the relative residual falls below opt.Tol or opt.MaxIter
// iterations, writing L and S into res with the iteration count, residual
// and final μ. It returns the singular values of the last thresholding.
func pcpIterate(ctx context.Context, a []float64, res *Result, opt Options, normF, maxAbs float64) ([]float64, error) {
	n, m := res.L.Dims()
	nm := n * m
	ws := newSVT(n, m)
	norm2 := ws.norm2(a)
	mu := opt.Mu0
	if mu == 0 {
		mu = 1.25 / norm2
	}
	muMax := opt.MuMax
	if muMax == 0 {
		muMax = 1e7 * mu
	}
	lambda := opt.Lambda
	// Dual start Λ₀ = A/J(A), J = max(‖A‖₂, ‖A‖_∞/λ): the largest multiple
	// of A that is dual feasible (Lin, Chen, Ma 2010, Algorithm 5).
	dual := make([]float64, nm)
	J := math.Max(norm2, maxAbs/lambda)
	for i, v := range a {
		dual[i] = v / J
	}
	L := res.L.RawMatrix().Data
	S := res.S.RawMatrix().Data
	Z := make([]float64, nm)
	var sv []float64
	var err error
	for it := 1; it <= opt.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		inv := 1 / mu
		for i := range Z {
			Z[i] = a[i] - S[i] + inv*dual[i]
		}
		sv, err = ws.threshold(Z, inv, L)
		if err != nil {
			return nil, err
		}
		thr := lambda * inv
		rr := 0.0
		for i := range Z {
			t := a[i] - L[i] + inv*dual[i]
			switch {
			case t > thr:
				S[i] = t - thr
			case t < -thr:
				S[i] = t + thr
			default:
				S[i] = 0
			}
			r := a[i] - L[i] - S[i]
			dual[i] += mu * r
			rr += r * r
		}
		res.Iterations = it
		res.Residual = math.Sqrt(rr) / normF
		res.MuFinal = mu
		mu = math.Min(opt.Rho*mu, muMax)
		if opt.Progress != nil {
			opt.Progress(it, opt.MaxIter, res.Residual)
		}
		if res.Residual < opt.Tol {
			res.Converged = true
			break
		}
	}
	return sv, nil
}

// applyDebias makes the PCP answer exact unless opt.NoDebias: Debias refits a
// rank-r L (r = opt.Rank, else the rank PCP found) on the entries not
// flagged as corrupted, and its flags replace PCP's when accepted;
// otherwise the flagged entries are those where S is non-zero.
func (res *Result) applyDebias(ctx context.Context, A *mat.Dense, opt Options) error {
	n, m := A.Dims()
	rank := res.Rank
	if opt.Rank > 0 {
		rank = opt.Rank
	}
	if !opt.NoDebias && rank > 0 && rank < min(n, m) {
		L2, rep, err := Debias(ctx, A, res.L, rank, DebiasOptions{FlagTol: opt.FlagTol})
		if err != nil {
			return err
		}
		res.Debias = rep
		if rep.Accepted {
			res.L = L2
			res.Rank = rank
			copy(res.Flagged, rep.Flagged)
			if rep.Warning != "" {
				res.Warnings = append(res.Warnings, "debias: "+rep.Warning)
			}
		} else {
			res.Warnings = append(res.Warnings, "debias step rejected: "+rep.Why)
		}
	} else if !opt.NoDebias && opt.Rank == 0 && rank == 0 {
		res.Warnings = append(res.Warnings, "PCP returned L = 0: no low-rank part was found (λ too small for the data?)")
	}
	if res.Debias == nil || !res.Debias.Accepted {
		for i, v := range res.S.RawMatrix().Data {
			res.Flagged[i] = v != 0
		}
	}
	return nil
}

// Validate checks the options without data: finite non-negative numbers
// (0 means the default), MaxIter and Rank ≥ 0, and Rho ≥ 1 when set. Errors
// wrap ErrInput. (Rank < min(n, m) is checked by PCP against the data.)
func (o Options) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Lambda", o.Lambda}, {"Mu0", o.Mu0}, {"Rho", o.Rho}, {"MuMax", o.MuMax}, {"Tol", o.Tol}, {"RankTol", o.RankTol}, {"FlagTol", o.FlagTol}} {
		name, v := f.name, f.v
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: name, Value: fmt.Sprint(v)}, " must be finite and ≥ 0 (0 means the default)")
		}
	}
	if o.MaxIter < 0 || o.Rank < 0 {
		return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "MaxIter"}, fmt.Sprintf(" (%d) and ", o.MaxIter), errs.Option{Struct: "Options", Field: "Rank"}, fmt.Sprintf(" (%d) must be ≥ 0 (0 means the default)", o.Rank))
	}
	if o.Rho != 0 && o.Rho < 1 {
		return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "Rho", Value: fmt.Sprint(o.Rho)}, " must be ≥ 1 (μ must not shrink)")
	}
	return nil
}

// fill validates the options for an n×m matrix and applies the defaults.
func (o *Options) fill(n, m int) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Rank >= min(n, m) {
		return errs.Options(ErrInput, errs.Option{Struct: "Options", Field: "Rank", Value: strconv.Itoa(o.Rank)}, fmt.Sprintf(" must be below min(n, m) = %d for a low-rank part", min(n, m)))
	}
	if o.Lambda == 0 {
		o.Lambda = 1 / math.Sqrt(float64(max(n, m)))
	}
	if o.Rho == 0 {
		o.Rho = 1.5
	}
	if o.Tol == 0 {
		o.Tol = 1e-9
	}
	if o.MaxIter == 0 {
		o.MaxIter = 500
	}
	if o.RankTol == 0 {
		o.RankTol = 1e-6
	}
	if o.FlagTol == 0 {
		o.FlagTol = 1e-6
	}
	return nil
}

// checkMatrix returns A's entries as a contiguous row-major slice (a copy),
// after checking for nil, empty and non-finite input.
func checkMatrix(A *mat.Dense) ([]float64, int, int, error) {
	if A == nil {
		return nil, 0, 0, fmt.Errorf("%w: the matrix is nil", ErrInput)
	}
	if A.IsEmpty() {
		return nil, 0, 0, fmt.Errorf("%w: the matrix is empty", ErrInput)
	}
	n, m := A.Dims()
	a := make([]float64, n*m)
	for i := 0; i < n; i++ {
		row := A.RawRowView(i)
		for j, v := range row[:m] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, 0, fmt.Errorf("%w: entry (%d, %d) is %v; remove or impute non-finite values", ErrInput, i, j, v)
			}
		}
		copy(a[i*m:], row[:m])
	}
	return a, n, m, nil
}

// svt is the workspace of the singular value thresholding through the
// short side's Gram matrix.
type svt struct {
	n, m, p int // p = min(n, m), the Gram size
	gram    []float64
	zt      []float64 // transpose scratch (tall case)
}

func newSVT(n, m int) *svt {
	p := min(n, m)
	return &svt{n: n, m: m, p: p, gram: make([]float64, p*p)}
}

// eig returns the eigenpairs of the short-side Gram matrix of z (ZᵀZ if
// n ≥ m, else ZZᵀ), eigenvalues descending and vectors as columns of a p×p
// matrix in the same order.
func (w *svt) eig(z []float64) ([]float64, *mat.Dense, error) {
	// gonum's Dsyrk is fastest in its NoTrans form (rows of the operand
	// contiguous), so the tall case first transposes Z into scratch
	// (measured 40 ms against 53 ms for Trans on 10000×200).
	G := blas64.Symmetric{N: w.p, Stride: w.p, Data: w.gram, Uplo: blas.Upper}
	if w.n >= w.m {
		if w.zt == nil {
			w.zt = make([]float64, w.n*w.m)
		}
		for i := 0; i < w.n; i++ {
			row := z[i*w.m : (i+1)*w.m]
			for j, v := range row {
				w.zt[j*w.n+i] = v
			}
		}
		blas64.Syrk(blas.NoTrans, 1, blas64.General{Rows: w.m, Cols: w.n, Stride: w.n, Data: w.zt}, 0, G)
	} else {
		blas64.Syrk(blas.NoTrans, 1, blas64.General{Rows: w.n, Cols: w.m, Stride: w.m, Data: z}, 0, G)
	}
	var e mat.EigenSym
	if !e.Factorize(mat.NewSymDense(w.p, w.gram), true) {
		return nil, nil, errors.New("rpca: symmetric eigensolver did not converge")
	}
	vals := e.Values(nil)
	var vec mat.Dense
	e.VectorsTo(&vec)
	p := w.p
	// Reverse to descending order.
	desc := make([]float64, p)
	V := mat.NewDense(p, p, nil)
	for j := 0; j < p; j++ {
		desc[j] = vals[p-1-j]
		for i := 0; i < p; i++ {
			V.Set(i, j, vec.At(i, p-1-j))
		}
	}
	return desc, V, nil
}

// norm2 returns ‖A‖₂.
func (w *svt) norm2(a []float64) float64 {
	lam, _, err := w.eig(a)
	if err != nil || lam[0] <= 0 {
		// Fall back to the Frobenius norm, an upper bound; only the start
		// of μ and of the dual depend on it.
		s := 0.0
		for _, v := range a {
			s += v * v
		}
		return math.Sqrt(s)
	}
	return math.Sqrt(lam[0])
}

// threshold writes SVT_τ(Z) = Σ_{σᵢ>τ} (σᵢ − τ)·uᵢvᵢᵀ into out and returns
// the kept σᵢ − τ. With V_r the kept right singular vectors (n ≥ m),
// SVT_τ(Z) = (Z·V_r)·diag((σ − τ)/σ)·V_rᵀ; symmetrically for n < m.
func (w *svt) threshold(z []float64, tau float64, out []float64) ([]float64, error) {
	lam, V, err := w.eig(z)
	if err != nil {
		return nil, err
	}
	r := 0
	var kept, scale []float64
	for _, l := range lam {
		s := math.Sqrt(math.Max(l, 0))
		if s <= tau {
			break
		}
		kept = append(kept, s-tau)
		scale = append(scale, (s-tau)/s)
		r++
	}
	for i := range out {
		out[i] = 0
	}
	if r == 0 {
		return kept, nil
	}
	Z := mat.NewDense(w.n, w.m, z)
	Vr := V.Slice(0, w.p, 0, r)
	O := mat.NewDense(w.n, w.m, out)
	if w.n >= w.m {
		var W mat.Dense
		W.Mul(Z, Vr) // n×r
		for j := 0; j < r; j++ {
			for i := 0; i < w.n; i++ {
				W.Set(i, j, W.At(i, j)*scale[j])
			}
		}
		O.Mul(&W, Vr.T())
	} else {
		var W mat.Dense
		W.Mul(Vr.T(), Z) // r×m
		for j := 0; j < r; j++ {
			row := W.RawRowView(j)
			for i := range row {
				row[i] *= scale[j]
			}
		}
		O.Mul(Vr, &W)
	}
	return kept, nil
}
