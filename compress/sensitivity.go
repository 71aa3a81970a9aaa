package compress

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/nn"
)

// RankProfile is the evidence behind a measured allocation (AllocSensitivity,
// AllocASVD): for one layer, the relative error of the network's output on
// the calibration rows, ‖f̂(X) − f(X)‖_F/‖f(X)‖_F, when that layer alone is
// compressed to each grid rank and every other layer is left as it is.
type RankProfile struct {
	Layer  int       `json:"layer"`
	Ranks  []int     `json:"ranks"`
	Params []int     `json:"params"`
	Error  []float64 `json:"error"`
}

// maxWorth is the largest rank that stores fewer parameters than the dense
// layer (0 when none does).
func (c layerCost) maxWorth() int {
	r := 0
	for c.worthFactoring(r + 1) {
		r++
	}
	return r
}

// rankGrid is the ranks a measured allocation evaluates: 1, 2, 3, 4, 6, 8,
// 12, 16, 24, … (powers of two and their halfway points 1.5·2^k) below top,
// then top. Geometric, because the error changes fastest at small ranks.
func rankGrid(top int) []int {
	var g []int
	for p := 1; p < top; p *= 2 {
		g = append(g, p)
		if h := p + p/2; p >= 2 && h < top {
			g = append(g, h)
		}
	}
	if top >= 1 {
		g = append(g, top)
	}
	return slices.Compact(g)
}

// originalFits fits every layer that can be factored on the original
// network's activations (X̌ = X) with the method; nil for layers that stay
// dense whatever the budget.
func originalFits(ctx context.Context, probs []Problem, costs []layerCost, method Method, lo LayerOptions) ([]*Fit, error) {
	fits := make([]*Fit, len(probs))
	for i, p := range probs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if costs[i].maxWorth() == 0 {
			continue
		}
		f, err := FitLayer(p, method, lo)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		fits[i] = f
	}
	return fits, nil
}

// probe measures the squared relative output error of the network with
// one layer alone compressed, ‖f̂(X) − f(X)‖²_F/‖f(X)‖²_F on the
// calibration rows, at any rank, and remembers every measurement.
//
// With refit, the layers after the compressed one (those with a bias) are
// refit by least squares on the compressed stream, to the original
// pre-activations ys — what sequential data-driven compression (Alg 3) does
// to them — so that the measured error is the one the pipeline leaves, not
// the larger one of the untouched downstream layers.
type probe struct {
	net      *nn.MLP
	ws, xs   []*mat.Dense
	ys       []*mat.Dense
	costs    []layerCost
	fits     []*Fit
	refit    bool
	refNorm2 float64
	sq       []map[int]float64 // per layer: rank → squared relative error
	forwards int
	// output, when set, replaces the MLP's layer chain: the network's
	// outputs with layer i replaced by f, to compare with ref (a graph's).
	output func(i int, f Factored) (*mat.Dense, error)
	ref    *mat.Dense
}

// probeRows is how many calibration rows (the first ones) a probe uses: the
// measurements compare errors of one network, which 4096 rows estimate to a
// few per cent, and a refit of a 512-input layer is 2.4× cheaper than on
// 10 000 rows.
const probeRows = 4096

func newProbe(net *nn.MLP, ws, xs, ys []*mat.Dense, costs []layerCost, fits []*Fit, refit bool) *probe {
	if m, _ := xs[0].Dims(); m > probeRows {
		head := func(a []*mat.Dense) []*mat.Dense {
			out := make([]*mat.Dense, len(a))
			for i, x := range a {
				_, c := x.Dims()
				out[i] = x.Slice(0, probeRows, 0, c).(*mat.Dense)
			}
			return out
		}
		xs, ys = head(xs), head(ys)
	}
	n := math.Max(mat.Norm(xs[len(net.Layers)], 2), 1e-300)
	p := &probe{net: net, ws: ws, xs: xs, ys: ys, costs: costs, fits: fits, refit: refit, refNorm2: n * n, sq: make([]map[int]float64, len(fits))}
	for i := range fits {
		p.sq[i] = map[int]float64{}
	}
	return p
}

