package compress

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
)

// ConvexOptions tunes Alg 4 (ProjectPsi, MethodConvex) and the constraint set
// of Alg 5. The zero value works.
type ConvexOptions struct {
	// Alpha is the entrywise bound α of Ψ. 0 means ‖Ỹ‖_∞, the largest
	// absolute target (the α that bounds ‖X̌N‖_∞ in [ZS25, Theorem 4.4]);
	// +Inf drops the box.
	Alpha float64
	// Tau is the nuclear-norm radius τ. 0 means the paper's α·√(r·d1·d2)
	// (Theorem 4.4), which is usually inactive; +Inf drops the constraint.
	// Kappa > 0 overrides it with the practical radius κ·‖[P_X̌Ỹ]_r‖_*.
	Tau   float64
	Kappa float64
	// MaxIter bounds Dykstra's sweeps. Default 500.
	MaxIter int
	// Tol is the relative change per sweep (and the relative feasibility gap)
	// at which Dykstra stops. Default 1e-7.
	Tol float64
	// MaxRows, when > 0, fits MethodConvex / MethodReLU on the first MaxRows
	// calibration rows only (each sweep costs an SVD of rows×d2). Default
	// 2000 in CompressMLP, all rows in FitLayer.
	MaxRows int
}

func (o ConvexOptions) withDefaults() ConvexOptions {
	if o.MaxIter == 0 {
		o.MaxIter = 500
	}
	if o.Tol == 0 {
		o.Tol = 1e-7
	}
	return o
}

// ProjectionInfo reports a projection onto Ψ.
type ProjectionInfo struct {
	Alpha float64 `json:"alpha"`
	Tau   float64 `json:"tau"`
	// Sweeps is the number of Dykstra sweeps; Converged whether Tol was met.
	Sweeps    int  `json:"sweeps"`
	Converged bool `json:"converged"`
	// Nuclear, MaxAbs and OffSubspace are ‖Ŷ‖_*, ‖Ŷ‖_∞ and ‖P⊥Ŷ‖_F of the
	// result (feasibility evidence, TestConvexProjection).
	Nuclear     float64 `json:"nuclear"`
	MaxAbs      float64 `json:"max_abs"`
	OffSubspace float64 `json:"off_subspace"`
	// NuclearActive reports whether the nuclear constraint binds (‖Ŷ‖_* ≥
	// τ(1 − 1e-6)); with the paper's radius it usually does not.
	NuclearActive bool `json:"nuclear_active"`
}

// Subspace is an orthonormal basis U (m×k) of the column space of
// calibration inputs: it applies the projector P = U·Uᵀ without forming
// the m×m matrix.
type Subspace struct{ U *mat.Dense }

// NewSubspace returns an orthonormal basis of col(x), of numerical rank
// (singular values above max(m, d)·ε·s_max). A nil, empty or non-finite x
// gives an error wrapping ErrInput.
func NewSubspace(x *mat.Dense) (*Subspace, error) {
	if _, _, err := certify.CheckMatrix("compress.NewSubspace", "x", x, -1, -1, "m×d (the calibration inputs, one row per sample)"); err != nil {
		return nil, err
	}
	u, err := linalg.Orth(x)
	if err != nil {
		return nil, fmt.Errorf("compress: basis of the calibration inputs: %w", err)
	}
	return &Subspace{U: u}, nil
}

// checkSubspaceArg checks the matrix argument name of fn against the subspace
// it is projected on: sub built by NewSubspace, y with as many rows as the
// basis and finite. Errors wrap ErrInput.
func checkSubspaceArg(fn, name string, y *mat.Dense, sub *Subspace) error {
	if sub == nil || sub.U == nil || sub.U.IsEmpty() {
		return errs.Inputf("%s: the subspace is nil or empty; expected one from compress.NewSubspace", fn)
	}
	m, _ := sub.U.Dims()
	_, _, err := certify.CheckMatrix(fn, name, y, m, -1, fmt.Sprintf("m×d2 with m = %d (the subspace's dimension)", m))
	return err
}

// Project returns P·y = U(Uᵀy).
func (s *Subspace) Project(y mat.Matrix) *mat.Dense {
	var c, out mat.Dense
	c.Mul(s.U.T(), y)
	out.Mul(s.U, &c)
	return &out
}

