package extract

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/internal/rng"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
)

// partial is a unit of the last hidden layer as seen so far: G = â ⊗ [w,
// b], its output column times its row over the previous layer's units and
// its offset, on the columns known (the previous layer's units active
// where it was seen, and the offset), up to one sign. A kink of the unit
// in a region where only the units S of the previous layer are active
// gives â ⊗ [w_S, b] exactly (the inactive units' weights do not act
// there), and the same unit seen in several regions gives the same
// product on the columns they share: Carlini et al.'s unification of
// partial signatures, with the scale fixed by the output column.
type partial struct {
	G     *mat.Dense // p × (m+1)
	known []bool     // m+1; the offset's (last) is always known
	seen  int
	// a is the output column as first read, its sign right: a kink's
	// Jacobian jump is â·ŵᵀ with ŵ oriented along the line, so â is the
	// output column times ‖w‖ whichever way the unit faces.
	a []float64
}

// newPartial records unit u found in the frame of pattern act (the
// previous layer's m units active there, in order of u.w's coordinates).
func newPartial(u unit, act []int, m int) *partial {
	p := len(u.a)
	pa := &partial{G: mat.NewDense(p, m+1, nil), known: make([]bool, m+1), seen: 1, a: append([]float64(nil), u.a...)}
	for c, i := range act {
		for o := 0; o < p; o++ {
			pa.G.Set(o, i, u.a[o]*u.w[c])
		}
		pa.known[i] = true
	}
	for o := 0; o < p; o++ {
		pa.G.Set(o, m, u.a[o]*u.b)
	}
	pa.known[m] = true
	return pa
}

// complete reports whether every column is known.
func (pa *partial) complete() bool {
	for _, k := range pa.known {
		if !k {
			return false
		}
	}
	return true
}

// norms returns the norm of pa's known columns and of those it shares
// with q, and the sign s and distance ‖pa − s·q‖ on the shared columns.
func (pa *partial) compare(q *partial) (own, shared, dist float64, sign float64) {
	p, c := pa.G.Dims()
	dot := 0.0
	for j := 0; j < c; j++ {
		if !pa.known[j] {
			continue
		}
		for o := 0; o < p; o++ {
			v := pa.G.At(o, j)
			own += v * v
			if q.known[j] {
				shared += v * v
				dot += v * q.G.At(o, j)
			}
		}
	}
	sign = 1
	if dot < 0 {
		sign = -1
	}
	for j := 0; j < c; j++ {
		if pa.known[j] && q.known[j] {
			for o := 0; o < p; o++ {
				d := pa.G.At(o, j) - sign*q.G.At(o, j)
				dist += d * d
			}
		}
	}
	return math.Sqrt(own), math.Sqrt(shared), math.Sqrt(dist), sign
}

// mergeTol is the relative distance on shared columns within which two
// partial records are one unit, and mergeShare the share of each
// record's norm the shared columns must carry for the match to count.
const (
	mergeTol   = 1e-6
	mergeShare = 1e-2
)

// merge adds record q to the list: into the record it matches (shared
// columns equal up to one sign within mergeTol, carrying mergeShare of
// both), the shared columns averaged and the new ones taken, or as a new
// unit. It returns the list.
func merge(list []*partial, q *partial) []*partial {
	for _, pa := range list {
		own, sh, dist, s := pa.compare(q)
		qown, qsh, _, _ := q.compare(pa)
		if sh == 0 || sh < mergeShare*own || qsh < mergeShare*qown || dist > mergeTol*math.Max(sh, qsh) {
			continue
		}
		p, c := pa.G.Dims()
		n := float64(pa.seen)
		for j := 0; j < c; j++ {
			if !q.known[j] {
				continue
			}
			for o := 0; o < p; o++ {
				v := s * q.G.At(o, j)
				if pa.known[j] {
					v = (n*pa.G.At(o, j) + v) / (n + 1)
				}
				pa.G.Set(o, j, v)
			}
			pa.known[j] = true
		}
		pa.seen++
		return list
	}
	return append(list, q)
}