// newOutputProbe is a probe of a network whose outputs on the probe
// inputs are ref, and output(i, f) with layer i replaced by f.
// (ref is nil when computing it failed; output then returns the error.)
func newOutputProbe(ref *mat.Dense, output func(i int, f Factored) (*mat.Dense, error), costs []layerCost, fits []*Fit) *probe {
	n := 1.0
	if ref != nil {
		n = math.Max(mat.Norm(ref, 2), 1e-300)
	}
	p := &probe{ref: ref, output: output, costs: costs, fits: fits, refNorm2: n * n, sq: make([]map[int]float64, len(fits))}
	for i := range fits {
		p.sq[i] = map[int]float64{}
	}
	return p
}

// measure records the errors of the layers at the ranks of pairs ({layer,
// rank}) not measured yet. The measurements are independent and run in
// parallel; they are recorded in the order given, so the result does not
// depend on GOMAXPROCS.
func (p *probe) measure(ctx context.Context, pairs ...[2]int) error {
	var todo [][2]int
	for _, q := range pairs {
		if _, ok := p.sq[q[0]][q[1]]; !ok && !slices.Contains(todo, q) {
			todo = append(todo, q)
		}
	}
	sq := make([]float64, len(todo))
	errs := make([]error, len(todo))
	parallel.For(len(todo), func(_, k int) {
		if errs[k] = ctx.Err(); errs[k] == nil {
			sq[k], errs[k] = p.error(todo[k][0], todo[k][1])
		}
	})
	for k, q := range todo {
		if errs[k] != nil {
			return errs[k]
		}
		p.sq[q[0]][q[1]] = sq[k]
		p.forwards++
	}
	return nil
}

// error is the squared relative output error with layer i at rank r.
func (p *probe) error(i, r int) (float64, error) {
	if p.output != nil {
		y, err := p.output(i, p.fits[i].Rank(r))
		if err != nil {
			return 0, fmt.Errorf("layer %d at rank %d: %w", i, r, err)
		}
		e := diffNorm(p.ref, y)
		return e * e / p.refNorm2, nil
	}
	L := len(p.net.Layers)
	x := activate(p.fits[i].Rank(r).Apply(p.xs[i]), p.net.Layers[i].Act)
	for j := i + 1; j < L; j++ {
		lj := p.net.Layers[j]
		if !p.refit || lj.Bias == nil {
			x = activate(preact(x, p.ws[j], lj.Bias), lj.Act)
			continue
		}
		w, b, err := leastSquares(x, p.ys[j])
		if err != nil {
			return 0, fmt.Errorf("layer %d, refit of layer %d at rank %d: %w", i, j, r, err)
		}
		x = activate(preact(x, w, b), lj.Act)
	}
	e := diffNorm(p.xs[L], x)
	return e * e / p.refNorm2, nil
}

// curves interpolates each layer's measurements (which include rank 1 and
// its largest worthwhile rank) to every rank 1…maxWorth: curves[i][r−1]
// (nil for layers without a fit). The dense layer's error is 0.
func (p *probe) curves() [][]float64 {
	out := make([][]float64, len(p.fits))
	for i, f := range p.fits {
		if f == nil {
			continue
		}
		top := p.costs[i].maxWorth()
		rs := p.ranks(i)
		curve := make([]float64, top)
		for g := 0; g+1 < len(rs); g++ {
			a, b := rs[g], rs[g+1]
			for r := a; r < b; r++ {
				curve[r-1] = interpolate(p.sq[i][a], p.sq[i][b], float64(r-a)/float64(b-a))
			}
		}
		curve[top-1] = p.sq[i][top]
		out[i] = curve
	}
	return out
}