// ProjNuc returns the Euclidean projection of y onto the nuclear-norm ball
// {‖Y‖_* ≤ tau}: soft-thresholding of the singular values by the θ that
// makes them sum to tau (the ℓ1-ball projection of the spectrum), and ‖y‖_*.
func ProjNuc(y *mat.Dense, tau float64) (*mat.Dense, float64, error) {
	if _, _, err := certify.CheckMatrix("compress.ProjNuc", "y", y, -1, -1, "a d1×d2 matrix"); err != nil {
		return nil, 0, err
	}
	if math.IsInf(tau, 1) {
		return y, math.NaN(), nil
	}
	u, s, v, err := linalg.ThinSVD(y)
	if err != nil {
		return nil, 0, fmt.Errorf("compress: SVD in the nuclear projection: %w", err)
	}
	nuc := floats.Sum(s)
	if nuc <= tau {
		return y, nuc, nil
	}
	theta := l1Threshold(s, tau)
	t := make([]float64, len(s))
	k := 0
	for i, x := range s {
		t[i] = math.Max(x-theta, 0)
		if t[i] > 0 {
			k = i + 1
		}
	}
	if k == 0 {
		r, c := y.Dims()
		return mat.NewDense(r, c, nil), nuc, nil
	}
	r, _ := u.Dims()
	us := scaleCols(u.Slice(0, r, 0, k).(*mat.Dense), t[:k])
	var out mat.Dense
	c, _ := v.Dims()
	out.Mul(us, v.Slice(0, c, 0, k).T())
	return &out, nuc, nil
}

// l1Threshold returns θ ≥ 0 with Σ max(s_i − θ, 0) = tau for non-negative s
// with Σ s > tau (Duchi et al. 2008, sorted-prefix rule).
func l1Threshold(s []float64, tau float64) float64 {
	a := append([]float64(nil), s...)
	sort.Sort(sort.Reverse(sort.Float64Slice(a)))
	var cum, theta float64
	for i, x := range a {
		cum += x
		t := (cum - tau) / float64(i+1)
		if x-t > 0 {
			theta = t
		} else {
			break
		}
	}
	return math.Max(theta, 0)
}

// clipBox returns y clipped entrywise to [−alpha, alpha].
func clipBox(y *mat.Dense, alpha float64) *mat.Dense {
	out := mat.DenseCopyOf(y)
	if math.IsInf(alpha, 1) {
		return out
	}
	raw := out.RawMatrix()
	for i := 0; i < raw.Rows; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols]
		for j, v := range row {
			row[j] = math.Max(-alpha, math.Min(alpha, v))
		}
	}
	return out
}

// maxAbs is the entrywise ‖·‖_∞ of [ZS25, §1.1] (not the induced norm).
func maxAbs(y mat.Matrix) float64 {
	r, c := y.Dims()
	m := 0.0
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			m = math.Max(m, math.Abs(y.At(i, j)))
		}
	}
	return m
}

// NuclearNorm returns ‖y‖_*, the sum of singular values.
func NuclearNorm(y mat.Matrix) float64 {
	_, s, _, err := linalg.ThinSVD(y)
	if err != nil {
		return math.NaN()
	}
	return floats.Sum(s)
}

// ProjectPsi returns the Euclidean projection of y (d1×d2) onto
// Ψ(X̌) = {Y : every column in col(X̌), ‖Y‖_* ≤ tau, ‖Y‖_∞ ≤ alpha}, the
// estimator of Theorem 4.4 in the coordinates Y = X̌N ([ZS25, §4], Alg 4):
// M̂ = X̌⁺·Ŷ. The paper names no solver; this is Dykstra's alternating
// projection (subspace, box, nuclear ball) started at P_X̌·y, which converges
// to the projection itself, not just a feasible point as plain alternating
// projection would. alpha or tau = +Inf drops that constraint. The
// projection is unique (Lemma 4.5) and non-expansive (Lemma 4.6).
// Cost per sweep: an SVD of a d1×d2 matrix plus O(d1·k·d2) for the subspace.
// On hitting MaxIter the last iterate is returned with an error wrapping
// ErrNotConverged. A nil sub, or a y that is nil, non-finite or not of the
// subspace's row count, gives an error wrapping ErrInput.
func ProjectPsi(y *mat.Dense, sub *Subspace, alpha, tau float64, o ConvexOptions) (*mat.Dense, ProjectionInfo, error) {
	o = o.withDefaults()
	info := ProjectionInfo{Alpha: alpha, Tau: tau}
	if !(alpha > 0) || !(tau > 0) {
		return nil, info, fmt.Errorf("compress: Ψ needs α > 0 and τ > 0, got α=%g τ=%g: %w", alpha, tau, ErrInput)
	}
	if err := checkSubspaceArg("compress.ProjectPsi", "y", y, sub); err != nil {
		return nil, info, err
	}
	x := sub.Project(y)
	r, c := x.Dims()
	pS := mat.NewDense(r, c, nil)
	pB := mat.NewDense(r, c, nil)
	pN := mat.NewDense(r, c, nil)
	var err error
	for it := 1; it <= o.MaxIter; it++ {
		prev := mat.DenseCopyOf(x)
		// Subspace.
		var yy mat.Dense
		yy.Add(x, pS)
		xn := sub.Project(&yy)
		pS.Sub(&yy, xn)
		// Box.
		yy.Add(xn, pB)
		xb := clipBox(&yy, alpha)
		pB.Sub(&yy, xb)
		// Nuclear ball.
		yy.Add(xb, pN)
		xs, _, e := ProjNuc(mat.DenseCopyOf(&yy), tau)
		if e != nil {
			return nil, info, e
		}
		pN.Sub(&yy, xs)
		x = mat.DenseCopyOf(xs)
		info.Sweeps = it
		var dlt mat.Dense
		dlt.Sub(x, prev)
		xn2 := math.Max(mat.Norm(x, 2), 1e-300)
		if mat.Norm(&dlt, 2) <= o.Tol*xn2 {
			// Feasibility gaps of the last iterate.
			off := offSubspace(sub, x)
			if off <= 10*o.Tol*xn2 && maxAbs(x) <= alpha*(1+10*o.Tol) {
				info.Converged = true
				break
			}
		}
	}
	info.MaxAbs = maxAbs(x)
	info.OffSubspace = offSubspace(sub, x)
	info.Nuclear = NuclearNorm(x)
	info.NuclearActive = !math.IsInf(tau, 1) && info.Nuclear >= tau*(1-1e-6)
	if !info.Converged {
		err = fmt.Errorf("compress: Dykstra projection onto Ψ: %d sweeps without reaching tolerance %g: %w", o.MaxIter, o.Tol, ErrNotConverged)
	}
	return x, info, err
}

