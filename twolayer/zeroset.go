package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/linalg"
)

// The zero-set start is the exact route's start for wide ReLU networks. It
// is not in [BJW19]: it reads no moments, so its cost and its sample needs
// grow with k and d, not with the k² of the order-4 moment (tensor start)
// or the k⁴ per sample of the parity start's equations.
//
// On noiseless data the column span of Y holds every unit's activation
// f_i = ReLU(X·v_i), and f_i vanishes on about half of the samples, where a
// generic vector of the span vanishes nowhere: the units are the sparsest
// directions of the span. With B a basis of the span on R samples
// (spread evenly over the data) and g a coefficient vector, the iteration
//
//	r = B·g;  S = the R/4 samples where r is smallest;
//	g = the null vector of B restricted to S (its smallest eigenvector)
//
// has every unit as a fixed point (the zeros of f_i are its smallest
// entries, and f_i is the only vector of the span vanishing on all of them)
// and reaches one from a rough start in 10–20 steps: a sample set on
// which most rows are zeros of one unit has that unit as its nearest null
// direction, and its zeros then fill the next set. The starts are input
// directions h: the samples most opposed to h (the polish's confident
// zeros) are zeros of the units near h. Each h is drawn from the span of
// the units' directions (the least-squares regression of B on X) with the
// units already found projected out, so that successive starts land on
// units not yet found (measured: 145 starts for k = 100 units, 329 for
// k = 200).
//
// A unit is accepted when its activation r is nonnegative and vanishes on
// at least a fifth of the R samples, and its row, solving X·z = r on the
// samples where r is positive, reproduces r as ReLU(X·z) on all R. The
// polish (ExactPolish) then certifies the row on every sample, as it does
// any start's.
//
// Cost per step: R·k for r, (R/4)·k²/2 for the Gram of S, k³/3 for its
// Cholesky factor (inverse iteration): at k = 100 (R = 2000) about
// 2300 steps of 3·10⁶ multiply-adds, 2.3 s of one core.

// zeroSetRows is how many samples (spread evenly) the zero-set start
// iterates on: max(2000, 30·k, 4·d) — 30 per unit (measured at k = 200,
// d = m = 200: 200 units in 329 starts from 30 per unit, 52 units in 620
// from 20), and enough positive samples (about half) to solve each row's d
// unknowns.
func zeroSetRows(n, d, k int) int { return min(n, zeroSetFloor(d, k)) }

// zeroSetFloor is the exact route's sample floor with the zero-set start:
// its own rows (zeroSetRows) are the data it cannot do without.
func zeroSetFloor(d, k int) int { return max(2000, 30*k, 4*d) }

// ExactFloor is the fewest samples the exact route for the ReLU certifies
// from (its zero-set start's floor, max(2000, 30·k, 4·d)), for callers that
// fit a sample of larger data (package outofcore).
func ExactFloor(d, k int) int { return zeroSetFloor(d, k) }

// zeroSetSearch is the zero-set start's state: its sample block and the
// rows found so far, which Resample extends.
type zeroSetSearch struct {
	X, B  *mat.Dense // R×d inputs and R×k basis of col(Y) on the spread rows
	span  *mat.Dense // d×k orthonormal basis of the units' directions
	found [][]float64
	// gs holds each found row's coefficients g: its activation is B·g.
	gs    [][]float64
	tries int
}

// nulls returns the found rows' coefficient vectors, padded with nil to k
// rows (the rows searchZeroSets filled in).
func (zs *zeroSetSearch) nulls(k int) [][]float64 {
	out := make([][]float64, k)
	copy(out, zs.gs)
	return out
}

// zeroSetFirstTries is how many starts may find no unit before the search
// gives up (on noiseless data most starts find one: 100 of 145 at
// d = k = m = 100).
const zeroSetFirstTries = 20

// zeroSetMaxTries bounds the starts one search makes: 3·k + 20 (measured:
// 1.3·k at k = 100).
func zeroSetMaxTries(k int) int { return 3*k + 20 }

