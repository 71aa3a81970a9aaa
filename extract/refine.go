package extract

import (
	"context"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/nn"
)

// refineRowsPerParam is how many output values the whole-network polish
// fits per parameter.
const refineRowsPerParam = 4

// refine is the precision-restoring polish for an oracle that rounds
// coarser than float64 (float32 arithmetic): the units' Jacobian jumps
// carry the oracle's rounding divided by the difference step, while a
// least-squares fit of every parameter to many answers averages it out.
// It queries n = 4·P/p fresh standard Gaussian points (P parameters, p
// outputs) and runs Gauss–Newton steps on ‖Y − f(X)‖², each step's linear
// problem (activation pattern held fixed) solved by CGLS, keeping a step
// only when it lowers the residual. It returns the refined network and the
// relative residuals on those points before and after.
func (e *extractor) refine(ctx context.Context, net *nn.Depth2) (*nn.Depth2, float64, float64, error) {
	m, d, p := net.Hidden(), net.In(), net.Out()
	params := m*(d+1) + p*(m+1)
	n := max(refineRowsPerParam*params/p, 4*m)
	X := mat.NewDense(n, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = e.rng.NormFloat64()
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return net, 0, 0, err
	}
	e.diag.QueriesRefine += n
	before := certify.RelResidual(Y, net.Forward(X))
	best, bestRes := net, before
	for step := 0; step < refineSteps; step++ {
		if err := ctx.Err(); err != nil {
			return net, 0, 0, err
		}
		if e.opt.Progress != nil {
			e.opt.Progress("least-squares polish", step, refineSteps)
		}
		cand := gaussNewton(best, X, Y)
		r := certify.RelResidual(Y, cand.Forward(X))
		// A unit that contributes next to nothing is a copy of another
		// (two records of one hyperplane make the fit degenerate and slow):
		// without it, a step must do at least as well.
		if i, weak := weakest(cand, X); weak && cand.Hidden() > 1 {
			drop := gaussNewton(withoutUnit(cand, i), X, Y)
			if rd := certify.RelResidual(Y, drop.Forward(X)); rd <= r {
				cand, r = drop, rd
				e.diag.Duplicates++
			}
		}
		if !(r < 0.9*bestRes) {
			if r < bestRes {
				best, bestRes = cand, r
			}
			break
		}
		best, bestRes = cand, r
	}
	return best, before, bestRes, nil
}

// refineSteps caps refine's Gauss–Newton steps.
const refineSteps = 8

// weakest returns the unit with the smallest contribution ‖A_{:,i}‖ ·
// rms(ReLU(w_i·x + b_i)) over the rows of X, and whether it is below 1% of
// the median contribution.
func weakest(net *nn.Depth2, X *mat.Dense) (int, bool) {
	m := net.Hidden()
	n, _ := X.Dims()
	Z := mat.NewDense(n, m, nil)
	Z.Mul(X, net.W.T())
	c := make([]float64, m)
	for j := 0; j < m; j++ {
		hh := 0.0
		for i := 0; i < n; i++ {
			if v := Z.At(i, j) + net.B[j]; v > 0 {
				hh += v * v
			}
		}
		c[j] = mat.Norm(net.A.ColView(j), 2) * math.Sqrt(hh/float64(n))
	}
	sorted := append([]float64(nil), c...)
	sort.Float64s(sorted)
	low := 0
	for j := range c {
		if c[j] < c[low] {
			low = j
		}
	}
	return low, c[low] < 0.01*sorted[m/2]
}

// withoutUnit returns net without hidden unit i.
func withoutUnit(net *nn.Depth2, i int) *nn.Depth2 {
	m, d, p := net.Hidden(), net.In(), net.Out()
	out := &nn.Depth2{W: mat.NewDense(m-1, d, nil), B: make([]float64, 0, m-1), A: mat.NewDense(p, m-1, nil), C: append([]float64(nil), net.C...)}
	k := 0
	for j := 0; j < m; j++ {
		if j == i {
			continue
		}
		out.W.SetRow(k, net.W.RawRowView(j))
		out.B = append(out.B, net.B[j])
		out.A.SetCol(k, mat.Col(nil, j, net.A))
		k++
	}
	return out
}