func offSubspace(sub *Subspace, x *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(x, sub.Project(x))
	return mat.Norm(&d, 2)
}

// radii resolves α and τ for a target y (d1×d2) and rank r.
func (o ConvexOptions) radii(y *mat.Dense, sub *Subspace, r int) (alpha, tau float64, err error) {
	alpha = o.Alpha
	if alpha == 0 {
		alpha = maxAbs(y)
		if alpha == 0 {
			alpha = 1
		}
	}
	d1, d2 := y.Dims()
	if r <= 0 {
		r = min(d1, d2)
	}
	tau = o.Tau
	switch {
	case o.Kappa > 0:
		py := sub.Project(y)
		_, s, _, e := linalg.ThinSVD(py)
		if e != nil {
			return 0, 0, e
		}
		tau = o.Kappa * floats.Sum(s[:min(r, len(s))])
		if tau == 0 {
			tau = math.Inf(1)
		}
	case tau == 0:
		scale := alpha
		if math.IsInf(scale, 1) {
			scale = maxAbs(y)
		}
		tau = scale * math.Sqrt(float64(r)*float64(d1)*float64(d2))
	}
	return alpha, tau, nil
}

// headRows returns the first n rows of a (all when n ≤ 0 or n ≥ rows).
func headRows(a *mat.Dense, n int) *mat.Dense {
	if a == nil {
		return nil
	}
	r, c := a.Dims()
	if n <= 0 || n >= r {
		return a
	}
	return a.Slice(0, n, 0, c).(*mat.Dense)
}

// fitConvex is MethodConvex: Ŷ = Proj_Ψ(Ỹ) over the affine span of X̌, then
// Alg 2c on Ŷ for an exact rank.
func fitConvex(p Problem, o LayerOptions) (*Fit, error) {
	co := o.Convex
	q := p
	q.X = headRows(p.X, co.MaxRows)
	q.Xc = headRows(p.Xc, co.MaxRows)
	y := preact(q.X, q.W, q.Bias)
	sub, err := NewSubspace(withOnes(q.xcheck()))
	if err != nil {
		return nil, err
	}
	alpha, tau, err := co.radii(y, sub, o.Rank)
	if err != nil {
		return nil, err
	}
	yhat, info, perr := ProjectPsi(y, sub, alpha, tau, co)
	if perr != nil && yhat == nil {
		return nil, perr
	}
	f, err := fitOnTarget(q, o, yhat)
	if err != nil {
		return nil, err
	}
	f.Iterations, f.Converged = info.Sweeps, info.Converged
	if perr != nil {
		f.Warnings = append(f.Warnings, perr.Error())
	}
	if !info.NuclearActive {
		f.Warnings = append(f.Warnings, fmt.Sprintf("nuclear-norm constraint inactive (‖Ŷ‖_* = %.4g < τ = %.4g): Alg 4 reduced to box-clipped least squares", info.Nuclear, tau))
	}
	return f, nil
}

// fitOnTarget runs Alg 2 (bias mode of o; BiasKeep is treated as
// BiasCenter because the target already contains the bias) on the problem
// with the pre-activation target yhat instead of X·W + b.
func fitOnTarget(p Problem, o LayerOptions, yhat *mat.Dense) (*Fit, error) {
	xc := p.xcheck()
	var z, t *mat.Dense
	var xbar, ybar []float64
	mode := o.Bias
	if mode == BiasKeep {
		mode = BiasCenter
	}
	if mode == BiasAugment {
		z, t = withOnes(xc), yhat
	} else {
		xbar = colMeans(xc)
		z = centered(xc, xbar)
		ybar = colMeans(yhat)
		t = centered(yhat, ybar)
	}
	oo := o
	oo.Bias = mode
	f, err := fitWhitened(p, oo, z, t, nil, xbar, ybar)
	if err != nil {
		return nil, err
	}
	return f, nil
}