// zeroSetStart computes the zero-set start (the comment above) for p.
func zeroSetStart(ctx context.Context, p *problem, opt Options) (*Start, error) {
	red0, err := reduceOutputs(p, opt.Hidden, "the zero-set start", exactFloor)
	if err != nil {
		return nil, err
	}
	k := red0.K
	n, d, m := p.n, p.d, p.m
	R := zeroSetRows(n, d, k)
	st := &Start{p: p, opt: opt, Rows: R, K: k, Inferred: red0.Inferred, ExactRank: red0.ExactRank,
		SingularValues: red0.S, Warnings: red0.Warnings}
	// B = Y·V_k·Σ_k⁻¹ on the spread rows: unit-scale coordinates.
	P := mat.DenseCopyOf(red0.V.Slice(0, m, 0, k))
	for j := 0; j < k; j++ {
		for i := 0; i < m; i++ {
			P.Set(i, j, P.At(i, j)/red0.S[j])
		}
	}
	zs := &zeroSetSearch{X: mat.NewDense(R, d, nil), B: mat.NewDense(R, k, nil)}
	pr, yr := P.RawMatrix(), p.Y.RawMatrix()
	for i := 0; i < R; i++ {
		q := spreadRow(i, R, n)
		copy(zs.X.RawRowView(i), p.X.RawRowView(q))
		kern.RowTimes(zs.B.RawRowView(i), yr.Data[q*yr.Stride:q*yr.Stride+m], pr.Data, pr.Stride)
	}
	// The units' directions span the regression of B on X (d×k).
	C, err := linalg.LstSq(zs.X, zs.B)
	if err != nil {
		return nil, fmt.Errorf("twolayer: zero-set start, the units' span: %w", err)
	}
	if zs.span, _, _, err = linalg.ThinSVD(C); err != nil {
		return nil, fmt.Errorf("twolayer: zero-set start, the units' span: %w", err)
	}
	st.zeroSet = zs
	if err := st.searchZeroSets(ctx, rand.New(rand.NewPCG(opt.Seed, 0x2e50_5e75)), p.roundoff); err != nil {
		return nil, err
	}
	return st, nil
}