// gaussNewton returns net after one Gauss–Newton step on ‖Y − f(X)‖²_F with
// the activation pattern of net held fixed: the linear least-squares
// problem in (δW, δb, δA, δc) solved by CGLS (matrix-free: each product
// costs two n×d×m matrix products).
func gaussNewton(net *nn.Depth2, X, Y *mat.Dense) *nn.Depth2 {
	n, _ := X.Dims()
	p := net.Out()
	gs := newGNSystem(net, X)
	F := net.Forward(X)
	R := mat.NewDense(n, p, nil)
	R.Sub(Y, F)
	gs.scaling()
	applyP := func(v gnVec) *mat.Dense { return gs.apply(gs.precond(v)) }
	adjointP := func(r *mat.Dense) gnVec { return gs.precond(gs.adjoint(r)) }
	// CGLS on min ‖J·P·y − R‖, x = P·y.
	x := gs.newVec()
	r := mat.DenseCopyOf(R)
	s := adjointP(r)
	q := gs.newVec()
	q.axpy(1, s)
	gamma := s.dot(s)
	g0 := gamma
	for it := 0; it < 40 && gamma > 1e-24*g0; it++ {
		Jq := applyP(q)
		qq := mat.Norm(Jq, 2)
		if qq == 0 {
			break
		}
		alpha := gamma / (qq * qq)
		x.axpy(alpha, q)
		var T mat.Dense
		T.Scale(alpha, Jq)
		r.Sub(r, &T)
		s = adjointP(r)
		g := s.dot(s)
		beta := g / gamma
		gamma = g
		// q = s + β·q
		for _, pr := range q.pairs(s) {
			for i := range pr[0] {
				pr[0][i] = pr[1][i] + beta*pr[0][i]
			}
		}
	}
	x = gs.precond(x)
	out := net.Clone()
	out.W.Add(out.W, x.W)
	out.A.Add(out.A, x.A)
	for j := range out.B {
		out.B[j] += x.b[j]
	}
	for o := range out.C {
		out.C[o] += x.c[o]
	}
	return out
}

// gnVec is a step of gaussNewton, (δW m×d, δb m, δA p×m, δc p), as one
// vector.
type gnVec struct {
	W *mat.Dense
	b []float64
	A *mat.Dense
	c []float64
}

// pairs lists the four parts of v beside those of w.
func (v gnVec) pairs(w gnVec) [][2][]float64 {
	return [][2][]float64{{v.W.RawMatrix().Data, w.W.RawMatrix().Data}, {v.b, w.b}, {v.A.RawMatrix().Data, w.A.RawMatrix().Data}, {v.c, w.c}}
}

// dot is the inner product of v and w as vectors.
func (v gnVec) dot(w gnVec) float64 {
	return dotf(v.W.RawMatrix().Data, w.W.RawMatrix().Data) + dotf(v.b, w.b) + dotf(v.A.RawMatrix().Data, w.A.RawMatrix().Data) + dotf(v.c, w.c)
}

// axpy adds s·src to v.
func (v gnVec) axpy(s float64, src gnVec) {
	for _, pr := range v.pairs(src) {
		for i := range pr[0] {
			pr[0][i] += s * pr[1][i]
		}
	}
}

// gnSystem is gaussNewton's linear least-squares problem: the Jacobian of
// f(X) at net with its activation pattern D held fixed (H the hidden
// values), applied matrix-free, and its Jacobi preconditioner.
type gnSystem struct {
	net        *nn.Depth2
	X, H, D    *mat.Dense
	n, d, m, p int
	// sW, sB, sA (per unit) and sC scale the step's parts (scaling).
	sW, sB, sA []float64
	sC         float64
}

