package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/internal/rng"
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
// outputs), drops records beyond the width given (dropToWidth) and runs
// Gauss–Newton steps on ‖Y − f(X)‖² (gnSteps), at most steps of them. It
// returns the refined network and the relative residuals on those points
// before and after.
func (e *extractor) refine(ctx context.Context, net *nn.Depth2, steps int) (*nn.Depth2, float64, float64, error) {
	X, Y, err := e.refineFor(ctx, net, 0)
	if err != nil {
		return net, 0, 0, err
	}
	before := certify.RelResidual(Y, net.Forward(X))
	best, err := e.gnSteps(ctx, e.dropToWidth(net, X, Y), X, Y, steps)
	if err != nil {
		return net, 0, 0, err
	}
	return best, before, certify.RelResidual(Y, best.Forward(X)), nil
}

// refineGrown is refine with units grown first (growUnits, see grow.go):
// the records the oracle does not bend at dropped (dropUnbent), growCount
// units fitted to the residual of the others as they are, the polish of
// them all, then the drop to the width given (or of the spare units,
// dropSpare) and the polish once more. The output layer is not fitted
// again before growing: it would take part of the missing units' output
// into the units found, and the residual would no longer be a few units'
// output (a 30-12-10 with two missing: Adam's fit explains 56% of it
// instead of 99.7%).
func (e *extractor) refineGrown(ctx context.Context, net *nn.Depth2) (*nn.Depth2, float64, float64, error) {
	kept, dropped, err := e.dropUnbent(ctx, net)
	if err != nil {
		return net, 0, 0, err
	}
	k := growCount(kept.Hidden(), e.opt.Hidden)
	// The grown network's parameters get their rows too.
	X, Y, err := e.refineFor(ctx, kept, k)
	if err != nil {
		return net, 0, 0, err
	}
	before := certify.RelResidual(Y, net.Forward(X))
	if e.opt.Progress != nil {
		e.opt.Progress("growing units", 0, k)
	}
	grown, err := growUnits(ctx, kept, X, Y, k, e.opt.Seed)
	if err != nil {
		return net, 0, 0, err
	}
	e.diag.Grown, e.diag.Unbent = k, dropped
	best, err := e.gnSteps(ctx, grown, X, Y, refineSteps)
	if err != nil {
		return net, 0, 0, err
	}
	polished := best.Hidden()
	if e.opt.Hidden > 0 {
		best = e.dropToWidth(best, X, Y)
	} else {
		// dropSpare's held-out queries: an eighth more.
		n, _ := X.Dims()
		Xa, Ya, err := e.refineData(ctx, n+n/8)
		if err != nil {
			return net, 0, 0, err
		}
		best = e.dropSpare(best, X, Y, Xa.Slice(n, n+n/8, 0, e.d).(*mat.Dense), Ya.Slice(n, n+n/8, 0, e.o.p).(*mat.Dense))
	}
	if best.Hidden() < polished {
		// Without the spare units the polish goes on from where the drop
		// leaves it (784-128-10: 5.9e-4 → 3.3e-5 in two steps), to the
		// oracle's rounding (finalSteps).
		if best, err = e.gnSteps(ctx, best, X, Y, finalSteps); err != nil {
			return net, 0, 0, err
		}
	}
	return best, before, certify.RelResidual(Y, best.Forward(X)), nil
}

// dropSpare drops, one at a time, the units whose removal the output
// layer's least-squares fit misses least (leastMissed) while the fit
// without them leaves at most twice net's residual on (X, Y), or no more
// than net's on the held-out queries (Xv, Yv): grown units beyond the
// missing ones (growCount) that the polish left idle, splitting one
// unit's output between two copies, or fitted to the rounding of the few
// refine queries they are active on. Those last pass the first test — the
// fit misses them on their rows — but not the second: a 784-32-10 trained
// on Fashion-MNIST (seed 2 of TestSlowFashionFloat32) kept two spare units
// active on 2% and 6% of the queries, the refine residual at 3.0e-7 and
// the certificate's at 1.2e-3.
func (e *extractor) dropSpare(net *nn.Depth2, X, Y, Xv, Yv *mat.Dense) *nn.Depth2 {
	net, _, n := dropIdle(net, X, Y, Xv, Yv, nil)
	e.diag.Duplicates += n
	return net
}