// searchZeroSets runs starts until k distinct units are found or
// zeroSetMaxTries starts are spent, and sets st.V: the found rows, then
// (for units not found) directions of the span orthogonal to them, which
// the polish reports as uncertified.
func (st *Start) searchZeroSets(ctx context.Context, rng *rand.Rand, roundoff float64) error {
	zs, k := st.zeroSet, st.K
	R, d := zs.X.Dims()
	it := newZeroSetIter(zs.B)
	tol, unitTol := polishTolsFor(roundoff).null, polishTolsFor(roundoff).unit
	misses := 0
	for try := 0; try < zeroSetMaxTries(k) && len(zs.found) < k; try++ {
		if len(zs.found) == 0 && try == zeroSetFirstTries {
			break // no unit at all: not a bias-free ReLU network's data
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st.opt.progress("zero-set start", len(zs.found), k)
		zs.tries++
		// Every other start after a miss is anchored: an input direction
		// orthogonal to the rows found reaches a unit nearly in their span
		// (ill-conditioned V) only from far away, where an anchor outside
		// the found units' coefficients excludes them (zeroSetIter.anchor).
		var g0 []float64
		it.anchor = nil
		if misses%2 == 1 {
			it.anchor = zs.freshAnchor(rng)
			g0 = slices.Clone(it.anchor)
		} else {
			g0 = it.fromDirection(zs.X, zs.freshDirection(rng))
		}
		g, r, ok := it.converge(g0, tol)
		if ok {
			if z, good := activeRow(zs.X, r, tol, unitTol); good && !zs.has(z) {
				zs.found = append(zs.found, z)
				zs.gs = append(zs.gs, g)
				continue
			}
		}
		misses++
	}
	st.opt.progress("zero-set start", len(zs.found), k)
	V := mat.NewDense(k, d, nil)
	for i, z := range zs.found {
		V.SetRow(i, z)
	}
	for i := len(zs.found); i < k; i++ {
		V.SetRow(i, zs.freshDirection(rng))
	}
	normalizeRows(V)
	st.V = V
	st.Rows = R
	return nil
}

// freshDirection draws a unit direction of the span with the found rows
// projected out.
func (zs *zeroSetSearch) freshDirection(rng *rand.Rand) []float64 {
	d, k := zs.span.Dims()
	h := make([]float64, d)
	kern.RowTimes(h, randUnit(k, rng), zs.span.RawMatrix().Data, zs.span.RawMatrix().Stride)
	if !unitOutside(h, zs.found) {
		clear(h)
		h[rng.IntN(d)] = 1
	}
	return h
}

// freshAnchor draws a unit coefficient vector orthogonal to the found
// units' coefficients (a random direction when all k are spanned).
func (zs *zeroSetSearch) freshAnchor(rng *rand.Rand) []float64 {
	_, k := zs.B.Dims()
	e := randUnit(k, rng)
	if !unitOutside(e, zs.gs) {
		e = randUnit(k, rng)
		unitOutside(e, nil)
	}
	return e
}

// unitOutside projects the span of rows out of v (Gram–Schmidt against an
// orthonormal basis of them) and scales v to unit length; it reports false,
// leaving v unscaled, when nothing is left.
func unitOutside(v []float64, rows [][]float64) bool {
	for _, b := range orthonormalRows(rows) {
		s := dot(b, v)
		for j := range v {
			v[j] -= s * b[j]
		}
	}
	norm := math.Sqrt(dot(v, v))
	if !(norm > 1e-12) {
		return false
	}
	for j := range v {
		v[j] /= norm
	}
	return true
}

// has reports whether z is (up to rounding) a row already found.
func (zs *zeroSetSearch) has(z []float64) bool {
	for _, f := range zs.found {
		if dot(f, z) > 1-1e-9 {
			return true
		}
	}
	return false
}

// orthonormalRows returns an orthonormal basis of the rows' span by
// Gram–Schmidt (twice, for the rows' near-dependence).
func orthonormalRows(rows [][]float64) [][]float64 {
	var out [][]float64
	for _, r := range rows {
		v := slices.Clone(r)
		for pass := 0; pass < 2; pass++ {
			for _, b := range out {
				s := dot(b, v)
				for j := range v {
					v[j] -= s * b[j]
				}
			}
		}
		if norm := math.Sqrt(dot(v, v)); norm > 1e-8 {
			for j := range v {
				v[j] /= norm
			}
			out = append(out, v)
		}
	}
	return out
}

// zeroSetIter holds the iteration's buffers for a basis B (R×k).
type zeroSetIter struct {
	B       *mat.Dense
	r       []float64
	order   []int
	rows    []float64 // the selected rows of B, contiguous
	gram    []float64
	g, prev []float64
	// anchor, when set, replaces the null direction by the g minimising
	// ‖B_S·g‖ subject to g·anchor = 1 (G⁻¹·anchor, one solve): a unit
	// whose coefficients are orthogonal to the anchor (every unit found,
	// for an anchor orthogonal to theirs) is then no fixed point.
	anchor  []float64
	scratch []float64
	// upper is the unfactored Gram of the selected rows (upper triangle),
	// member the selected set it belongs to (members rows), for gramOf's
	// updates; next, tmp and chg are its scratch.
	upper, tmp, chg []float64
	member, next    []bool
	members         int
}

func newZeroSetIter(B *mat.Dense) *zeroSetIter {
	R, k := B.Dims()
	order := make([]int, R)
	return &zeroSetIter{B: B, r: make([]float64, R), order: order, scratch: make([]float64, R),
		rows: make([]float64, (R/4)*k), gram: make([]float64, k*k),
		upper: make([]float64, k*k), tmp: make([]float64, k*k), chg: make([]float64, (R/4)*k),
		member: make([]bool, R), next: make([]bool, R),
		g: make([]float64, k), prev: make([]float64, k)}
}

// gramOf sets it.upper to the upper triangle of the Gram of the selected
// rows it.order[:s] (copied to it.rows): from the previous set's Gram by
// adding the rows that entered and subtracting those that left when they
// are at most a quarter of s (near a fixed point only a few rows change),
// else from all s rows. Rounding from the updates stays at u·‖B_S‖², which
// refine takes out of an accepted unit's null vector.
func (it *zeroSetIter) gramOf(s int) {
	R, k := it.B.Dims()
	clear(it.next)
	for _, q := range it.order[:s] {
		it.next[q] = true
	}
	defer func() {
		it.member, it.next = it.next, it.member
		it.members = s
	}()
	if it.members == s {
		var added, removed []int
		for q := 0; q < R && len(added)+len(removed) <= s/4; q++ {
			switch {
			case it.next[q] && !it.member[q]:
				added = append(added, q)
			case it.member[q] && !it.next[q]:
				removed = append(removed, q)
			}
		}
		if len(added)+len(removed) <= s/4 {
			it.addRows(it.upper, added)
			clear(it.tmp)
			it.addRows(it.tmp, removed)
			for i := 0; i < k; i++ {
				for j := i; j < k; j++ {
					it.upper[i*k+j] -= it.tmp[i*k+j]
				}
			}
			return
		}
	}
	clear(it.upper)
	linalg.AddGram(it.upper, blas64.General{Rows: s, Cols: k, Stride: k, Data: it.rows[:s*k]})
}

// addRows adds the upper triangle of the Gram of B's rows qs to c.
func (it *zeroSetIter) addRows(c []float64, qs []int) {
	_, k := it.B.Dims()
	for i, q := range qs {
		copy(it.chg[i*k:(i+1)*k], it.B.RawRowView(q))
	}
	if len(qs) > 0 {
		linalg.AddGram(c, blas64.General{Rows: len(qs), Cols: k, Stride: k, Data: it.chg[:len(qs)*k]})
	}
}

// symmetric sets it.gram to the full symmetric matrix of it.upper plus
// shift on the diagonal (the matrix CholeskyInPlace factors in place).
func (it *zeroSetIter) symmetric(shift float64) {
	_, k := it.B.Dims()
	for i := 0; i < k; i++ {
		for j := i; j < k; j++ {
			v := it.upper[i*k+j]
			it.gram[i*k+j], it.gram[j*k+i] = v, v
		}
		it.gram[i*k+i] += shift
	}
}

// zeroSetSteps bounds the iteration from one start (measured: 2290 steps
// for 145 starts at k = 100, about 16 each).
const zeroSetSteps = 40

// fromDirection returns the null direction of B on the 2·k samples most
// opposed to h (smallest x·h/‖x‖): the polish's confident zeros of a row
// near h.
func (it *zeroSetIter) fromDirection(X *mat.Dense, h []float64) []float64 {
	R, _ := X.Dims()
	_, k := it.B.Dims()
	for q := 0; q < R; q++ {
		x := X.RawRowView(q)
		it.r[q] = dot(x, h) / math.Sqrt(dot(x, x)+1e-300)
	}
	return it.nullOfSmallest(min(2*k, R/4), nil)
}

// nullOfSmallest selects the s samples with the smallest it.r and returns
// the smallest eigenvector of B's Gram on them, by inverse iteration from
// warm (or from a fixed vector when warm is nil).
func (it *zeroSetIter) nullOfSmallest(s int, warm []float64) []float64 {
	_, k := it.B.Dims()
	cut := nthSmallest(it.scratch, it.r, s-1)
	it.order = it.order[:0]
	for q, v := range it.r {
		if v < cut {
			it.order = append(it.order, q)
		}
	}
	for q, v := range it.r { // ties at the cut, by sample index
		if len(it.order) == s {
			break
		}
		if v == cut {
			it.order = append(it.order, q)
		}
	}
	for i, q := range it.order[:s] {
		copy(it.rows[i*k:(i+1)*k], it.B.RawRowView(q))
	}
	it.gramOf(s)
	trace := 0.0
	for i := 0; i < k; i++ {
		trace += it.upper[i*k+i]
	}
	it.symmetric(0)
	if !(trace > 0) {
		// B vanishes on every selected sample: any vector is null.
		if warm != nil {
			return warm
		}
		clear(it.g)
		it.g[0] = 1
		return it.g
	}
	// Shifted inverse iteration: the shift keeps the factorisation
	// positive definite when the null space is exact.
	shift := 1e-13 * trace / float64(k)
	it.symmetric(shift)
	g := it.g
	if warm != nil {
		copy(g, warm)
	} else {
		for i := range g {
			g[i] = 1 / math.Sqrt(float64(k)) * float64(1+i%3)
		}
	}
	for !linalg.CholeskyInPlace(it.gram, k) {
		// Not positive definite at this shift (rounding): larger shift.
		shift *= 1e3
		it.symmetric(shift)
	}
	if it.anchor != nil {
		// The anchored solve, then two plain steps (below) that take the
		// shift's trace out of a converged g.
		copy(g, it.anchor)
		linalg.CholeskySolveInPlace(it.gram, k, g)
	}
	for step := 0; step < 2; step++ {
		linalg.CholeskySolveInPlace(it.gram, k, g)
		norm := math.Sqrt(dot(g, g))
		for i := range g {
			g[i] /= norm
		}
	}
	return g
}

// converge runs the iteration from g until B·g is a unit's activation
// (isUnit), a fixed point that is not one, or zeroSetSteps steps, and
// returns that activation r = B·g, oriented to be nonnegative, and g, with
// ok.
func (it *zeroSetIter) converge(g []float64, tol float64) (gOut, r []float64, ok bool) {
	R, _ := it.B.Dims()
	s := R / 4
	for step := 0; ; step++ {
		it.activation(g)
		if isUnit(it.r, tol) {
			if step > 0 {
				// The last set S holds only the unit's zeros.
				it.refine(g, s)
				it.activation(g)
			}
			return slices.Clone(g), slices.Clone(it.r), true
		}
		if step == zeroSetSteps {
			return nil, nil, false
		}
		copy(it.prev, g)
		g = it.nullOfSmallest(s, g)
		if math.Abs(dot(g, it.prev)) > 1-1e-14 {
			return nil, nil, false
		}
	}
}

// refine improves a null vector g of the last selected rows B_S (s rows,
// it.rows) by two steps of iterative refinement with the Cholesky factor
// of their shifted Gram (it.gram): δ solves (G + σI)·δ = B_Sᵀ·(B_S·g), with
// B_S·g formed from B_S itself, and g − δ is renormalised. The Gram alone
// gives g to about u·κ² (κ the condition number of B_S off its null
// direction), ill-conditioned networks to 1e-11; each step gains a factor
// u·κ², down to about u·κ, what the polish's SVD reaches.
func (it *zeroSetIter) refine(g []float64, s int) {
	_, k := it.B.Dims()
	rho := make([]float64, s)
	delta := make([]float64, k)
	for range 2 {
		for i := range rho {
			rho[i] = dot(it.rows[i*k:(i+1)*k], g)
		}
		clear(delta)
		for i, v := range rho {
			row := it.rows[i*k : (i+1)*k]
			for j := range delta {
				delta[j] += row[j] * v
			}
		}
		linalg.CholeskySolveInPlace(it.gram, k, delta)
		c := dot(delta, g)
		for j := range g {
			g[j] -= delta[j] - c*g[j]
		}
		norm := math.Sqrt(dot(g, g))
		for j := range g {
			g[j] /= norm
		}
	}
}

// activation sets it.r = B·g, with g and r negated when the sum of r is
// negative (a unit's activation is nonnegative).
func (it *zeroSetIter) activation(g []float64) {
	br := it.B.RawMatrix()
	sum := 0.0
	for q := range it.r {
		it.r[q] = dot(br.Data[q*br.Stride:q*br.Stride+br.Cols], g)
		sum += it.r[q]
	}
	if sum < 0 {
		for q := range it.r {
			it.r[q] = -it.r[q]
		}
		for i := range g {
			g[i] = -g[i]
		}
	}
}

// isUnit reports whether r looks like a unit's activation: no entry below
// −tol·max r, and at least a fifth of the samples within tol·max r of
// zero and a fifth above it.
func isUnit(r []float64, tol float64) bool {
	top := slices.Max(r)
	if !(top > 0) {
		return false
	}
	zeros := 0
	for _, v := range r {
		if v < -tol*top {
			return false
		}
		if v <= tol*top {
			zeros++
		}
	}
	return zeros >= len(r)/5 && len(r)-zeros >= len(r)/5
}

// nthSmallest returns the element of v of rank i (0 for the smallest) by
// quickselect on scratch (len(v), overwritten); v is not changed.
func nthSmallest(scratch, v []float64, i int) float64 {
	a := scratch[:len(v)]
	copy(a, v)
	lo, hi := 0, len(a)-1
	for lo < hi {
		pivot := a[lo+(hi-lo)/2]
		l, r := lo, hi
		for l <= r {
			for a[l] < pivot {
				l++
			}
			for a[r] > pivot {
				r--
			}
			if l <= r {
				a[l], a[r] = a[r], a[l]
				l++
				r--
			}
		}
		switch {
		case i <= r:
			hi = r
		case i >= l:
			lo = l
		default:
			return a[i]
		}
	}
	return a[i]
}

// activeRow solves X_P·z = r_P on the samples P where r is positive
// (above tol·max r) by least squares and returns z with unit norm; ok is
// false when those samples do not determine z or when ReLU(X·z) misses r
// by more than unitTol relative on the block (r is then no single unit's
// activation: a nonnegative combination of two units also vanishes on a
// quarter of the samples).
func activeRow(X *mat.Dense, r []float64, tol, unitTol float64) (z []float64, ok bool) {
	_, d := X.Dims()
	top := slices.Max(r)
	var rows []int
	for q, v := range r {
		if v > tol*top {
			rows = append(rows, q)
		}
	}
	if len(rows) < d+1 {
		return nil, false
	}
	// Normal equations: the system is consistent (X·z = r exactly on these
	// samples), and the polish recomputes the row to rounding.
	gram := make([]float64, d*d)
	z = make([]float64, d)
	buf := make([]float64, 0, len(rows)*d)
	for _, q := range rows {
		x := X.RawRowView(q)
		buf = append(buf, x...)
		for j, v := range x {
			z[j] += v * r[q]
		}
	}
	linalg.AddGram(gram, blas64.General{Rows: len(rows), Cols: d, Stride: d, Data: buf})
	for i := 0; i < d; i++ {
		for j := 0; j < i; j++ {
			gram[i*d+j] = gram[j*d+i]
		}
	}
	if !linalg.CholeskyInPlace(gram, d) {
		return nil, false
	}
	linalg.CholeskySolveInPlace(gram, d, z)
	var miss, size float64
	for q, v := range r {
		e := math.Max(0, dot(X.RawRowView(q), z)) - v
		miss += e * e
		size += v * v
	}
	if !(miss <= unitTol*unitTol*size) {
		return nil, false
	}
	norm := math.Sqrt(dot(z, z))
	if !(norm > 0) {
		return nil, false
	}
	for i := range z {
		z[i] /= norm
	}
	return z, true
}