// unit returns the unit of a complete record: G = â·[w, b] factored with
// w of unit norm and â along the output column first read (its sign
// right; w's orientation is one of the two, orientLast decides).
func (pa *partial) unit() unit {
	p, c := pa.G.Dims()
	dir := append([]float64(nil), pa.a...)
	an := math.Sqrt(dotf(dir, dir))
	for o := range dir {
		dir[o] /= an
	}
	rho := make([]float64, c)
	for j := range rho {
		for o := 0; o < p; o++ {
			rho[j] += dir[o] * pa.G.At(o, j)
		}
	}
	nw := math.Sqrt(dotf(rho[:c-1], rho[:c-1]))
	u := unit{w: make([]float64, c-1), a: make([]float64, p), b: rho[c-1] / nw}
	for j := range u.w {
		u.w[j] = rho[j] / nw
		u.winf = math.Max(u.winf, math.Abs(u.w[j]))
	}
	for o := range u.a {
		u.a[o] = dir[o] * nw
	}
	return u
}

// patternsIdle is how many regions in a row that bring no new record
// and no new column end the search, once every record is complete, when
// the width given is not reached or not given: the units left do not
// switch in the frequent regions, where f is decided.
const patternsIdle = 4

// patternSamples is the number of standard Gaussian inputs whose
// activation patterns of the previous layer choose the regions searched,
// and maxPatterns caps the regions per unit of that layer.
const (
	patternSamples = 4096
	maxPatterns    = 4
)

// patterns returns the activation patterns of layer n (1-based, the
// layers found so far) on patternSamples standard Gaussian inputs, the
// most frequent first (the regions that matter most for f on such
// inputs), each as the list of its active units.
func (r *deepRun) patterns(n int) [][]int {
	H := r.hidden(gaussianRows(patternSamples, r.d, r.opt.Seed^0x7a3d), n)
	rows, cols := H.Dims()
	count := map[string]int{}
	act := map[string][]int{}
	for i := 0; i < rows; i++ {
		key := make([]byte, cols)
		var on []int
		for j := 0; j < cols; j++ {
			if H.At(i, j) > 0 {
				key[j] = 1
				on = append(on, j)
			}
		}
		k := string(key)
		if count[k] == 0 {
			act[k] = on
		}
		count[k]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		if len(act[k]) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if count[keys[a]] != count[keys[b]] {
			return count[keys[a]] > count[keys[b]]
		}
		return keys[a] < keys[b]
	})
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = act[k]
	}
	return out
}

// patternKey is a pattern's set of active units as a string.
func patternKey(act []int, m int) string {
	key := make([]byte, m)
	for _, i := range act {
		key[i] = 1
	}
	return string(key)
}

// nextPattern chooses the next region to search among the observed
// patterns not yet searched: the one whose active units cover the most
// columns still missing from the incomplete records, the more frequent
// on a tie (none missing: the most frequent, to find units not yet seen).
// When no observed pattern covers a missing column, the most frequent
// pattern with that column's unit added is tried (a region the Gaussian
// inputs seldom reach, where the linear program still finds a point).
// It returns nil when nothing is left to try.
func nextPattern(pats [][]int, list []*partial, m int, done map[string]bool) []int {
	missing := make([]int, m)
	for _, pa := range list {
		for i := 0; i < m; i++ {
			if !pa.known[i] {
				missing[i]++
			}
		}
	}
	best, bestGain := -1, -1
	for i, act := range pats {
		if done[patternKey(act, m)] {
			continue
		}
		gain := 0
		for _, j := range act {
			gain += missing[j]
		}
		if gain > bestGain {
			best, bestGain = i, gain
		}
	}
	if best >= 0 && (bestGain > 0 || countMissing(missing) == 0) {
		return pats[best]
	}
	for j := 0; j < m; j++ {
		if missing[j] == 0 {
			continue
		}
		for _, act := range pats {
			with := append(append([]int(nil), act...), j)
			sort.Ints(with)
			if !slices.Contains(act, j) && !done[patternKey(with, m)] {
				return with
			}
		}
	}
	if best >= 0 {
		return pats[best]
	}
	return nil
}