// dropIdle is dropSpare's test for any network, the units marked in held
// (nil: none) kept whatever it says. It returns the network, which of its
// units are held, and how many it dropped.
func dropIdle(net *nn.Depth2, X, Y, Xv, Yv *mat.Dense, held []bool) (*nn.Depth2, []bool, int) {
	limit := 2 * certify.RelResidual(Y, net.Forward(X))
	dropped := 0
	for net.Hidden() > 1 {
		j := leastNeeded(net, X, Y, held)
		if j < 0 {
			break
		}
		cand := withoutUnit(net, j)
		// A singular fit (a unit active on none of the rows, or two with
		// one output) leaves the output layer as it is.
		if fitted, ok := fitOutputLayer(cand, X, Y); ok {
			cand = fitted
		}
		if certify.RelResidual(Y, cand.Forward(X)) > limit && certify.RelResidual(Yv, cand.Forward(Xv)) > certify.RelResidual(Yv, net.Forward(Xv)) {
			break
		}
		net, held = cand, without(held, j)
		dropped++
	}
	return net, held, dropped
}

// without returns held without entry j (nil stays nil).
func without(held []bool, j int) []bool {
	if held == nil {
		return nil
	}
	return append(held[:j:j], held[j+1:]...)
}

// refineFor returns refine's queries and answers for net with extra more
// units.
func (e *extractor) refineFor(ctx context.Context, net *nn.Depth2, extra int) (*mat.Dense, *mat.Dense, error) {
	m, d, p := net.Hidden()+extra, net.In(), net.Out()
	params := m*(d+1) + p*(m+1)
	return e.refineData(ctx, max(refineRowsPerParam*params/p, 4*m))
}

// dropToWidth returns net with its records beyond the width given
// dropped. A record read off a jump that held two units' parts (behind a
// coarse oracle) passes for a unit of its own. The unit whose removal the
// least-squares fit of the output layer misses least goes, one at a time
// (the one that contributes least when that fit is singular); then the
// output layer is fitted again.
func (e *extractor) dropToWidth(net *nn.Depth2, X, Y *mat.Dense) *nn.Depth2 {
	if e.opt.Hidden == 0 {
		return net
	}
	net, _, n := dropTo(net, X, Y, e.opt.Hidden, nil)
	e.diag.Duplicates += n
	return net
}

// dropTo is dropToWidth's drop for any network and width, the units
// marked in held (nil: none) kept. It returns the network, which of its
// units are held, and how many it dropped.
func dropTo(net *nn.Depth2, X, Y *mat.Dense, width int, held []bool) (*nn.Depth2, []bool, int) {
	if net.Hidden() <= width {
		return net, held, 0
	}
	dropped := 0
	for net.Hidden() > width {
		j := leastNeeded(net, X, Y, held)
		if j < 0 {
			break
		}
		net, held = withoutUnit(net, j), without(held, j)
		dropped++
	}
	if fitted, ok := fitOutputLayer(net, X, Y); ok {
		net = fitted
	}
	return net, held, dropped
}

// leastNeeded returns the unit whose removal the output layer's
// least-squares fit on (X, Y) misses least (leastMissed), or, when that
// fit is singular (a unit active on none of the rows of X, or two units
// with one output), the one that contributes least (contributions);
// units marked in held (nil: none) are not candidates.
func leastNeeded(net *nn.Depth2, X, Y *mat.Dense, held []bool) int {
	if j, ok := leastMissed(net, X, Y, held); ok {
		return j
	}
	return argminFree(contributions(net, X), held)
}

// argminFree returns the index of the smallest of v not marked in held
// and not NaN (-1 when there is none).
func argminFree(v []float64, held []bool) int {
	low := -1
	for j := range v {
		if (held == nil || !held[j]) && !math.IsNaN(v[j]) && (low < 0 || v[j] < v[low]) {
			low = j
		}
	}
	return low
}

