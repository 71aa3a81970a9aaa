package linalg

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/vec"
)

// ErrOption reports an invalid option value (an unknown method, a negative
// tolerance, a problem too large for the chosen method).
var ErrOption = errs.New("linalg: invalid option", nil)

// L1 regression methods.
const (
	// L1IRLS is iteratively reweighted least squares with a shrinking
	// smoothing δ, followed by an exact refit on the zero-residual set.
	L1IRLS = "irls"
	// L1Vertex is the exact minimiser by enumeration of the vertices: an
	// ℓ1 minimiser fits some c rows exactly, so the best of the C(r, c)
	// interpolants is optimal. A cross-check for small problems
	// (C(r, c) ≤ L1MaxVertices).
	L1Vertex = "vertex"
)

// L1MaxVertices bounds C(r, c) for the L1Vertex method. (The LP
// formulation through gonum's simplex, v0.17, was tried and reports a
// spurious "unbounded" on these degenerate programs from ~40 rows on, so it
// is not offered.)
const L1MaxVertices = 200000

// L1Options controls L1Regress. The zero value works.
type L1Options struct {
	// Method is L1IRLS (default, "") or L1Vertex.
	Method string
	// MaxIter bounds the IRLS iterations per column. Default 100.
	MaxIter int
}

// L1Report describes an L1Regress solve, one entry per column of b.
type L1Report struct {
	// Objective is ‖b_j − a·x_j‖₁.
	Objective []float64
	// Iterations of IRLS (0 for the vertex method).
	Iterations []int
	// Zeros counts the rows fitted exactly (|r_i| ≤ 1e-12·rms(b_j)).
	Zeros []int
	// Refit reports that the final solution is the least-squares fit on the
	// zero-residual rows (IRLS only): exact under sparse corruption.
	Refit []bool
}

// L1Regress returns the c×q matrix x minimising Σ_j ‖b_j − a·x_j‖₁ column by
// column (least absolute deviations), for an r×c matrix a of full column
// rank and an r×q right-hand side b. Under sparse corruption — b = a·x* + e
// with e non-zero on few rows, at positions not aligned with a — the ℓ1
// minimiser is x* exactly. It is the robust regression for the output
// weights U under sparse noise ([BJW19, §8]); the paper solves principal
// component pursuit instead, so this final ℓ1 fit is our addition.
//
// Method L1IRLS (default): weighted least squares with weights
// 1/√(r_i² + δ²), δ shrinking tenfold per iteration from rms(b), until the
// residuals separate into an exactly fitted set and the rest; then x is
// refitted by QR least squares on the exactly fitted rows, re-flagging until
// the set is stable, and the refit is kept only if it does not raise the ℓ1
// objective. The refit makes the answer exact to rounding where plain IRLS
// stalls at ~δ. Cost per iteration r·c² flops per column; columns run in
// parallel. Method L1Vertex: exact by enumeration, a cross-check for tiny problems.
//
// a and b are not modified. Errors wrap ErrShape, ErrNotFinite,
// ErrRankDeficient (a not of full column rank) or ErrOption.
func L1Regress(a, b mat.Matrix, opt L1Options) (*mat.Dense, *L1Report, error) {
	da, err := view("a", a)
	if err != nil {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w", err)
	}
	db, err := view("b", b)
	if err != nil {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w", err)
	}
	r, c := da.Dims()
	rb, q := db.Dims()
	if rb != r {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w: a has %d rows, b has %d", ErrShape, r, rb)
	}
	if r < c {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w: a is %d×%d; ℓ1 regression needs at least as many rows as unknowns", ErrShape, r, c)
	}
	if opt.MaxIter < 0 {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w: MaxIter %d < 0", ErrOption, opt.MaxIter)
	}
	if opt.MaxIter == 0 {
		opt.MaxIter = 100
	}
	switch opt.Method {
	case "", L1IRLS:
		opt.Method = L1IRLS
	case L1Vertex:
		if binom(r, c) > L1MaxVertices {
			return nil, nil, fmt.Errorf("linalg.L1Regress: %w: the vertex method enumerates C(%d, %d) > %d subsets; use %q", ErrOption, r, c, L1MaxVertices, L1IRLS)
		}
	default:
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w: unknown method %q (want %q or %q)", ErrOption, opt.Method, L1IRLS, L1Vertex)
	}
	// Full column rank is needed for a unique answer and by both methods
	// (IRLS solves c×c systems).
	if _, err := LstSq(da, mat.NewDense(r, 1, nil)); err != nil {
		return nil, nil, fmt.Errorf("linalg.L1Regress: %w", err)
	}
	A := mat.DenseCopyOf(da)
	x := mat.NewDense(c, q, nil)
	rep := &L1Report{Objective: make([]float64, q), Iterations: make([]int, q), Zeros: make([]int, q), Refit: make([]bool, q)}
	errs := make([]error, q)
	parallel.For(q, func(_, j int) {
		y := mat.Col(nil, j, db)
		var sol []float64
		var it int
		var refit bool
		var err error
		if opt.Method == L1Vertex {
			sol, err = l1Vertex(A, y)
		} else {
			sol, it, refit, err = l1IRLS(A, y, opt.MaxIter)
		}
		if err != nil {
			errs[j] = err
			return
		}
		x.SetCol(j, sol)
		res := residual(A, y, sol)
		rms := math.Sqrt(vec.Dot(y, y) / float64(r))
		obj, zeros := 0.0, 0
		for _, v := range res {
			obj += math.Abs(v)
			if math.Abs(v) <= 1e-12*rms {
				zeros++
			}
		}
		rep.Objective[j], rep.Iterations[j], rep.Zeros[j], rep.Refit[j] = obj, it, zeros, refit
	})
	for j, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("linalg.L1Regress: column %d: %w", j, err)
		}
	}
	return x, rep, nil
}

