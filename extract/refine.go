package extract

import (
	"context"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/depth2"
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
func (e *extractor) refine(ctx context.Context, net *depth2.Network) (*depth2.Network, float64, float64, error) {
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
	before := relResidual(Y, net.Forward(X))
	best, bestRes := net, before
	for step := 0; step < refineSteps; step++ {
		if err := ctx.Err(); err != nil {
			return net, 0, 0, err
		}
		if e.opt.Progress != nil {
			e.opt.Progress("least-squares polish", step, refineSteps)
		}
		cand := gaussNewton(best, X, Y)
		r := relResidual(Y, cand.Forward(X))
		// A unit that contributes next to nothing is a copy of another
		// (two records of one hyperplane make the fit degenerate and slow):
		// without it, a step must do at least as well.
		if i, weak := weakest(cand, X); weak && cand.Hidden() > 1 {
			drop := gaussNewton(withoutUnit(cand, i), X, Y)
			if rd := relResidual(Y, drop.Forward(X)); rd <= r {
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
func weakest(net *depth2.Network, X *mat.Dense) (int, bool) {
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
func withoutUnit(net *depth2.Network, i int) *depth2.Network {
	m, d, p := net.Hidden(), net.In(), net.Out()
	out := &depth2.Network{W: mat.NewDense(m-1, d, nil), B: make([]float64, 0, m-1), A: mat.NewDense(p, m-1, nil), C: append([]float64(nil), net.C...)}
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
func gaussNewton(net *depth2.Network, X, Y *mat.Dense) *depth2.Network {
	n, d := X.Dims()
	m, p := net.Hidden(), net.Out()
	// Pre-activations, pattern and hidden values.
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
	F := net.Forward(X)
	R := mat.NewDense(n, p, nil)
	R.Sub(Y, F)
	// x = (δW m×d, δb m, δA p×m, δc p) as one vector.
	type vec struct {
		W *mat.Dense
		b []float64
		A *mat.Dense
		c []float64
	}
	newVec := func() vec {
		return vec{mat.NewDense(m, d, nil), make([]float64, m), mat.NewDense(p, m, nil), make([]float64, p)}
	}
	apply := func(v vec) *mat.Dense { // J·v, n×p
		M := mat.NewDense(n, m, nil)
		M.Mul(X, v.W.T())
		for i := 0; i < n; i++ {
			row, dd := M.RawRowView(i), D.RawRowView(i)
			for j := range row {
				row[j] = (row[j] + v.b[j]) * dd[j]
			}
		}
		out := mat.NewDense(n, p, nil)
		out.Mul(M, net.A.T())
		var T mat.Dense
		T.Mul(H, v.A.T())
		out.Add(out, &T)
		for i := 0; i < n; i++ {
			row := out.RawRowView(i)
			for o := range row {
				row[o] += v.c[o]
			}
		}
		return out
	}
	adjoint := func(r *mat.Dense) vec { // Jᵀ·r
		v := newVec()
		v.A.Mul(r.T(), H)
		G := mat.NewDense(n, m, nil)
		G.Mul(r, net.A)
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
		v.W.Mul(G.T(), X)
		return v
	}
	dot := func(a, b vec) float64 {
		return dotf(a.W.RawMatrix().Data, b.W.RawMatrix().Data) + dotf(a.b, b.b) + dotf(a.A.RawMatrix().Data, b.A.RawMatrix().Data) + dotf(a.c, b.c)
	}
	axpy := func(dst vec, s float64, src vec) {
		for _, pr := range [][2][]float64{{dst.W.RawMatrix().Data, src.W.RawMatrix().Data}, {dst.b, src.b}, {dst.A.RawMatrix().Data, src.A.RawMatrix().Data}, {dst.c, src.c}} {
			for i := range pr[0] {
				pr[0][i] += s * pr[1][i]
			}
		}
	}
	// Jacobi preconditioning: CGLS on J·P, P the inverse square root of
	// diag(JᵀJ) (a unit's weights scale with its output column and how
	// often it is active; without it CGLS stalls on the rarely active
	// units).
	xx := 0.0
	for _, v := range X.RawMatrix().Data {
		xx += v * v
	}
	xx /= float64(n * d)
	sW, sB, sA := make([]float64, m), make([]float64, m), make([]float64, m)
	for j := 0; j < m; j++ {
		act, hh := 0.0, 0.0
		for i := 0; i < n; i++ {
			act += D.At(i, j)
			hh += H.At(i, j) * H.At(i, j)
		}
		col := mat.Col(nil, j, net.A)
		aa := dotf(col, col)
		sW[j] = 1 / math.Sqrt(aa*act*xx+1e-300)
		sB[j] = 1 / math.Sqrt(aa*act+1e-300)
		sA[j] = 1 / math.Sqrt(hh+1e-300)
	}
	sC := 1 / math.Sqrt(float64(n))
	precond := func(v vec) vec {
		out := newVec()
		for j := 0; j < m; j++ {
			src, dst := v.W.RawRowView(j), out.W.RawRowView(j)
			for k := range src {
				dst[k] = src[k] * sW[j]
			}
			out.b[j] = v.b[j] * sB[j]
			for o := 0; o < p; o++ {
				out.A.Set(o, j, v.A.At(o, j)*sA[j])
			}
		}
		for o := range out.c {
			out.c[o] = v.c[o] * sC
		}
		return out
	}
	applyP := func(v vec) *mat.Dense { return apply(precond(v)) }
	adjointP := func(r *mat.Dense) vec { return precond(adjoint(r)) }
	// CGLS on min ‖J·P·y − R‖, x = P·y.
	x := newVec()
	r := mat.DenseCopyOf(R)
	s := adjointP(r)
	q := newVec()
	axpy(q, 1, s)
	gamma := dot(s, s)
	g0 := gamma
	for it := 0; it < 40 && gamma > 1e-24*g0; it++ {
		Jq := applyP(q)
		qq := mat.Norm(Jq, 2)
		if qq == 0 {
			break
		}
		alpha := gamma / (qq * qq)
		axpy(x, alpha, q)
		var T mat.Dense
		T.Scale(alpha, Jq)
		r.Sub(r, &T)
		s = adjointP(r)
		g := dot(s, s)
		beta := g / gamma
		gamma = g
		// q = s + β·q
		for _, pr := range [][2][]float64{{q.W.RawMatrix().Data, s.W.RawMatrix().Data}, {q.b, s.b}, {q.A.RawMatrix().Data, s.A.RawMatrix().Data}, {q.c, s.c}} {
			for i := range pr[0] {
				pr[0][i] = pr[1][i] + beta*pr[0][i]
			}
		}
	}
	x = precond(x)
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
