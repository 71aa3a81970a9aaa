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
// inputs), each as a region with every unit of layer 1 active.
func (r *deepRun) patterns(n int) []region {
	acts, count := r.sampledPatterns(n)
	m, _ := r.Ws[n-1].Dims()
	var out []region
	seen := map[string]bool{}
	for _, act := range acts {
		k := patternKey(act, m)
		if len(act) > 0 && !seen[k] {
			seen[k] = true
			out = append(out, region{act: act})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		ka, kb := patternKey(out[a].act, m), patternKey(out[b].act, m)
		if count[ka] != count[kb] {
			return count[ka] > count[kb]
		}
		return ka < kb
	})
	return out
}

// mixedPatterns returns the regions of the same inputs with their
// activation patterns of layer 1 too, those of the inputs with the
// highest score first (nil: the most frequent patterns of layer n): a
// unit of layer n+1 can switch only where some units of
// layer 1 are inactive (a trained 784-32-16-16-10 has 4 of 16 that never
// switch where all 32 are active). Regions whose layer-n units outnumber
// the active layer-1 units (no frame: W₂'s rows over them are dependent)
// are left out.
func (r *deepRun) mixedPatterns(n int, score []float64) []region {
	acts, count := r.sampledPatterns(n)
	firsts, _ := r.sampledPatterns(1)
	m1, _ := r.Ws[0].Dims()
	m, _ := r.Ws[n-1].Dims()
	type scored struct {
		rg region
		at float64
	}
	var out []scored
	seen := map[string]bool{}
	for i, act := range acts {
		rg := region{first: firsts[i], act: act}
		k := regionKey(rg, m1, m)
		if len(act) == 0 || len(act) > len(rg.first) || len(rg.first) == m1 || seen[k] {
			continue
		}
		seen[k] = true
		at := float64(count[patternKey(act, m)])
		if score != nil {
			at = score[i]
		}
		out = append(out, scored{rg, at})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].at > out[b].at })
	regions := make([]region, len(out))
	for i, s := range out {
		regions[i] = s.rg
	}
	return regions
}

// misfit returns, at each of the inputs sampledPatterns draws, how far
// the oracle is from the units of list (orientLast, missing weights
// zero): where a unit not found yet is active, the far ones first. It
// returns nil when list is empty.
func (r *deepRun) misfit(ctx context.Context, k int, list []*partial) ([]float64, error) {
	if len(list) == 0 {
		return nil, nil
	}
	units := make([]unit, len(list))
	for j, pa := range list {
		units[j] = pa.unit()
	}
	W, b, A, c, _, err := r.orientLast(ctx, k, units)
	if err != nil {
		return nil, err
	}
	X, Y, err := r.gaussianQueries(ctx, patternSamples, 0x7a3d)
	if err != nil {
		return nil, err
	}
	r.diag.QueriesOrient += patternSamples
	F := (&nn.Depth2{W: W, B: b, A: A, C: c}).Forward(r.hidden(X, k))
	out := make([]float64, patternSamples)
	for i := range out {
		for o, v := range Y.RawRowView(i) {
			out[i] += (v - F.At(i, o)) * (v - F.At(i, o))
		}
	}
	return out, nil
}

// sampledPatterns returns the active units of layer n on each of
// patternSamples standard Gaussian inputs, and how many inputs share
// each pattern (by patternKey).
func (r *deepRun) sampledPatterns(n int) ([][]int, map[string]int) {
	H := r.hidden(gaussianRows(patternSamples, r.d, r.opt.Seed^0x7a3d), n)
	rows, cols := H.Dims()
	acts := make([][]int, rows)
	count := map[string]int{}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if H.At(i, j) > 0 {
				acts[i] = append(acts[i], j)
			}
		}
		count[patternKey(acts[i], cols)]++
	}
	return acts, count
}

// patternKey is a pattern's set of active units (of m) as a string.
func patternKey(act []int, m int) string {
	key := make([]byte, m)
	for _, i := range act {
		key[i] = 1
	}
	return string(key)
}

// regionKey is a region's patterns (m1 units of layer 1, m of the last
// layer searched) as a string.
func regionKey(rg region, m1, m int) string {
	if rg.first == nil {
		return patternKey(rg.act, m)
	}
	return patternKey(rg.first, m1) + "|" + patternKey(rg.act, m)
}