func countMissing(missing []int) int {
	n := 0
	for _, v := range missing {
		n += v
	}
	return n
}

// byPatterns extracts the last hidden layer (layer k+1, k ≥ 2 layers
// found) region by region: where every unit of layer k is active few of
// its units switch, so it is searched in the frame of each frequent
// activation pattern S of layer k (liftFrame, nextPattern), where f is a
// network of one hidden layer in z_S whose units are layer k+1's with
// their weights over S; each unit found there gives a partial record,
// merged across patterns (merge) until the rows are complete.
// Orientations and the output bias come from a least-squares fit on
// fresh queries (orientLast); records left incomplete are fitted
// (polishLast). It returns the last two layers' W, b, A, c, or a reason.
func (r *deepRun) byPatterns(ctx context.Context, k int, lay *LayerResult) (W *mat.Dense, b []float64, A *mat.Dense, c []float64, failed string, err error) {
	m, _ := r.Ws[k-1].Dims()
	width := r.opt.Widths[k]
	var list []*partial
	pats := r.patterns(k)
	tried, idle := 0, 0
	done := map[string]bool{}
	for tried < maxPatterns*m && !(width > 0 && enough(list, width)) && !(idle >= patternsIdle && enough(list, 0)) {
		act := nextPattern(pats, list, m, done)
		if act == nil {
			break
		}
		done[patternKey(act, m)] = true
		fr, ferr := r.liftFrame(k, act)
		if ferr != nil {
			continue // a region too thin to search
		}
		tried++
		so := r.opt
		so.Hidden = 0
		so.Seed = r.opt.Seed + uint64(k)*0x9e3779b97f4a7c15 + uint64(tried)*7919
		so.Progress = nil
		o := &counted{f: affineOracle(r.root, fr.P, fr.q), d: len(act)}
		e := newExtractor(len(act), so, o)
		e.dom = fr.dom
		e.deep = true
		if _, err := e.search(ctx); err != nil {
			return nil, nil, nil, nil, "", err
		}
		r.addDiag(e.diag)
		lay.Lines += len(e.lines)
		for _, lr := range e.lines {
			lay.Kinks += len(lr.kinks)
		}
		before := progress(list)
		for _, u := range e.units {
			list = merge(list, newPartial(u, act, m))
		}
		if progress(list) > before {
			idle = 0
		} else {
			idle++
		}
		if p := r.opt.Progress; p != nil {
			p(fmt.Sprintf("layer %d of %d: regions", k+1, len(r.opt.Widths)), countComplete(list), width)
		}
	}
	var whole, all []unit
	for _, pa := range list {
		all = append(all, pa.unit())
		if pa.complete() {
			whole = append(whole, all[len(all)-1])
		}
	}
	lay.Units = len(all)
	if len(all) == 0 {
		return nil, nil, nil, nil, fmt.Sprintf("layer %d: no unit found in %d regions", k+1, tried), nil
	}
	if width > 0 && len(all) < width {
		// Units never seen switch in the regions searched change f
		// little or not at all; the certificate decides.
		r.warn = append(r.warn, fmt.Sprintf("layer %d: %d of %d units found in %d regions", k+1, len(all), width, tried))
	}
	// The units seen over every input first: records seen over some
	// inputs only can be a whole unit's fragments that did not unify.
	if len(whole) > 0 {
		W, b, A, c, res, err := r.orientLast(ctx, k, whole)
		if err != nil {
			return nil, nil, nil, nil, "", err
		}
		if res <= wholeTol {
			// The rows come from Jacobian jumps in lifted frames, far
			// from the origin, a few digits short of float64: a
			// least-squares polish restores them.
			net, err := r.polishLast(ctx, k, &nn.Depth2{W: W, B: b, A: A, C: c})
			if err != nil {
				return nil, nil, nil, nil, "", err
			}
			lay.Units, lay.Passed = len(whole), true
			return net.W, net.B, net.A, net.C, failed, nil
		}
	}
	W, b, A, c, _, err = r.orientLast(ctx, k, all)
	if err != nil {
		return nil, nil, nil, nil, "", err
	}
	// A unit's weights over inputs never active where it switches start
	// at zero. Fitted alone (fitMissing), they match f when the records
	// are the layer's units and every such weight matters on the queries;
	// then the rows are polished as whole ones are.
	free, nfree := make([][]bool, len(list)), 0
	for j, pa := range list {
		free[j] = make([]bool, m)
		for i := range free[j] {
			free[j][i] = !pa.known[i]
			if free[j][i] {
				nfree++
			}
		}
	}
	net, res, err := r.fitMissing(ctx, k, &nn.Depth2{W: W, B: b, A: A, C: c}, free)
	if err != nil {
		return nil, nil, nil, nil, "", err
	}
	if net, err = r.polishLast(ctx, k, net); err != nil {
		return nil, nil, nil, nil, "", err
	}
	if res <= wholeTol {
		lay.Passed = true
		lay.Check = fmt.Sprintf("; %d units seen only where some inputs are inactive, their %d weights over those fitted with every other parameter held (relative residual %.1e)", len(all)-len(whole), nfree, res)
		return net.W, net.B, net.A, net.C, failed, nil
	}
	// Otherwise a least-squares fit of every parameter of the last two
	// layers moves them towards what f needs; the certificate decides.
	r.warn = append(r.warn, fmt.Sprintf("layer %d: %d of %d units seen over every input; the weights of the others over inputs never active where they switch come from a least-squares fit", k+1, len(whole), len(all)))
	return net.W, net.B, net.A, net.C, failed, nil
}

