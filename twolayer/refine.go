package twolayer

import (
	"context"
	"errors"
	"fmt"
	"math"

	gonumlapack "gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/nn"
)

// RefineResult reports a local refinement.
type RefineResult struct {
	V, U       *mat.Dense
	Iterations int
	Converged  bool
	Status     string
	// Before and After are the relative residuals ‖Y − ReLU(XVᵀ)Uᵀ‖_F/‖Y‖_F.
	Before, After float64
}

// Refine improves (V, U) by a local minimisation of ½‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F²
// with L-BFGS, started from the given estimate. It is not in the paper
// ([BJW19, Thm 10] suggests it as an option): the moment estimate is consistent
// but statistically inefficient, and from a start in the right basin the
// least-squares fit is the maximum-likelihood estimate under Gaussian noise.
// The loss is piecewise smooth in V; L-BFGS copes because the kinks have
// measure zero. Each iteration costs ~4·n·k·(d+m) flops. The returned V has
// unit rows and U is re-solved by least squares for it.
//
// For a rectified activation act, with the gradient
// through φ′ (nn.Activation.Deriv). Rows of V are normalised at the end only
// for positively homogeneous φ; for e^x − 1 the norms are fitted parameters.
// If φ overflows at the start it returns an error wrapping ErrInput; an
// overflowing trial point during the line search counts as an infinite loss.
// act "" means nn.ReLU. X must be n×d, Y n×m, V0 k×d and U0 m×k, all
// finite; other shapes (or nil) give an error wrapping ErrInput that says
// what was expected.
func Refine(ctx context.Context, X, Y, V0, U0 *mat.Dense, act nn.Activation, maxIter int, progress func(done, total int)) (*RefineResult, error) {
	const fn = "twolayer.Refine"
	n, d, m, k, err := checkXYV(fn, X, Y, V0, "V0")
	if err != nil {
		return nil, err
	}
	if _, _, err := certify.CheckMatrix(fn, "U0", U0, m, k, fmt.Sprintf("m×k with m = %d (Y's columns) and k = %d (V0's rows)", m, k)); err != nil {
		return nil, err
	}
	if act == "" {
		act = nn.ReLU
	}
	if err := checkActivation(act); err != nil {
		return nil, err
	}
	if err := checkFinite(activationsOf(X, V0, act), act); err != nil {
		return nil, err
	}
	if maxIter <= 0 {
		maxIter = 200
	}
	yy := math.Pow(mat.Norm(Y, 2), 2)
	if yy == 0 {
		return nil, fmt.Errorf("%s: %w", fn, errYZero)
	}
	l := &refineLoss{
		X: X, Y: Y, yy: yy, d: d, m: m, k: k, nv: k * d,
		relu: act == nn.ReLU, f: act.Func(), df: act.Deriv(),
		// Workspaces reused across evaluations.
		pre: mat.NewDense(n, k, nil), F: mat.NewDense(n, k, nil),
		R: mat.NewDense(n, m, nil), GF: mat.NewDense(n, k, nil),
	}
	nv := l.nv
	x0 := make([]float64, nv+m*k)
	copy(x0[:nv], mat.DenseCopyOf(V0).RawMatrix().Data)
	copy(x0[nv:], mat.DenseCopyOf(U0).RawMatrix().Data)
	before := math.Sqrt(2 * l.eval(x0, nil))
	problem := optimize.Problem{
		Func: func(x []float64) float64 { return l.eval(x, nil) },
		Grad: func(grad, x []float64) { l.eval(x, grad) },
	}
	rec := &ctxRecorder{ctx: ctx, progress: progress, max: maxIter}
	settings := &optimize.Settings{
		MajorIterations:   maxIter,
		GradientThreshold: 1e-12,
		Converger:         &optimize.FunctionConverge{Relative: 1e-10, Iterations: 10},
		Recorder:          rec,
	}
	res, err := optimize.Minimize(problem, x0, settings, &optimize.LBFGS{})
	if err != nil && res == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("twolayer: refinement: %w", err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	V, _ := l.unpack(res.X)
	V = mat.DenseCopyOf(V)
	if homogeneous(act) {
		normalizeRows(V)
	}
	U, _, uerr := SolveU(X, Y, V, act)
	if uerr != nil {
		return nil, uerr
	}
	after := relResidualAct(X, Y, V, U, act)
	out := &RefineResult{V: V, U: U, Iterations: res.Stats.MajorIterations, Status: res.Status.String()}
	out.Before, out.After = before, after
	out.Converged = err == nil && (res.Status == optimize.FunctionConvergence || res.Status == optimize.GradientThreshold)
	if err != nil && !errors.Is(err, optimize.ErrLinesearcherFailure) {
		out.Status += ": " + err.Error()
	}
	return out, nil
}

// refineLoss is Refine's objective ½‖Y − φ(X·Vᵀ)·Uᵀ‖_F²/‖Y‖_F² over the
// packed parameters [V, U], with the workspaces its evaluations reuse.
type refineLoss struct {
	X, Y        *mat.Dense
	yy          float64 // ‖Y‖_F²
	d, m, k, nv int     // nv = k·d, the length of V in the packing
	relu        bool
	f, df       func(float64) float64
	// pre = X·Vᵀ, F = φ(pre), R = F·Uᵀ − Y, GF = R·U ⊙ φ′(pre).
	pre, F, R, GF *mat.Dense
}

// unpack views the packed parameters x as V (k×d) and U (m×k).
func (l *refineLoss) unpack(x []float64) (V, U *mat.Dense) {
	return mat.NewDense(l.k, l.d, x[:l.nv]), mat.NewDense(l.m, l.k, x[l.nv:])
}

// eval returns the loss at x and, if grad is non-nil, writes its gradient
// there (through φ′). A trial point where φ overflows is infinitely bad.
func (l *refineLoss) eval(x []float64, grad []float64) float64 {
	pre, F, R, GF, f, df, relu, yy := l.pre, l.F, l.R, l.GF, l.f, l.df, l.relu, l.yy
	V, U := l.unpack(x)
	pre.Mul(l.X, V.T())
	fd, pd := F.RawMatrix().Data, pre.RawMatrix().Data
	if relu {
		for i, v := range pd {
			fd[i] = math.Max(v, 0)
		}
	} else {
		for i, v := range pd {
			fd[i] = f(v)
		}
	}
	R.Mul(F, U.T())
	R.Sub(R, l.Y)
	loss := 0.5 * math.Pow(mat.Norm(R, 2), 2) / yy
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		// φ overflowed at a trial point: reject it as infinitely bad.
		for i := range grad {
			grad[i] = 0
		}
		return math.Inf(1)
	}
	if grad != nil {
		gV, gU := l.unpack(grad)
		gU.Mul(R.T(), F)
		gU.Scale(1/yy, gU)
		GF.Mul(R, U)
		gd := GF.RawMatrix().Data
		if relu {
			for i, v := range pd {
				if v <= 0 {
					gd[i] = 0
				}
			}
		} else {
			for i, v := range pd {
				gd[i] *= df(v)
			}
		}
		gV.Mul(GF.T(), l.X)
		gV.Scale(1/yy, gV)
	}
	return loss
}