// newGNSystem computes net's pre-activations on X, its activation pattern
// D and hidden values H.
func newGNSystem(net *nn.Depth2, X *mat.Dense) *gnSystem {
	n, d := X.Dims()
	m, p := net.Hidden(), net.Out()
	Z := mat.NewDense(n, m, nil)
	Z.Mul(X, net.W.T())
	H := mat.NewDense(n, m, nil)
	D := mat.NewDense(n, m, nil)
	for i := 0; i < n; i++ {
		z, h, dd := Z.RawRowView(i), H.RawRowView(i), D.RawRowView(i)
		for j := range z {
			if v := z[j] + net.B[j]; v > 0 {
				h[j], dd[j] = v, 1
			}
		}
	}
	return &gnSystem{net: net, X: X, H: H, D: D, n: n, d: d, m: m, p: p}
}

// newVec returns a zero step.
func (gs *gnSystem) newVec() gnVec {
	return gnVec{mat.NewDense(gs.m, gs.d, nil), make([]float64, gs.m), mat.NewDense(gs.p, gs.m, nil), make([]float64, gs.p)}
}

// apply returns J·v (n×p).
func (gs *gnSystem) apply(v gnVec) *mat.Dense {
	n, m, p, D := gs.n, gs.m, gs.p, gs.D
	M := mat.NewDense(n, m, nil)
	M.Mul(gs.X, v.W.T())
	for i := 0; i < n; i++ {
		row, dd := M.RawRowView(i), D.RawRowView(i)
		for j := range row {
			row[j] = (row[j] + v.b[j]) * dd[j]
		}
	}
	out := mat.NewDense(n, p, nil)
	out.Mul(M, gs.net.A.T())
	var T mat.Dense
	T.Mul(gs.H, v.A.T())
	out.Add(out, &T)
	for i := 0; i < n; i++ {
		row := out.RawRowView(i)
		for o := range row {
			row[o] += v.c[o]
		}
	}
	return out
}

// adjoint returns Jᵀ·r.
func (gs *gnSystem) adjoint(r *mat.Dense) gnVec {
	n, m, D := gs.n, gs.m, gs.D
	v := gs.newVec()
	v.A.Mul(r.T(), gs.H)
	G := mat.NewDense(n, m, nil)
	G.Mul(r, gs.net.A)
	for i := 0; i < n; i++ {
		g, dd, rr := G.RawRowView(i), D.RawRowView(i), r.RawRowView(i)
		for j := range g {
			g[j] *= dd[j]
			v.b[j] += g[j]
		}
		for o := range rr {
			v.c[o] += rr[o]
		}
	}
	v.W.Mul(G.T(), gs.X)
	return v
}

// scaling sets the Jacobi preconditioner: CGLS runs on J·P, P the inverse
// square root of diag(JᵀJ) (a unit's weights scale with its output column
// and how often it is active; without it CGLS stalls on the rarely active
// units).
func (gs *gnSystem) scaling() {
	n, d, m, X, D, H := gs.n, gs.d, gs.m, gs.X, gs.D, gs.H
	xx := 0.0
	for _, v := range X.RawMatrix().Data {
		xx += v * v
	}
	xx /= float64(n * d)
	gs.sW, gs.sB, gs.sA = make([]float64, m), make([]float64, m), make([]float64, m)
	for j := 0; j < m; j++ {
		act, hh := 0.0, 0.0
		for i := 0; i < n; i++ {
			act += D.At(i, j)
			hh += H.At(i, j) * H.At(i, j)
		}
		col := mat.Col(nil, j, gs.net.A)
		aa := dotf(col, col)
		gs.sW[j] = 1 / math.Sqrt(aa*act*xx+1e-300)
		gs.sB[j] = 1 / math.Sqrt(aa*act+1e-300)
		gs.sA[j] = 1 / math.Sqrt(hh+1e-300)
	}
	gs.sC = 1 / math.Sqrt(float64(n))
}

// precond returns P·v.
func (gs *gnSystem) precond(v gnVec) gnVec {
	out := gs.newVec()
	for j := 0; j < gs.m; j++ {
		src, dst := v.W.RawRowView(j), out.W.RawRowView(j)
		for k := range src {
			dst[k] = src[k] * gs.sW[j]
		}
		out.b[j] = v.b[j] * gs.sB[j]
		for o := 0; o < gs.p; o++ {
			out.A.Set(o, j, v.A.At(o, j)*gs.sA[j])
		}
	}
	for o := range out.c {
		out.c[o] = v.c[o] * gs.sC
	}
	return out
}