// wholeTol is the relative residual on orientLast's queries below which
// the units seen over every input are the layer.
const wholeTol = 1e-9

// polishSteps caps polishLast's Gauss–Newton steps.
const polishSteps = 30

// polishLast fits the last hidden layer and the output layer (net, over
// layer k's outputs) to fresh standard Gaussian queries by Gauss–Newton
// steps (gaussNewton, the activation pattern held fixed in each), kept
// while they lower the relative residual, at most polishSteps of them.
func (r *deepRun) polishLast(ctx context.Context, k int, net *nn.Depth2) (*nn.Depth2, error) {
	m, d, p := net.Hidden(), net.In(), net.Out()
	n := 4 * max(refineRowsPerParam*(m*(d+1)+p*(m+1))/p, 4*m)
	X, Y, err := r.gaussianQueries(ctx, n, 0x1b873593)
	if err != nil {
		return net, err
	}
	r.diag.QueriesRefine += n
	H := r.hidden(X, k)
	best, bestRes := net, certify.RelResidual(Y, net.Forward(H))
	for step := 0; step < polishSteps; step++ {
		if err := ctx.Err(); err != nil {
			return net, err
		}
		cand := gaussNewton(best, H, Y)
		res := certify.RelResidual(Y, cand.Forward(H))
		if !(res < bestRes) {
			break
		}
		best, bestRes = cand, res
	}
	return best, nil
}

// enough reports width complete records (width 0: every record complete).
func enough(list []*partial, width int) bool {
	n := countComplete(list)
	if width > 0 {
		return n >= width
	}
	return n == len(list)
}

// progress counts the records and their known columns.
func progress(list []*partial) int {
	n := len(list)
	for _, pa := range list {
		for _, k := range pa.known {
			if k {
				n++
			}
		}
	}
	return n
}

// countComplete counts the complete records.
func countComplete(list []*partial) int {
	n := 0
	for _, pa := range list {
		if pa.complete() {
			n++
		}
	}
	return n
}