// ctxRecorder stops the optimiser when the context is cancelled and reports
// progress per major iteration.
type ctxRecorder struct {
	ctx      context.Context
	progress func(done, total int)
	max      int
	iters    int
}

func (r *ctxRecorder) Init() error { return nil }

func (r *ctxRecorder) Record(_ *optimize.Location, op optimize.Operation, _ *optimize.Stats) error {
	if op == optimize.MajorIteration {
		r.iters++
		if r.progress != nil {
			r.progress(min(r.iters, r.max), r.max)
		}
	}
	return r.ctx.Err()
}

// relResidual returns ‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F/‖Y‖_F.
func relResidual(X, Y, V, U *mat.Dense) float64 {
	return residualOf(activations(X, V), Y, U)
}

// residualOf returns ‖Y − F·Uᵀ‖_F/‖Y‖_F for activations F.
//
// The residual is formed a block of rows at a time (residualRows), never as
// an n×m matrix as big as Y, each entry an in-order sum (internal/kern), so
// the result does not depend on the blocks. Its squared norm and Y's are
// plain sums in row order when they stay within [1e-280, 1e280] (no
// entry's square can then over- or underflow enough to matter); otherwise
// the residual is formed again and both norms take LAPACK's scaled sums of
// squares (Dlassq), as mat.Norm does.
func residualOf(F, Y, U *mat.Dense) float64 {
	n, m := Y.Dims()
	_, k := F.Dims()
	rows := min(n, max(1, residualRows/m))
	R := mat.NewDense(rows, m, nil)
	Ut := mat.DenseCopyOf(U.T())
	yr, rr := Y.RawMatrix(), R.RawMatrix()
	block := func(i0, i1 int) {
		// R = F·Uᵀ − Y on rows i0…i1−1 (internal/kern, row by row).
		mulRowsPar(R.Slice(0, i1-i0, 0, m).(*mat.Dense), F.Slice(i0, i1, 0, k).(*mat.Dense), Ut)
		for i := 0; i < i1-i0; i++ {
			r, y := rr.Data[i*rr.Stride:i*rr.Stride+m], yr.Data[(i0+i)*yr.Stride:(i0+i)*yr.Stride+m]
			for j := range r {
				r[j] -= y[j]
			}
		}
	}
	ssR, ssY := 0.0, 0.0
	for i0 := 0; i0 < n; i0 += rows {
		i1 := min(n, i0+rows)
		block(i0, i1)
		for i := 0; i < i1-i0; i++ {
			for _, v := range rr.Data[i*rr.Stride : i*rr.Stride+m] {
				ssR += v * v
			}
			for _, v := range yr.Data[(i0+i)*yr.Stride : (i0+i)*yr.Stride+m] {
				ssY += v * v
			}
		}
	}
	if ssY > 1e-280 && ssY < 1e280 && ssR < 1e280 {
		return math.Sqrt(ssR / ssY)
	}
	scale, sum := 0.0, 1.0
	for i0 := 0; i0 < n; i0 += rows {
		i1 := min(n, i0+rows)
		block(i0, i1)
		for i := 0; i < i1-i0; i++ {
			scale, sum = lapackImpl.Dlassq(m, rr.Data[i*rr.Stride:i*rr.Stride+m], 1, scale, sum)
		}
	}
	return scale * math.Sqrt(sum) / mat.Norm(Y, 2)
}

// residualRows is about how many residual entries residualOf holds at once
// (4 MiB).
const residualRows = 1 << 19

// lapackImpl is the pure-Go LAPACK whose Dlassq mat.Norm's Frobenius norm
// uses (lapack64's default).
var lapackImpl gonumlapack.Implementation