// l1IRLS solves one column: iteratively reweighted least squares from the
// least-squares start, then an exact refit on the rows it fits (near)
// exactly. It returns x, the iterations run and whether the refit was kept.
func l1IRLS(A *mat.Dense, y []float64, maxIter int) ([]float64, int, bool, error) {
	r, c := A.Dims()
	rms := math.Sqrt(vec.Dot(y, y) / float64(r))
	if rms == 0 {
		return make([]float64, c), 0, false, nil
	}
	ls, err := LstSq(A, mat.NewDense(r, 1, y))
	if err != nil {
		return nil, 0, false, err
	}
	x := mat.Col(nil, 0, ls)
	it := irlsIterate(A, y, x, rms, maxIter)
	best, refit := exactRefit(A, y, x, rms)
	return best, it, refit, nil
}

// irlsIterate improves x in place by weighted least squares with weights
// 1/√(r_i² + δ²), δ shrinking tenfold per iteration from rms down to
// 1e-15·rms, until δ and the step are negligible (or the weighted normal
// equations are no longer positive definite, when x is kept). It returns
// the iterations run, at most maxIter.
func irlsIterate(A *mat.Dense, y, x []float64, rms float64, maxIter int) int {
	r, c := A.Dims()
	w := make([]float64, r)
	g := make([]float64, c*c)
	h := make([]float64, c)
	delta := rms
	it := 0
	for it = 1; it <= maxIter; it++ {
		res := residual(A, y, x)
		for i, v := range res {
			w[i] = 1 / math.Sqrt(v*v+delta*delta)
		}
		weightedNormal(A, y, w, g, h)
		if !CholeskyInPlace(g, c) {
			break // weights too extreme for the normal equations: keep x
		}
		CholeskySolveInPlace(g, c, h)
		step := 0.0
		for p := range x {
			step = math.Max(step, math.Abs(h[p]-x[p]))
		}
		copy(x, h)
		if delta <= 1e-14*rms && step <= 1e-14*(1+vec.MaxAbs(x)) {
			break
		}
		delta = math.Max(delta/10, 1e-15*rms)
	}
	return min(it, maxIter)
}

// weightedNormal fills g (c×c, row-major, symmetric) with Aᵀ·diag(w)·A and
// h with Aᵀ·diag(w)·y.
func weightedNormal(A *mat.Dense, y, w, g, h []float64) {
	r, c := A.Dims()
	clear(g)
	clear(h)
	for i := 0; i < r; i++ {
		row := A.RawRowView(i)
		for p := 0; p < c; p++ {
			wp := w[i] * row[p]
			h[p] += wp * y[i]
			for s := 0; s <= p; s++ {
				g[p*c+s] += wp * row[s]
			}
		}
	}
	for p := 0; p < c; p++ {
		for s := p + 1; s < c; s++ {
			g[p*c+s] = g[s*c+p]
		}
	}
}