// orientLast resolves the orientations of the last hidden layer's units
// (rows over layer k's outputs) and fits the output bias, from fresh
// standard Gaussian queries: with every unit taken as found, the residual
// f − Σ â_j·ReLU(ŵ_j·h + b̂_j) is affine in layer k's outputs h, with
// linear part L = −Σ_{j flipped} â_j·ŵ_jᵀ (ReLU(−z) = ReLU(z) − z), fitted
// by least squares; the flips solve L by least squares, rounded. It also
// returns the relative residual of the result on those queries.
func (r *deepRun) orientLast(ctx context.Context, k int, units []unit) (*mat.Dense, []float64, *mat.Dense, []float64, float64, error) {
	m, _ := r.Ws[k-1].Dims()
	mu := len(units)
	n := 8 * (m + 1)
	X, Y, err := r.gaussianQueries(ctx, n, 0x3c6ef372)
	if err != nil {
		return nil, nil, nil, nil, 0, err
	}
	r.diag.QueriesOrient += n
	_, p := Y.Dims()
	H := r.hidden(X, k)
	W := mat.NewDense(mu, m, nil)
	A := mat.NewDense(p, mu, nil)
	b := make([]float64, mu)
	for j, u := range units {
		W.SetRow(j, u.w)
		A.SetCol(j, u.a)
		b[j] = u.b
	}
	R := residual(Y, H, W, b, A)
	// R ≈ [H 1]·[Lᵀ; cᵀ]; columns of H that are zero throughout carry
	// nothing and are left out.
	var used []int
	for j := 0; j < m; j++ {
		if vec.MaxAbs(mat.Col(nil, j, H)) > 0 {
			used = append(used, j)
		}
	}
	D := mat.NewDense(n, len(used)+1, nil)
	for i := 0; i < n; i++ {
		for c, j := range used {
			D.Set(i, c, H.At(i, j))
		}
		D.Set(i, len(used), 1)
	}
	var LC mat.Dense
	if err := LC.Solve(D, R); err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("layer %d's outputs on fresh inputs do not determine the orientations: %w", k+1, err)
	}
	// vec(L) ≈ −Σ s_j vec(â_j ŵ_jᵀ) over the used columns.
	M := mat.NewDense(p*len(used), mu, nil)
	rhs := mat.NewDense(p*len(used), 1, nil)
	for c, j := range used {
		for o := 0; o < p; o++ {
			row := c*p + o
			rhs.Set(row, 0, -LC.At(c, o))
			for u := 0; u < mu; u++ {
				M.Set(row, u, A.At(o, u)*W.At(u, j))
			}
		}
	}
	var s mat.Dense
	if err := s.Solve(M, rhs); err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("layer %d's orientations: %w", k+1, err)
	}
	for u := 0; u < mu; u++ {
		if s.At(u, 0) > 0.5 {
			row := W.RawRowView(u)
			for j := range row {
				row[j] = -row[j]
			}
			b[u] = -b[u]
		}
	}
	R = residual(Y, H, W, b, A)
	c := make([]float64, p)
	for o := range c {
		c[o] = stat.Mean(mat.Col(nil, o, R), nil)
	}
	net := &nn.Depth2{W: W, B: b, A: A, C: c}
	return W, b, A, c, certify.RelResidual(Y, net.Forward(H)), nil
}

// gaussianRows returns n standard Gaussian rows of d coordinates from
// seed.
func gaussianRows(n, d int, seed uint64) *mat.Dense {
	g := rng.New(seed)
	X := mat.NewDense(n, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = g.NormFloat64()
	}
	return X
}

// gaussianQueries returns n fresh standard Gaussian inputs (from the
// run's seed and salt) and the oracle's answers.
func (r *deepRun) gaussianQueries(ctx context.Context, n int, salt uint64) (X, Y *mat.Dense, err error) {
	X = gaussianRows(n, r.d, r.opt.Seed^salt)
	Y, err = r.root.query(ctx, X)
	return X, Y, err
}

// hidden returns layer k's outputs (1-based) of the layers found, at the
// rows of X.
func (r *deepRun) hidden(X *mat.Dense, k int) *mat.Dense {
	net := &nn.MLP{}
	for l := 0; l < k; l++ {
		net.Layers = append(net.Layers, nn.Layer{Weight: r.Ws[l], Bias: r.bs[l], Act: nn.ReLU})
	}
	return net.Forward(X)
}