// gnSteps runs at most steps Gauss–Newton steps of the least-squares
// polish on (X, Y) from net, each step's linear problem (activation
// pattern held fixed) solved by CGLS, keeping a step only when it lowers
// the residual.
func (e *extractor) gnSteps(ctx context.Context, net *nn.Depth2, X, Y *mat.Dense, steps int) (*nn.Depth2, error) {
	best, bestRes := net, certify.RelResidual(Y, net.Forward(X))
	for step := 0; step < steps; step++ {
		if err := ctx.Err(); err != nil {
			return net, err
		}
		if e.opt.Progress != nil {
			e.opt.Progress("least-squares polish", step, steps)
		}
		cand, twins := mergeTwins(gaussNewton(best, X, Y))
		e.diag.Duplicates += twins
		e.diag.RefineSteps++
		r := certify.RelResidual(Y, cand.Forward(X))
		// A unit that contributes next to nothing is a copy of another
		// (two records of one hyperplane make the fit degenerate and slow)
		// or twins whose output columns cancel: without it, a step must
		// do at least as well.
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
	return best, nil
}

// refineData returns n fresh standard Gaussian queries (random points of
// the domain when there is one) and the oracle's
// answers for refine. They are kept: a later refine (the search's trial
// fits, then the final one, with more units) reuses them and queries only
// the rows it needs beyond them.
func (e *extractor) refineData(ctx context.Context, n int) (*mat.Dense, *mat.Dense, error) {
	have := 0
	if e.refX != nil {
		have, _ = e.refX.Dims()
	}
	if n > have {
		if e.refRng == nil {
			// A stream of its own: a trial fit leaves the lines the
			// search goes on with as they would be without it.
			e.refRng = rng.New(e.opt.Seed ^ 0x2545f4914f6cdd1d)
		}
		X := mat.NewDense(n-have, e.d, nil)
		for i := range X.RawMatrix().Data {
			X.RawMatrix().Data[i] = e.refRng.NormFloat64()
		}
		if e.dom != nil {
			// A stage of a deeper network: the network it fits is the
			// oracle's only on its domain.
			for i := 0; i < n-have; i++ {
				X.SetRow(i, e.dom.sample(e.refRng))
			}
		}
		Y, err := e.o.query(ctx, X)
		if err != nil {
			return nil, nil, err
		}
		e.diag.QueriesRefine += n - have
		if have == 0 {
			e.refX, e.refY = X, Y
		} else {
			var X2, Y2 mat.Dense
			X2.Stack(e.refX, X)
			Y2.Stack(e.refY, Y)
			e.refX, e.refY = &X2, &Y2
		}
	}
	return e.refX.Slice(0, n, 0, e.d).(*mat.Dense), e.refY.Slice(0, n, 0, e.o.p).(*mat.Dense), nil
}

// refineSteps caps the Gauss–Newton steps of refine and of the polish
// with grown units before the drop to the width, and finalSteps those of
// the polish after it. Each step must lower the residual by a tenth or
// the polish ends, so a cap ends only a polish still gaining: from a
// drop that leaves 1e-2 or more, eight steps are not always enough to
// reach float32's rounding (a 784-128-10 served in float32, seed 2 of
// bench/extract_fashion.py: 4.6e-7 with eight, one of the 10 000 test
// images with another argmax; 1.7e-7 and every argmax with finalSteps).
const (
	refineSteps = 8
	finalSteps  = 24
)

// weakest returns the unit with the smallest contribution (contributions)
// and whether it is below 1% of the median contribution.
func weakest(net *nn.Depth2, X *mat.Dense) (int, bool) {
	c := contributions(net, X)
	mid := median(append([]float64(nil), c...))
	low := argminFree(c, nil)
	if low < 0 {
		return 0, false
	}
	return low, c[low] < 0.01*mid
}

// contributions returns each unit's contribution ‖A_{:,i}‖ ·
// rms(ReLU(w_i·x + b_i)) over the rows of X.
func contributions(net *nn.Depth2, X *mat.Dense) []float64 {
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
	return c
}

// hiddenFeatures returns [ReLU(X·Wᵀ + 1·bᵀ), 1]: the output layer's
// inputs at the rows of X, with a column of ones for its bias.
func hiddenFeatures(net *nn.Depth2, X *mat.Dense) *mat.Dense {
	n, _ := X.Dims()
	m := net.Hidden()
	H := mat.NewDense(n, m+1, nil)
	H.Slice(0, n, 0, m).(*mat.Dense).Mul(X, net.W.T())
	for i := 0; i < n; i++ {
		row := H.RawRowView(i)
		for j := 0; j < m; j++ {
			row[j] = math.Max(row[j]+net.B[j], 0)
		}
		row[m] = 1
	}
	return H
}

// outputNormal returns the output layer's least-squares problem on
// (X, Y): the Cholesky factor of HᵀH and the coefficients β (m+1)×p, A's
// transpose above c, with H = hiddenFeatures(net, X).
func outputNormal(net *nn.Depth2, X, Y *mat.Dense) (*mat.Cholesky, *mat.Dense, bool) {
	H := hiddenFeatures(net, X)
	var G mat.SymDense
	G.SymOuterK(1, H.T())
	var chol mat.Cholesky
	if !chol.Factorize(&G) {
		return nil, nil, false
	}
	var HY, beta mat.Dense
	HY.Mul(H.T(), Y)
	if err := chol.SolveTo(&beta, &HY); err != nil {
		return nil, nil, false
	}
	return &chol, &beta, true
}

// fitOutputLayer returns net with its output layer (A, c) the
// least-squares fit to (X, Y) on its hidden units' outputs.
func fitOutputLayer(net *nn.Depth2, X, Y *mat.Dense) (*nn.Depth2, bool) {
	_, beta, ok := outputNormal(net, X, Y)
	if !ok {
		return net, false
	}
	m, p := net.Hidden(), net.Out()
	out := net.Clone()
	out.A.Copy(beta.Slice(0, m, 0, p).T())
	copy(out.C, beta.RawRowView(m))
	return out, true
}

// leastMissed returns the hidden unit whose removal raises the residual
// of the output layer's least-squares fit to (X, Y) the least: dropping
// regressor j from a least-squares fit raises its residual sum of squares
// by Σ_o β_jo² / (HᵀH)⁻¹_jj (one solve for every unit at once). A record
// a few hundredths off a unit found twice explains almost nothing the
// unit's own record does not; a unit found once is missed in full.
func leastMissed(net *nn.Depth2, X, Y *mat.Dense, held []bool) (int, bool) {
	chol, beta, ok := outputNormal(net, X, Y)
	if !ok {
		return 0, false
	}
	var Ginv mat.SymDense
	if err := chol.InverseTo(&Ginv); err != nil {
		return 0, false
	}
	rise := make([]float64, net.Hidden())
	for j := range rise {
		for _, b := range beta.RawRowView(j) {
			rise[j] += b * b
		}
		rise[j] /= Ginv.At(j, j)
	}
	best := argminFree(rise, held)
	return best, best >= 0
}

// twinTol is how close two records' hyperplanes (unit normal and offset
// along it) must be for mergeTwins to take them for one: far below the
// distance between units of trained networks, far above what the polish
// leaves between two records it moved onto one hyperplane.
const twinTol = 1e-4

// mergeTwins returns net with the records of one hyperplane merged into
// one unit, and how many records it merged away. Twins compute one
// ReLU up to a positive scale, ReLU(w_j·x + b_j) = (‖w_j‖/‖w_i‖)·ReLU(w_i·x +
// b_i), so record i takes record j's output column times that scale and
// the network's function stays. The polish can move two records onto one
// hyperplane with opposite output columns (behind a float32 oracle, where
// the search keeps records that are not units): each contributes much,
// the pair nothing, and only merged does the pair show as the idle unit
// it is (weakest).
func mergeTwins(net *nn.Depth2) (*nn.Depth2, int) {
	m := net.Hidden()
	norm := make([]float64, m)
	for j := range norm {
		w := net.W.RawRowView(j)
		norm[j] = math.Sqrt(dotf(w, w))
	}
	twinOf := make([]int, m)
	merged := 0
	for j := range twinOf {
		twinOf[j] = -1
		for i := 0; i < j && norm[j] > 0; i++ {
			if twinOf[i] >= 0 || norm[i] == 0 {
				continue
			}
			wi, wj := net.W.RawRowView(i), net.W.RawRowView(j)
			gap := math.Abs(net.B[i]/norm[i] - net.B[j]/norm[j])
			for k := 0; k < len(wi) && gap <= twinTol; k++ {
				gap = math.Max(gap, math.Abs(wi[k]/norm[i]-wj[k]/norm[j]))
			}
			if gap <= twinTol {
				twinOf[j] = i
				merged++
				break
			}
		}
	}
	if merged == 0 {
		return net, 0
	}
	out := net.Clone()
	var keep []int
	for j, i := range twinOf {
		if i < 0 {
			keep = append(keep, j)
			continue
		}
		for o := 0; o < net.Out(); o++ {
			out.A.Set(o, i, out.A.At(o, i)+norm[j]/norm[i]*net.A.At(o, j))
		}
	}
	return keepUnits(out, keep), merged
}

// withoutUnit returns net without hidden unit i.
func withoutUnit(net *nn.Depth2, i int) *nn.Depth2 {
	keep := make([]int, 0, net.Hidden()-1)
	for j := 0; j < net.Hidden(); j++ {
		if j != i {
			keep = append(keep, j)
		}
	}
	return keepUnits(net, keep)
}

// keepUnits returns net with the units listed in keep (at least one) only,
// in that order.
func keepUnits(net *nn.Depth2, keep []int) *nn.Depth2 {
	d, p := net.In(), net.Out()
	out := &nn.Depth2{W: mat.NewDense(len(keep), d, nil), B: make([]float64, len(keep)), A: mat.NewDense(p, len(keep), nil), C: append([]float64(nil), net.C...)}
	for k, j := range keep {
		out.W.SetRow(k, net.W.RawRowView(j))
		out.B[k] = net.B[j]
		out.A.SetCol(k, mat.Col(nil, j, net.A))
	}
	return out
}

// gaussNewton returns net after one Gauss–Newton step on ‖Y − f(X)‖²_F with
// the activation pattern of net held fixed: the linear least-squares
// problem in (δW, δb, δA, δc) solved by CGLS (matrix-free: each product
// costs two n×d×m matrix products).
func gaussNewton(net *nn.Depth2, X, Y *mat.Dense) *nn.Depth2 {
	return gaussNewtonHeld(net, X, Y, nil)
}

// gaussNewtonHeld is gaussNewton with the rows (w_j, b_j) of the units
// marked in held kept as they are (nil: none).
func gaussNewtonHeld(net *nn.Depth2, X, Y *mat.Dense, held []bool) *nn.Depth2 {
	n, _ := X.Dims()
	p := net.Out()
	gs := newGNSystem(net, X)
	gs.held = held
	F := net.Forward(X)
	R := mat.NewDense(n, p, nil)
	R.Sub(Y, F)
	gs.scaling()
	applyP := func(v gnVec) *mat.Dense { return gs.apply(gs.precond(v, false)) }
	adjointP := func(r *mat.Dense) gnVec { return gs.precond(gs.adjoint(r), true) }
	// min ‖J·P·y − R‖, x = P·y.
	x := cgls(applyP, adjointP, gs.newVec, R, 40, 1e-14)
	x = gs.precond(x, false)
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

// parts lists v's four parts.
func (v gnVec) parts() [][]float64 {
	return [][]float64{v.W.RawMatrix().Data, v.b, v.A.RawMatrix().Data, v.c}
}

// stepVec is a Gauss–Newton step held as parts (slices of parameters):
// what cgls needs to treat it as one vector.
type stepVec interface{ parts() [][]float64 }

// dotParts is the inner product of v and w as vectors.
func dotParts(v, w stepVec) float64 {
	s := 0.0
	wp := w.parts()
	for k, a := range v.parts() {
		s += dotf(a, wp[k])
	}
	return s
}

// axpyParts sets v to a·v + s·w.
func axpyParts(a float64, v stepVec, s float64, w stepVec) {
	wp := w.parts()
	for k, x := range v.parts() {
		for i := range x {
			x[i] = a*x[i] + s*wp[k][i]
		}
	}
}

// cgls minimises ‖apply(y) − R‖ by conjugate gradients on the normal
// equations (CGLS), from y = 0 (zero), at most iters iterations, until
// ‖adjoint(r)‖² falls below rel of its start.
func cgls[V stepVec](apply func(V) *mat.Dense, adjoint func(*mat.Dense) V, zero func() V, R *mat.Dense, iters int, rel float64) V {
	x := zero()
	r := mat.DenseCopyOf(R)
	s := adjoint(r)
	q := zero()
	axpyParts(0, q, 1, s)
	gamma := dotParts(s, s)
	g0 := gamma
	for it := 0; it < iters && gamma > rel*g0; it++ {
		Jq := apply(q)
		qq := mat.Norm(Jq, 2)
		if qq == 0 {
			break
		}
		alpha := gamma / (qq * qq)
		axpyParts(1, x, alpha, q)
		var T mat.Dense
		T.Scale(alpha, Jq)
		r.Sub(r, &T)
		s = adjoint(r)
		g := dotParts(s, s)
		beta := g / gamma
		gamma = g
		axpyParts(beta, q, 1, s) // q = s + β·q
	}
	return x
}

// gnSystem is gaussNewton's linear least-squares problem: the Jacobian of
// f(X) at net with its activation pattern D held fixed (H the hidden
// values), applied matrix-free, and its Jacobi preconditioner.
type gnSystem struct {
	net        *nn.Depth2
	X, H, D    *mat.Dense
	n, d, m, p int
	// sW, sB, sA (per unit) and sC scale the step's parts (scaling);
	// U, when set, mixes the units' rows of δW and δb instead of sW and
	// sB.
	sW, sB, sA []float64
	sC         float64
	U          *mat.TriDense
	// held marks the units whose rows the step leaves as they are.
	held []bool
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

// scaling sets the preconditioner: CGLS runs on J·P. For the output
// layer's parts P is the inverse square root of diag(JᵀJ) (Jacobi). For
// the hidden units' rows (δw_j, δb_j) JᵀJ's block (j, k) is (a_j·a_k)·Σ_x
// D_j D_k x̃x̃ᵀ (x̃ = (x, 1)), which for standard Gaussian queries is close
// to M_jk·I with M = (AᵀA)∘(DᵀD): the units couple through their output
// columns (m units share p ≪ m outputs, so AᵀA is far from diagonal, and a
// diagonal scaling leaves CGLS crawling along it). With M = UᵀU
// (Cholesky), P = U⁻¹ ⊗ I makes that part of JᵀJ·P close to the identity.
// A rarely active unit scales with how often it is active, which M holds
// too. When M is not positive definite the rows are scaled by its diagonal.
func (gs *gnSystem) scaling() {
	gs.jacobi()
	m, D, A := gs.m, gs.D, gs.net.A
	var N, AA mat.SymDense
	N.SymOuterK(1, D.T())
	AA.SymOuterK(1, A.T())
	M := mat.NewSymDense(m, nil)
	for j := 0; j < m; j++ {
		for k := j; k < m; k++ {
			M.SetSym(j, k, N.At(j, k)*AA.At(j, k))
		}
	}
	var chol mat.Cholesky
	if !chol.Factorize(M) {
		return
	}
	gs.U = mat.NewTriDense(m, mat.Upper, nil)
	chol.UTo(gs.U)
}

// jacobi sets the diagonal (Jacobi) scaling: the inverse square root of
// diag(JᵀJ) (a unit's weights scale with its output column and how often
// it is active; without it CGLS stalls on the rarely active units).
func (gs *gnSystem) jacobi() {
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

// precond returns P·v, or Pᵀ·v when trans is set.
func (gs *gnSystem) precond(v gnVec, trans bool) (out gnVec) {
	if trans {
		v = gs.hold(v)
	} else {
		defer func() { out = gs.hold(out) }()
	}
	out = gs.newVec()
	for j := 0; j < gs.m; j++ {
		src, dst := v.W.RawRowView(j), out.W.RawRowView(j)
		if gs.U != nil {
			copy(dst, src)
			out.b[j] = v.b[j]
		} else {
			for k := range src {
				dst[k] = src[k] * gs.sW[j]
			}
			out.b[j] = v.b[j] * gs.sB[j]
		}
		for o := 0; o < gs.p; o++ {
			out.A.Set(o, j, v.A.At(o, j)*gs.sA[j])
		}
	}
	if gs.U != nil {
		// U⁻¹ (or U⁻ᵀ) applied to the rows of δW and δb alike.
		tA := blas.NoTrans
		if trans {
			tA = blas.Trans
		}
		U := gs.U.RawTriangular()
		blas64.Trsm(blas.Left, tA, 1, U, out.W.RawMatrix())
		blas64.Trsm(blas.Left, tA, 1, U, blas64.General{Rows: gs.m, Cols: 1, Stride: 1, Data: out.b})
	}
	for o := range out.c {
		out.c[o] = v.c[o] * gs.sC
	}
	return out
}

// hold returns v with the held units' rows set to zero (v itself when
// none is held; v is changed in place).
func (gs *gnSystem) hold(v gnVec) gnVec {
	for j, h := range gs.held {
		if h {
			clear(v.W.RawRowView(j))
			v.b[j] = 0
		}
	}
	return v
}