// exactRefit refits x by least squares on the rows it fits (near) exactly,
// re-flagging those rows from the refit's residuals until they are stable
// (at most 5 rounds), and keeps a refit only while it does not worsen the
// ℓ1 objective. It returns the best x and whether a refit was kept.
func exactRefit(A *mat.Dense, y, x []float64, rms float64) ([]float64, bool) {
	r, c := A.Dims()
	best := x
	bestObj := l1obj(A, y, x)
	refit := false
	res := residual(A, y, x)
	thr := math.Max(1e-6*rms, 0)
	in := make([]bool, r)
	for round := 0; round < 5; round++ {
		var rows []int
		for i, v := range res {
			in[i] = math.Abs(v) <= thr
			if in[i] {
				rows = append(rows, i)
			}
		}
		if len(rows) < c {
			break
		}
		z, err := lstSqRows(A, y, rows)
		if err != nil {
			break
		}
		if o := l1obj(A, y, z); o <= bestObj*(1+1e-12) {
			best, bestObj, refit = z, o, true
		} else {
			break
		}
		res = residual(A, y, z)
		ss := 0.0
		for _, i := range rows {
			ss += res[i] * res[i]
		}
		newThr := math.Max(10*math.Sqrt(ss/float64(len(rows))), 1e-13*rms)
		changed := false
		for i, v := range res {
			if (math.Abs(v) <= newThr) != in[i] {
				changed = true
			}
		}
		thr = newThr
		if !changed {
			break
		}
	}
	return best, refit
}

// lstSqRows solves the least-squares problem of the given rows of A and y.
func lstSqRows(A *mat.Dense, y []float64, rows []int) ([]float64, error) {
	_, c := A.Dims()
	As := mat.NewDense(len(rows), c, nil)
	ys := mat.NewDense(len(rows), 1, nil)
	for j, i := range rows {
		As.SetRow(j, A.RawRowView(i))
		ys.Set(j, 0, y[i])
	}
	sol, err := LstSq(As, ys)
	if err != nil {
		return nil, err
	}
	return mat.Col(nil, 0, sol), nil
}

// l1Vertex solves one column by trying every c-subset of rows as an exact
// interpolation set and keeping the smallest ℓ1 objective (first found on
// ties, so the answer is deterministic).
func l1Vertex(A *mat.Dense, y []float64) ([]float64, error) {
	r, c := A.Dims()
	idx := make([]int, c)
	for i := range idx {
		idx[i] = i
	}
	var best []float64
	bestObj := math.Inf(1)
	As := mat.NewDense(c, c, nil)
	ys := mat.NewVecDense(c, nil)
	for {
		for j, i := range idx {
			As.SetRow(j, A.RawRowView(i))
			ys.SetVec(j, y[i])
		}
		var z mat.VecDense
		if err := z.SolveVec(As, ys); err == nil {
			x := append([]float64(nil), z.RawVector().Data...)
			if o := l1obj(A, y, x); o < bestObj {
				best, bestObj = x, o
			}
		}
		// Next combination in lexicographic order.
		p := c - 1
		for p >= 0 && idx[p] == r-c+p {
			p--
		}
		if p < 0 {
			break
		}
		idx[p]++
		for q := p + 1; q < c; q++ {
			idx[q] = idx[q-1] + 1
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: no %d rows form a non-singular system", ErrRankDeficient, c)
	}
	return best, nil
}

// binom returns C(n, k), saturating at math.MaxInt64/2.
func binom(n, k int) int {
	b := 1
	for i := 1; i <= k; i++ {
		b = b * (n - k + i) / i
		if b > math.MaxInt64/(2*n+2) {
			return math.MaxInt64 / 2
		}
	}
	return b
}

func residual(A *mat.Dense, y, x []float64) []float64 {
	r, _ := A.Dims()
	res := make([]float64, r)
	for i := 0; i < r; i++ {
		res[i] = y[i] - vec.Dot(A.RawRowView(i), x)
	}
	return res
}

func l1obj(A *mat.Dense, y, x []float64) float64 {
	s := 0.0
	for _, v := range residual(A, y, x) {
		s += math.Abs(v)
	}
	return s
}