// residual is Y − A·ReLU(W·h + b) row by row for the rows h of H.
func residual(Y, H, W *mat.Dense, b []float64, A *mat.Dense) *mat.Dense {
	p, _ := A.Dims()
	var R mat.Dense
	R.Sub(Y, (&nn.Depth2{W: W, B: b, A: A, C: make([]float64, p)}).Forward(H))
	return &R
}

// fitMissing fits the weights of the last hidden layer's units over the
// previous layer's units never active where they switch (free[j][i]) and
// the output bias, every other parameter held at what the regions gave
// (exact up to the Jacobians' precision), to fresh standard Gaussian
// queries. Within an activation pattern f is linear in those weights, so
// each Gauss–Newton step is a small dense least-squares problem; holding
// the rest keeps the fit off the directions Gaussian queries hardly see
// (the offsets of units active on nearly every input against the output
// bias, the rows of units active together against the null space of
// their output columns), where a fit of every parameter wanders. A
// weight whose unit is never active with its input on those queries has
// no column and stays zero. It returns the network and its relative
// residual on the queries.
func (r *deepRun) fitMissing(ctx context.Context, k int, net *nn.Depth2, free [][]bool) (*nn.Depth2, float64, error) {
	m, d, p := net.Hidden(), net.In(), net.Out()
	n := 4 * max(refineRowsPerParam*(m*(d+1)+p*(m+1))/p, 4*m)
	X, Y, err := r.gaussianQueries(ctx, n, 0x2545f491)
	if err != nil {
		return net, 0, err
	}
	r.diag.QueriesRefine += n
	H := r.hidden(X, k)
	best, bestRes := net, certify.RelResidual(Y, net.Forward(H))
	for step := 0; step < polishSteps; step++ {
		if err := ctx.Err(); err != nil {
			return best, bestRes, err
		}
		cand := fitStep(best, H, Y, free)
		if cand == nil {
			break
		}
		res := certify.RelResidual(Y, cand.Forward(H))
		if !(res < bestRes) {
			break
		}
		best, bestRes = cand, res
	}
	return best, bestRes, nil
}

// fitStep is one Gauss–Newton step of fitMissing: the least-squares
// change of the free weights and the output bias, net's activation
// pattern on the rows of H held. It returns nil when the problem has no
// free column or cannot be solved.
func fitStep(net *nn.Depth2, H, Y *mat.Dense, free [][]bool) *nn.Depth2 {
	n, _ := H.Dims()
	p := net.Out()
	Z := mat.NewDense(n, net.Hidden(), nil)
	Z.Mul(H, net.W.T())
	type entry struct{ j, i int }
	var cols []entry
	for j, row := range free {
		for i, f := range row {
			if !f {
				continue
			}
			seen := false
			for s := 0; s < n && !seen; s++ {
				seen = Z.At(s, j)+net.B[j] > 0 && H.At(s, i) > 0
			}
			if seen {
				cols = append(cols, entry{j, i})
			}
		}
	}
	J := mat.NewDense(n*p, len(cols)+p, nil)
	R := mat.NewDense(n*p, 1, nil)
	F := net.Forward(H)
	for s := 0; s < n; s++ {
		for o := 0; o < p; o++ {
			row := s*p + o
			for c, e := range cols {
				if Z.At(s, e.j)+net.B[e.j] > 0 {
					J.Set(row, c, net.A.At(o, e.j)*H.At(s, e.i))
				}
			}
			J.Set(row, len(cols)+o, 1)
			R.Set(row, 0, Y.At(s, o)-F.At(s, o))
		}
	}
	var delta mat.Dense
	if err := delta.Solve(J, R); err != nil {
		return nil
	}
	out := net.Clone()
	for c, e := range cols {
		out.W.Set(e.j, e.i, out.W.At(e.j, e.i)+delta.At(c, 0))
	}
	for o := 0; o < p; o++ {
		out.C[o] += delta.At(len(cols)+o, 0)
	}
	return out
}