// ranks are layer i's measured ranks, ascending.
func (p *probe) ranks(i int) []int {
	rs := make([]int, 0, len(p.sq[i]))
	for r := range p.sq[i] {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// profiles reports the measurements (relative errors, not squared).
func (p *probe) profiles() []RankProfile {
	var out []RankProfile
	for i, f := range p.fits {
		if f == nil {
			continue
		}
		prof := RankProfile{Layer: i, Ranks: p.ranks(i)}
		for _, r := range prof.Ranks {
			prof.Params = append(prof.Params, p.costs[i].factoredParams(r))
			prof.Error = append(prof.Error, math.Sqrt(p.sq[i][r]))
		}
		out = append(out, prof)
	}
	return out
}

// refineRounds bounds the rounds of measuredAllocation's refinement.
const refineRounds = 8

// measuredAllocation allocates the budget by strategy (AllocSensitivity or
// AllocASVD) on measured errors: first on rankGrid's ranks, then, for a few
// rounds, it also measures each layer at the rank it was given and the next
// one and allocates again, until those are all measured. Between measured
// ranks the error is interpolated, which misses a cliff (a direction the
// output needs, at some rank between two grid points); measuring where the
// allocation lands corrects exactly the estimates it relies on, at a few
// extra passes instead of a dense grid.
func measuredAllocation(ctx context.Context, p *probe, budget int, strategy Allocation) ([]int, error) {
	var grid [][2]int
	for i, f := range p.fits {
		if f == nil {
			continue
		}
		for _, r := range rankGrid(p.costs[i].maxWorth()) {
			grid = append(grid, [2]int{i, r})
		}
	}
	if err := p.measure(ctx, grid...); err != nil {
		return nil, err
	}
	for round := 0; ; round++ {
		ranks, _, err := allocateMeasured(p.costs, p.curves(), budget, strategy)
		if err != nil || round == refineRounds {
			return ranks, err
		}
		before := p.forwards
		var next [][2]int
		for i, r := range ranks {
			if r == 0 || p.fits[i] == nil {
				continue
			}
			for _, q := range []int{r, r + 1} {
				if q <= p.costs[i].maxWorth() {
					next = append(next, [2]int{i, q})
				}
			}
		}
		if err := p.measure(ctx, next...); err != nil {
			return nil, err
		}
		if p.forwards == before {
			return ranks, nil
		}
	}
}

// interpolate is the error a fraction t of the way from a grid rank with
// error a to the next with error b: geometric (linear in log error), which
// is exact for an error decaying exponentially in the rank and, for the
// convex decay typical of singular spectra, closer than linear, which
// undervalues the first ranks after a grid point; linear when either is 0
// or the error grows.
func interpolate(a, b, t float64) float64 {
	if a > 0 && b > 0 && b < a {
		return a * math.Pow(b/a, t)
	}
	return a + (b-a)*t
}

// leastSquares returns W and b minimising ‖y − x·W − 1bᵀ‖_F: the full-rank
// case of Alg 2c by the Gram route (its ridge guard included), without the
// SVD that only a rank constraint needs.
func leastSquares(x, y *mat.Dense) (*mat.Dense, []float64, error) {
	xbar, ybar := colMeans(x), colMeans(y)
	w, err := whiten(whitenInput{z: centered(x, xbar), t: centered(y, ybar)}, RouteGram, 0)
	if err != nil {
		return nil, nil, err
	}
	coef := w.unwhiten(w.b0)
	b := append([]float64(nil), ybar...)
	for k, v := range xbar {
		floats.AddScaled(b, -v, coef.RawRowView(k))
	}
	return coef, b, nil
}

// curveAt is layer i's score at step k of its curve: rank k for
// k ≤ len(curve), the dense layer (0) at k = len(curve)+1.
func curveAt(curve []float64, k int) float64 {
	if k > len(curve) {
		return 0
	}
	return curve[k-1]
}

// paramsAt is the parameter count at step k (see curveAt).
func paramsAt(c layerCost, curve []float64, k int) int {
	if k > len(curve) {
		return c.dense
	}
	return c.factoredParams(k)
}

// allocateMeasured splits the budget over layers by one of the probed
// allocations (AllocSensitivity, AllocASVD) from the curves of a probe. It
// returns ranks (0 = dense) and the parameter total, never above budget.
func allocateMeasured(costs []layerCost, curves [][]float64, budget int, strategy Allocation) ([]int, int, error) {
	a, ranks, err := newMeasuredSteps(costs, budget)
	if err != nil {
		return nil, 0, err
	}
	switch strategy {
	case AllocSensitivity:
		a.greedy(curves)
	case AllocASVD:
		a.threshold(curves)
	default:
		return nil, 0, fmt.Errorf("compress: unknown allocation %q: %w", strategy, ErrInput)
	}
	return a.ranks(ranks, strategy)
}

// newMeasuredSteps starts every layer at its cheapest step (rank 1, or
// dense where rank 1 does not pay); ranks is the slice a.ranks fills.
func newMeasuredSteps(costs []layerCost, budget int) (*measuredSteps, []int, error) {
	ranks, dense, total, err := cheapest(costs, budget)
	if err != nil {
		return nil, nil, err
	}
	a := &measuredSteps{costs: costs, budget: budget, step: make([]int, len(costs)), dense: dense, total: total}
	copy(a.step, ranks)
	return a, ranks, nil
}

// measuredSteps is the state of allocateMeasured and allocateSVDLLM2: per
// layer its step — 1…len(curve) that rank, len(curve)+1 the dense layer
// (curveAt) — and whether it stays dense whatever the budget, and the
// parameter total.
type measuredSteps struct {
	costs  []layerCost
	budget int
	step   []int
	dense  []bool
	total  int
}

// ranks writes the steps into ranks (0 = dense) and returns them with
// their parameter total.
func (a *measuredSteps) ranks(ranks []int, strategy Allocation) ([]int, int, error) {
	total := 0
	for i, c := range a.costs {
		switch {
		case a.dense[i] || a.step[i] > c.maxWorth():
			ranks[i] = 0
			total += c.dense
		default:
			ranks[i] = a.step[i]
			total += c.factoredParams(a.step[i])
		}
	}
	if total > a.budget {
		return nil, 0, fmt.Errorf("compress: internal error: %s allocation needs %d parameters, budget %d", strategy, total, a.budget)
	}
	return ranks, total, nil
}

// greedy is AllocSensitivity: greedy on the lower convex hull, the step,
// to any larger rank or to the dense layer, that removes the most error
// per parameter.
func (a *measuredSteps) greedy(curves [][]float64) {
	for {
		best, bestK, bestGain := -1, 0, 0.0
		for i, c := range a.costs {
			cv := curves[i]
			if a.dense[i] || cv == nil {
				continue
			}
			k0 := a.step[i]
			p0, s0 := paramsAt(c, cv, k0), curveAt(cv, k0)
			for k := k0 + 1; k <= len(cv)+1; k++ {
				dc := paramsAt(c, cv, k) - p0
				if a.total+dc > a.budget {
					break
				}
				if g := (s0 - curveAt(cv, k)) / float64(dc); g > bestGain {
					best, bestK, bestGain = i, k, g
				}
			}
		}
		if best < 0 {
			return
		}
		a.total += paramsAt(a.costs[best], curves[best], bestK) - paramsAt(a.costs[best], curves[best], a.step[best])
		a.step[best] = bestK
	}
}

// threshold is AllocASVD: every layer at the smallest step whose error is
// ≤ t; t the smallest of the measured values that fits the budget.
func (a *measuredSteps) threshold(curves [][]float64) {
	var ts []float64
	for _, cv := range curves {
		ts = append(ts, cv...)
	}
	ts = append(ts, 0)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	at := func(t float64) int {
		tot := 0
		for i, c := range a.costs {
			cv := curves[i]
			if a.dense[i] || cv == nil {
				tot += c.dense
				continue
			}
			k := 1
			for k <= len(cv) && curveAt(cv, k) > t {
				k++
			}
			a.step[i] = k
			tot += paramsAt(c, cv, k)
		}
		return tot
	}
	// The largest t holds every layer at rank 1, which fits (cheapest).
	j := sort.Search(len(ts), func(j int) bool { return at(ts[j]) <= a.budget })
	at(ts[j])
}

// allocateSVDLLM2 is AllocSVDLLM2 (see its doc comment): losses[i] is
// layer i's fit whose Residual is its theoretical truncation loss (a
// MethodSVDLLM2 or MethodSVDLLM fit), types[i] its matrix type
// (matrixTypes). It returns ranks (0 = dense) and the parameter total,
// never above budget.
func allocateSVDLLM2(costs []layerCost, losses []*Fit, types []string, budget int) ([]int, int, error) {
	a, ranks, err := newMeasuredSteps(costs, budget)
	if err != nil {
		return nil, 0, err
	}
	if err := a.svdLLM2(losses, types); err != nil {
		return nil, 0, err
	}
	return a.ranks(ranks, AllocSVDLLM2)
}

// svdLLM2 sets the steps of allocateSVDLLM2: the last layer dense when
// the budget allows, every other layer at the uniform rule's rank (the
// target ratio R), then the ratios redistributed within each group of
// same-type layers (scaleGroup).
func (a *measuredSteps) svdLLM2(losses []*Fit, types []string) error {
	costs, n := a.costs, len(a.costs)
	// SVD-LLM compresses the blocks' matrices, not the output head.
	if last := n - 1; !a.dense[last] && a.total-costs[last].factoredParams(1)+costs[last].dense <= a.budget {
		a.total += costs[last].dense - costs[last].factoredParams(1)
		a.dense[last] = true
	}
	var idx []int
	var sub []layerCost
	rest := a.budget
	for i, c := range costs {
		if a.dense[i] {
			rest -= c.dense
			continue
		}
		idx = append(idx, i)
		sub = append(sub, c)
	}
	if len(idx) == 0 {
		return nil
	}
	uni, _, err := allocate(sub, nil, rest, AllocUniform)
	if err != nil {
		return err
	}
	var order []string
	groups := map[string][]int{}
	for j, i := range idx {
		if uni[j] == 0 {
			a.dense[i] = true
			continue
		}
		a.step[i] = uni[j]
		if losses[i] == nil {
			continue
		}
		if _, ok := groups[types[i]]; !ok {
			order = append(order, types[i])
		}
		groups[types[i]] = append(groups[types[i]], i)
	}
	for _, t := range order {
		a.scaleGroup(groups[t], losses)
	}
	return nil
}

// scaleGroup is [WAWSZ25]'s rule within one group g of same-type
// layers, each at its uniform rank: layer i's theoretical truncation loss
// there, L_i = √Residual (a Frobenius norm, as the paper's L_min), sets
// its removed fraction σ·w_i, w_i = 1/log L_i normalised to mean 1 over
// the group. The paper takes σ = R, the target ratio, which meets it on
// average over the group; here σ is the smallest scale (bisection) at
// which the group keeps at most the parameters the uniform rule gives it —
// the same σ up to rank rounding when no layer is clamped (rank ≥ 1, dense
// when kept ≥ 1), and the budget holds exactly. log L_i is floored at
// 10⁻⁶: the paper's formula has no meaning for L_i ≤ 1 (a layer nearly
// exact at rank R), which the floor cuts the most.
func (a *measuredSteps) scaleGroup(g []int, losses []*Fit) {
	w := make([]float64, len(g))
	budget := 0
	var sum float64
	for k, i := range g {
		budget += a.costs[i].factoredParams(a.step[i])
		w[k] = 1 / math.Max(math.Log(math.Sqrt(losses[i].Residual(a.step[i]))), 1e-6)
		sum += w[k]
	}
	wmin := math.Inf(1)
	for k := range w {
		w[k] *= float64(len(g)) / sum
		wmin = math.Min(wmin, w[k])
	}
	// σ = 0 keeps every layer dense, over the budget; σ = 1/min w cuts
	// every layer to rank 1, within it (the uniform ranks are ≥ 1).
	lo, hi := 0.0, 1/wmin
	for it := 0; it < 100 && hi-lo > 1e-12*hi; it++ {
		mid := (lo + hi) / 2
		if a.removed(g, w, mid) <= budget {
			hi = mid
		} else {
			lo = mid
		}
	}
	a.removed(g, w, hi)
}

// removed sets every layer g[k] to remove a fraction σ·w[k] of its dense
// parameters (kept 1 − σ·w[k], as a rank) and returns their parameter
// total.
func (a *measuredSteps) removed(g []int, w []float64, sigma float64) int {
	tot := 0
	for k, i := range g {
		c := a.costs[i]
		top := c.maxWorth()
		kept := 1 - sigma*w[k]
		r := int(math.Floor((kept*float64(c.dense) - float64(c.fixed)) / float64(c.perRank)))
		switch {
		case kept >= 1:
			r = top + 1 // dense
		case r > top:
			r = top
		case r < 1:
			r = 1
		}
		a.step[i] = r
		if r > top {
			tot += c.dense
		} else {
			tot += c.factoredParams(r)
		}
	}
	return tot
}

// matrixTypes returns each layer's matrix type, the groups of
// AllocSVDLLM2: its name with every number that stands alone replaced by
// "#" (the block index of an exported transformer's
// "/blocks.3/attn/q/MatMul"; not the 1 of "fc1"), and its shape. Unnamed
// layers (an MLP's) are typed by their shape alone, so an MLP's hidden
// layers of one width form a group.
func matrixTypes(layers []sourceLayer) []string {
	out := make([]string, len(layers))
	for j, l := range layers {
		d, d2 := l.w.Dims()
		out[j] = fmt.Sprintf("%s %d×%d", indexRuns.ReplaceAllStringFunc(l.name, func(w string) string {
			if strings.Trim(w, "0123456789") == "" {
				return "#"
			}
			return w
		}), d, d2)
	}
	return out
}

// indexRuns matches the alphanumeric words with a digit, of which
// matrixTypes replaces those of digits alone.
var indexRuns = regexp.MustCompile(`[A-Za-z0-9]*[0-9][A-Za-z0-9]*`)