// nextPattern chooses the next region to search among the observed
// ones not yet searched: the one whose active units cover the most
// columns still missing from the incomplete records, the earlier (more
// frequent) on a tie (none missing: the earliest, to find units not yet
// seen). When no observed region covers a missing column, the earliest
// region with that column's unit added is tried (a region the Gaussian
// inputs seldom reach, where the linear program still finds a point).
// It returns nil when nothing is left to try.
func nextPattern(pats []region, list []*partial, m1, m int, done map[string]bool) *region {
	missing := make([]int, m)
	for _, pa := range list {
		for i := 0; i < m; i++ {
			if !pa.known[i] {
				missing[i]++
			}
		}
	}
	best, bestGain := -1, -1
	for i, rg := range pats {
		if done[regionKey(rg, m1, m)] {
			continue
		}
		gain := 0
		for _, j := range rg.act {
			gain += missing[j]
		}
		if gain > bestGain {
			best, bestGain = i, gain
		}
	}
	if best >= 0 && (bestGain > 0 || countMissing(missing) == 0) {
		return &pats[best]
	}
	for j := 0; j < m; j++ {
		if missing[j] == 0 {
			continue
		}
		for _, rg := range pats {
			with := region{first: rg.first, act: append(append([]int(nil), rg.act...), j)}
			sort.Ints(with.act)
			if !slices.Contains(rg.act, j) && !done[regionKey(with, m1, m)] {
				return &with
			}
		}
	}
	if best >= 0 {
		return &pats[best]
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
// activation pattern S of layer k (regionFrame, nextPattern), then of
// those patterns with layer 1's (mixedPatterns), where f is a network of
// one hidden layer in z_S whose units are layer k+1's with their weights
// over S; each unit found there gives a partial record, merged across
// patterns (merge) until the rows are complete.
// Orientations and the output bias come from a least-squares fit on
// fresh queries (orientLast); the weights records leave unknown are
// fitted (fitMissing). It returns the last two layers' W, b, A, c, or a
// reason.
func (r *deepRun) byPatterns(ctx context.Context, k int, lay *LayerResult) (W *mat.Dense, b []float64, A *mat.Dense, c []float64, failed string, err error) {
	m, _ := r.Ws[k-1].Dims()
	width := r.opt.Widths[k]
	var list []*partial
	// The regions where every unit of layer 1 is active first, then those
	// of the same inputs' layer-1 patterns, those of the inputs the units
	// found leave the largest misfit first (where units not found yet are
	// active). They end after patternsIdle regions in a row that bring
	// nothing new once the width given has its records, complete or not
	// (fitMissing fits what they miss).
	tried := 0
	done := map[string]bool{}
	if list, err = r.searchRegions(ctx, k, r.patterns(k), list, done, &tried, true, lay); err != nil {
		return nil, nil, nil, nil, "", err
	}
	if !(width > 0 && enough(list, width)) {
		score, err := r.misfit(ctx, k, list)
		if err != nil {
			return nil, nil, nil, nil, "", err
		}
		if list, err = r.searchRegions(ctx, k, r.mixedPatterns(k, score), list, done, &tried, false, lay); err != nil {
			return nil, nil, nil, nil, "", err
		}
	}
	var whole, all []unit
	wholeFlags := make([]bool, len(list))
	for j, pa := range list {
		all = append(all, pa.unit())
		if wholeFlags[j] = pa.complete(); wholeFlags[j] {
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
	// are the layer's units; the rows are then polished as whole ones
	// are, and the residual on fresh queries decides.
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
	net, err := r.fitMissing(ctx, k, &nn.Depth2{W: W, B: b, A: A, C: c}, free)
	if err != nil {
		return nil, nil, nil, nil, "", err
	}
	fitted := net
	if net, err = r.polishLast(ctx, k, net); err != nil {
		return nil, nil, nil, nil, "", err
	}
	res, err := r.freshResidual(ctx, k, net)
	if err != nil {
		return nil, nil, nil, nil, "", err
	}
	if res <= wholeTol {
		lay.Passed = true
		lay.Check = fmt.Sprintf("; %d units seen only where some inputs are inactive, their %d weights over those fitted with every other parameter held, then the last two layers polished (relative residual %.1e on fresh queries and cover rows)", len(all)-len(whole), nfree, res)
		return net.W, net.B, net.A, net.C, failed, nil
	}
	// The units no region showed: grown around the ones seen over every
	// input, from the fit before the polish moved those.
	if grown, gres, err := r.growLast(ctx, k, fitted, wholeFlags, width); err != nil {
		return nil, nil, nil, nil, "", err
	} else if gres < res {
		lay.Grown = max(grown.Hidden()-len(all), 0)
		net, res = grown, gres
		if res <= wholeTol {
			lay.Passed, lay.Units = true, net.Hidden()
			lay.Check = fmt.Sprintf("; %d units seen only where some inputs are inactive and %d grown, fitted with the %d seen over every input held, then the last two layers polished (relative residual %.1e on fresh queries and cover rows)", len(all)-len(whole), lay.Grown, len(whole), res)
			return net.W, net.B, net.A, net.C, failed, nil
		}
	}
	// Otherwise a least-squares fit of every parameter of the last two
	// layers moves them towards what f needs; the certificate decides.
	r.warn = append(r.warn, fmt.Sprintf("layer %d: %d of %d units seen over every input; the weights of the others over inputs never active where they switch come from a least-squares fit", k+1, len(whole), len(all)))
	return net.W, net.B, net.A, net.C, failed, nil
}

// wholeTol is the relative residual on orientLast's queries below which
// the units seen over every input are the layer.
const wholeTol = 1e-9

// lastQueries draws fresh queries for a fit or a check of the last two
// layers (net, over layer k's outputs): standard Gaussian ones,
// refineRowsPerParam output values per parameter, at least 4 queries per
// unit, times 4, then coverRows' for net; they count as the polish's. g
// is the number of Gaussian rows, first in X and Y.
func (r *deepRun) lastQueries(ctx context.Context, k int, net *nn.Depth2, salt uint64) (X, Y *mat.Dense, g int, err error) {
	g = lastRows(net)
	if X, Y, err = r.gaussianQueries(ctx, g, salt); err != nil {
		return nil, nil, 0, err
	}
	r.diag.QueriesRefine += g
	if X, Y, err = r.withCover(ctx, r.network(net.W, net.B, net.A, net.C), k, X, Y, salt); err != nil {
		return nil, nil, 0, err
	}
	return X, Y, g, nil
}

// withCover returns X and Y with coverRows' queries for net's layers
// from on (the rows of X counted first; drawn from the run's seed and
// salt) stacked under them.
func (r *deepRun) withCover(ctx context.Context, net *nn.MLP, from int, X, Y *mat.Dense, salt uint64) (*mat.Dense, *mat.Dense, error) {
	T := coverRows(net, from, X, r.opt.Seed^salt^0x9b05688c, 0)
	if T == nil {
		return X, Y, nil
	}
	YT, err := r.root.query(ctx, T)
	if err != nil {
		return nil, nil, err
	}
	r.diag.QueriesRefine += T.RawMatrix().Rows
	var XS, YS mat.Dense
	XS.Stack(X, T)
	YS.Stack(Y, YT)
	return &XS, &YS, nil
}

// lastRows is lastQueries' count for net.
func lastRows(net *nn.Depth2) int {
	m, d, p := net.Hidden(), net.In(), net.Out()
	return 4 * max(refineRowsPerParam*(m*(d+1)+p*(m+1))/p, 4*m)
}

// polishSteps caps polishLast's Gauss–Newton steps.
const polishSteps = 30

// polishLast fits the last hidden layer and the output layer (net, over
// layer k's outputs) to fresh standard Gaussian queries by Gauss–Newton
// steps (gaussNewton, the activation pattern held fixed in each), kept
// while they lower the relative residual, at most polishSteps of them.
func (r *deepRun) polishLast(ctx context.Context, k int, net *nn.Depth2) (*nn.Depth2, error) {
	X, Y, _, err := r.lastQueries(ctx, k, net, 0x1b873593)
	if err != nil {
		return net, err
	}
	return polishOn(ctx, net, r.hidden(X, k), Y, nil), ctx.Err()
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
// (exact up to the Jacobians' precision), to fresh queries (lastQueries:
// standard Gaussian ones and coverRows'). Within an activation pattern f
// is linear in those weights, so
// each Gauss–Newton step is a small dense least-squares problem; holding
// the rest keeps the fit off the directions Gaussian queries hardly see
// (the offsets of units active on nearly every input against the output
// bias, the rows of units active together against the null space of
// their output columns), where a fit of every parameter wanders. A
// weight whose unit is never active with its input on those queries has
// no column and stays zero. coverRows chooses its rows by where net's
// units are active, the missing weights at zero: up to fitRounds times,
// rows chosen by the units as fitted are added and the fit is run again
// from there.
func (r *deepRun) fitMissing(ctx context.Context, k int, net *nn.Depth2, free [][]bool) (*nn.Depth2, error) {
	X, Y, _, err := r.lastQueries(ctx, k, net, 0x2545f491)
	if err != nil {
		return net, err
	}
	best := fitFree(ctx, net, r.hidden(X, k), Y, free)
	for round := 1; round < fitRounds && ctx.Err() == nil; round++ {
		if X, Y, err = r.withCover(ctx, r.network(best.W, best.B, best.A, best.C), k, X, Y, 0x3c6ef372+uint64(round)); err != nil {
			return best, err
		}
		best = fitFree(ctx, best, r.hidden(X, k), Y, free)
	}
	return best, ctx.Err()
}

// fitRounds is how many times fitMissing fits: on the trained
// 784-32-16-16-10 seed 0, a last-layer unit active on few inputs with six
// weights missing needs more than two.
const fitRounds = 4

// fitFree runs fitMissing's Gauss–Newton steps (fitStep) on the rows of
// H and Y from net, kept while they lower the relative residual, at most
// polishSteps of them.
func fitFree(ctx context.Context, net *nn.Depth2, H, Y *mat.Dense, free [][]bool) *nn.Depth2 {
	best, bestRes := net, certify.RelResidual(Y, net.Forward(H))
	for step := 0; step < polishSteps && ctx.Err() == nil; step++ {
		// The missing weights start at zero, which can leave a unit
		// inactive on queries where it is not, and a step sees nothing
		// of its weights there: the first step takes the units with
		// missing weights as active on every query.
		cand := fitStep(best, H, Y, free, step == 0)
		if cand == nil {
			break
		}
		res := certify.RelResidual(Y, cand.Forward(H))
		// A step that moves units across many queries' kinks can
		// overshoot: it is halved until it lowers the residual.
		for half := 0; half < 20 && !(res < bestRes) && step > 0; half++ {
			cand = between(best, cand, 0.5)
			res = certify.RelResidual(Y, cand.Forward(H))
		}
		if !(res < bestRes) && step > 0 {
			break
		}
		best, bestRes = cand, res
	}
	return best
}

// freshResidual is the relative residual of the last two layers (net,
// over layer k's outputs) on fresh queries drawn as fitMissing's are: a
// weight its unit is active with on few of the queries fitted is not
// determined by them, and the residual that decides is on others. It is
// the larger of the residuals on the Gaussian queries and on coverRows':
// the few rows where a rarely active pair acts would weigh nothing
// against the Gaussian ones in one residual.
func (r *deepRun) freshResidual(ctx context.Context, k int, net *nn.Depth2) (float64, error) {
	X, Y, g, err := r.lastQueries(ctx, k, net, 0x68e31da4)
	if err != nil {
		return 0, err
	}
	F := net.Forward(r.hidden(X, k))
	res := certify.RelResidual(rowsTo(Y, g), rowsTo(F, g))
	if n, _ := X.Dims(); n > g {
		res = math.Max(res, certify.RelResidual(rowsFrom(Y, g), rowsFrom(F, g)))
	}
	return res, nil
}

// between returns a + t·(b − a) for two networks of one shape.
func between(a, b *nn.Depth2, t float64) *nn.Depth2 {
	out := a.Clone()
	mix := func(x, y []float64) {
		for i := range x {
			x[i] += t * (y[i] - x[i])
		}
	}
	mix(out.W.RawMatrix().Data, b.W.RawMatrix().Data)
	mix(out.A.RawMatrix().Data, b.A.RawMatrix().Data)
	mix(out.B, b.B)
	mix(out.C, b.C)
	return out
}

// fitStep is one Gauss–Newton step of fitMissing: the least-squares
// change of the free weights and the output bias, net's activation
// pattern on the rows of H held, or with linear set every unit with a
// free weight taken as active on every row (f then linear in the free
// weights). It returns nil when the problem cannot be solved.
func fitStep(net *nn.Depth2, H, Y *mat.Dense, free [][]bool, linear bool) *nn.Depth2 {
	n, _ := H.Dims()
	m, p := net.Hidden(), net.Out()
	Z := mat.NewDense(n, m, nil)
	Z.Mul(H, net.W.T())
	on := mat.NewDense(n, m, nil)
	for j := 0; j < m; j++ {
		always := linear && slices.Contains(free[j], true)
		for s := 0; s < n; s++ {
			Z.Set(s, j, Z.At(s, j)+net.B[j])
			if always || Z.At(s, j) > 0 {
				on.Set(s, j, 1)
			}
		}
	}
	type entry struct{ j, i int }
	var cols []entry
	for j, row := range free {
		for i, f := range row {
			seen := false
			for s := 0; s < n && f && !seen; s++ {
				seen = on.At(s, j) > 0 && H.At(s, i) > 0
			}
			if seen {
				cols = append(cols, entry{j, i})
			}
		}
	}
	var F mat.Dense
	Z.MulElem(Z, on)
	F.Mul(Z, net.A.T())
	J := mat.NewDense(n*p, len(cols)+p, nil)
	R := mat.NewDense(n*p, 1, nil)
	for s := 0; s < n; s++ {
		for o := 0; o < p; o++ {
			row := s*p + o
			for c, e := range cols {
				J.Set(row, c, on.At(s, e.j)*net.A.At(o, e.j)*H.At(s, e.i))
			}
			J.Set(row, len(cols)+o, 1)
			R.Set(row, 0, Y.At(s, o)-F.At(s, o)-net.C[o])
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

// regionBudget bounds the queries of a search in a region with some
// units of layer 1 inactive, per coordinate of its frame: most take
// 100–200 per coordinate, but on a trained 784-32-16-16-10 4 of 102 such
// regions had lines with 500–1100 kinks too close to resolve, on which
// the search widens its grid without bound (one line of 211 969 points,
// 19 GB). Such a search ends, and its units are not used.
const regionBudget = 1024

// searchRegions searches the regions pats (nextPattern's choice each
// time) for the last hidden layer (layer k+1), merging the records of the
// units found into list, until the width given is reached, or
// patternsIdle regions in a row bring no new record or column and every
// record is complete (without complete: there are as many records as
// the width given, complete or not), or maxPatterns·m regions are
// searched. tried counts the regions searched
// over the calls (it seeds each search).
func (r *deepRun) searchRegions(ctx context.Context, k int, pats []region, list []*partial, done map[string]bool, tried *int, complete bool, lay *LayerResult) ([]*partial, error) {
	m, _ := r.Ws[k-1].Dims()
	m1, _ := r.Ws[0].Dims()
	width := r.opt.Widths[k]
	n, idle := 0, 0
	for n < maxPatterns*m && !(width > 0 && enough(list, width)) && !(idle >= patternsIdle && (complete && enough(list, 0) || !complete && len(list) >= width)) {
		rg := nextPattern(pats, list, m1, m, done)
		if rg == nil {
			break
		}
		done[regionKey(*rg, m1, m)] = true
		fr, ferr := r.regionFrame(k, *rg)
		if ferr != nil {
			continue // a region too thin to search
		}
		n++
		*tried++
		act := rg.act
		so := r.opt
		so.Hidden = 0
		so.Seed = r.opt.Seed + uint64(k)*0x9e3779b97f4a7c15 + uint64(*tried)*7919
		so.Progress = nil
		o := &counted{f: affineOracle(r.root, fr.P, fr.q), d: len(act)}
		e := newExtractor(len(act), so, o)
		e.dom = fr.dom
		e.deep = true
		if rg.first != nil {
			o.limit = regionBudget * (len(act) + 1)
		}
		stop, err := e.search(ctx)
		if err != nil {
			return list, err
		}
		r.addDiag(e.diag)
		lay.Lines += len(e.lines)
		for _, lr := range e.lines {
			lay.Kinks += len(lr.kinks)
		}
		if stop != "" && rg.first != nil {
			continue // its budget or MaxLines ran out: units not re-tested
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
	return list, nil
}

// growLast grows the last hidden layer's units that no region showed
// (growUnits, as for one hidden layer) on top of what the regions gave,
// over layer k's outputs: net's units marked in whole — seen over every
// input, their rows exact to the Jacobians' precision — are held while
// the grown units and the units seen over some inputs only are fitted
// around them, then the spare units are dropped (to the width given, or
// the idle ones, dropIdle) and every parameter is polished, on the
// Gaussian queries and then on cover rows too. Fitted without that hold,
// the last two layers' parameters wander together (784-32-16-16-10
// trained on Fashion-MNIST, seed 1: 12 units whole, 3 seen over some
// inputs, one not seen; the fit of all of them from there leaves every
// unit 2e-3 to 0.3 off (1 − cos) at residual 1.7e-2; grown and held,
// every parameter within 4e-10, docs/extract.md). It returns the network and its relative
// residual on fresh queries and cover rows (freshResidual).
func (r *deepRun) growLast(ctx context.Context, k int, net *nn.Depth2, whole []bool, width int) (*nn.Depth2, float64, error) {
	// Rows for the spare units' held-out test (dropIdle) follow the fit's.
	n := max(growLastRows, 4*lastRows(net))
	X, Y, err := r.gaussianQueries(ctx, n+n/8, 0x7f4a7c15)
	if err != nil {
		return net, 0, err
	}
	r.diag.QueriesRefine += n + n/8
	Hall := r.hidden(X, k)
	H, Y, Hv, Yv := rowsTo(Hall, n), rowsTo(Y, n), rowsFrom(Hall, n), rowsFrom(Y, n)
	// Adam's fit works on the residual scaled to unit size: a unit's
	// share of f can be 1e-4 of it, which a fit from unit-size weights
	// at growRate does not reach.
	var R mat.Dense
	R.Sub(Y, net.Forward(H))
	s := mat.Norm(&R, 2) / math.Sqrt(float64(n*net.Out()))
	if s == 0 {
		s = 1
	}
	var Ys mat.Dense
	Ys.Scale(1/s, Y)
	// Adam's fit lands where its start leads: the polish then reaches
	// the units from some starts and stalls from others, so up to
	// growLastTries starts are tried, the best on the held-out rows kept.
	var g *nn.Depth2
	best := math.Inf(1)
	for try := 0; try < growLastTries && best > wholeTol; try++ {
		c, err := growUnits(ctx, scaledOutput(net, 1/s), H, &Ys, growCount(net.Hidden(), width), r.opt.Seed+uint64(try))
		if err != nil {
			return net, 0, err
		}
		c = scaledOutput(c, s)
		held := make([]bool, c.Hidden())
		copy(held, whole)
		c = polishOn(ctx, c, H, Y, held)
		if width > 0 {
			c, held, _ = dropTo(c, H, Y, width, held)
		} else {
			c, held, _ = dropIdle(c, H, Y, Hv, Yv, held)
		}
		c = polishOn(ctx, polishOn(ctx, c, H, Y, held), H, Y, nil)
		if rv := certify.RelResidual(Yv, c.Forward(Hv)); rv < best {
			g, best = c, rv
		}
	}
	if g == nil {
		return net, math.Inf(1), nil
	}
	// The fit saw Gaussian queries only: a polish on cover rows too sets
	// the weights those leave loose.
	if g, err = r.polishLast(ctx, k, g); err != nil {
		return net, 0, err
	}
	res, err := r.freshResidual(ctx, k, g)
	return g, res, err
}

// growLastRows is the least number of queries growLast fits on: a unit
// the regions missed can be active on a few percent of Gaussian inputs
// (784-32-16-16-10 seed 0's last-layer unit 3 on 6.6%), and it is fitted
// from those alone.
const growLastRows = 16384

// growLastTries caps growLast's starts.
const growLastTries = 3

// rowsTo and rowsFrom return the rows of M before and from row n.
func rowsTo(M *mat.Dense, n int) *mat.Dense {
	_, c := M.Dims()
	return M.Slice(0, n, 0, c).(*mat.Dense)
}

func rowsFrom(M *mat.Dense, n int) *mat.Dense {
	r, c := M.Dims()
	return M.Slice(n, r, 0, c).(*mat.Dense)
}

// polishOn runs Gauss–Newton steps (gaussNewtonHeld, the units marked in
// held kept) on ‖Y − net(H)‖², kept while they lower the residual, at
// most polishSteps of them.
func polishOn(ctx context.Context, net *nn.Depth2, H, Y *mat.Dense, held []bool) *nn.Depth2 {
	best, bestRes := net, certify.RelResidual(Y, net.Forward(H))
	for step := 0; step < polishSteps && ctx.Err() == nil; step++ {
		cand := gaussNewtonHeld(best, H, Y, held)
		res := certify.RelResidual(Y, cand.Forward(H))
		if !(res < bestRes) {
			break
		}
		best, bestRes = cand, res
	}
	return best
}

// scaledOutput returns net with its output layer (A, c) times s.
func scaledOutput(net *nn.Depth2, s float64) *nn.Depth2 {
	out := net.Clone()
	out.A.Scale(s, out.A)
	for o := range out.C {
		out.C[o] *= s
	}
	return out
}
