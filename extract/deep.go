package extract

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/rng"
	"github.com/relurec/relurec/nn"
)

// LayerResult is the extraction of one hidden layer of a deeper network.
type LayerResult struct {
	// Units is the number of units found, Width the number given in
	// Options.Widths (0: not given).
	Units int `json:"units"`
	Width int `json:"width,omitempty"`
	// Queries counts the rows sent to the oracle for this layer (its line
	// searches, Jacobians, hyperplane tests and orientation tests).
	Queries int `json:"queries"`
	Lines   int `json:"lines"`
	Kinks   int `json:"kinks"`
	// Deeper counts kinks whose Jacobian jump was one unit's but whose
	// critical set is not a hyperplane: units of later layers, measured
	// and set aside.
	Deeper int `json:"deeper"`
	// Noise is the oracle's rounding as the layer's search measured it:
	// the median relative second difference of straight triples on its
	// first line, in the layer's frame.
	Noise float64 `json:"noise"`
	// Flipped counts units whose orientation the column test reversed.
	Flipped int `json:"flipped"`
	// Grown counts the last layer's units no region showed, fitted to
	// what the others leave (growLast).
	Grown int `json:"grown,omitempty"`
	// Check says how the layer was checked before the next was
	// extracted, and Passed whether it passed.
	Check  string `json:"check"`
	Passed bool   `json:"passed"`
}

// cand is a unit read off a kink in deep mode, not yet tested.
type cand struct {
	u unit
	k *kink
}

// planeTestPoints is the number of random points of a candidate's
// hyperplane at which the hyperplane test looks for a kink, and
// planeTestNeed how many must show one.
const (
	planeTestPoints = 8
	planeTestNeed   = 4
)

// learnLineDeep is learnLine for the first hidden layer of a deeper
// network: a unit's slope change along a line depends on which units of
// the later layers are active, so Jacobians are not carried across known
// kinks; the pieces either side of every new kink are measured, and each
// jump that is one unit's becomes a candidate, kept only if its critical
// set is a hyperplane (planeTest): the kinks of later layers' units are
// bent surfaces, flat only within one activation region of this layer.
func (e *extractor) learnLineDeep(ctx context.Context, lr *lineResult) error {
	// Per new kink (by gap), the Jacobians either side of it.
	type sides struct{ l, r *jacJob }
	at := map[int]sides{}
	var jobs []*jacJob
	seen := map[*piece]*jacJob{}
	pieceJob := func(p *piece) *jacJob {
		if seen[p] == nil {
			seen[p] = e.pieceJob(lr, p)
			jobs = append(jobs, seen[p])
		}
		return seen[p]
	}
	for g, ki := range lr.kinkAt {
		if ki < 0 || lr.kinks[ki].unit >= 0 {
			continue
		}
		P, Q := lr.pieces[g], lr.pieces[g+1]
		if e.coarse() {
			at[g] = sides{e.nearJob(lr, lr.kinks[ki].t, P.ta), e.nearJob(lr, lr.kinks[ki].t, Q.tb)}
			continue
		}
		at[g] = sides{pieceJob(P), pieceJob(Q)}
	}
	if e.coarse() {
		// Only the kinks whose jump reaches outside the known units' span
		// can be new units of this layer: the rest (known units', later
		// layers') are left unmeasured.
		var pairs [][2]*jacJob
		var gaps []int
		for g := range lr.kinkAt {
			if s, ok := at[g]; ok {
				pairs = append(pairs, [2]*jacJob{s.l, s.r})
				gaps = append(gaps, g)
			}
		}
		outside, err := e.jumpsOutside(ctx, pairs)
		if err != nil {
			return err
		}
		for i, g := range gaps {
			if outside[i] {
				jobs = append(jobs, at[g].l, at[g].r)
			} else {
				delete(at, g)
			}
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	if err := e.measure(ctx, jobs); err != nil {
		return err
	}
	var cands []cand
	for g, ki := range lr.kinkAt {
		s, ok := at[g]
		if !ok || !s.l.ok || !s.r.ok {
			continue
		}
		rec, ok := e.readUnit(lr, lr.kinks[ki], s.l.J, s.r.J, s.l.errJ+s.r.errJ)
		if !ok {
			continue
		}
		if e.known(rec, cands) {
			e.diag.Duplicates++
			continue
		}
		if e.coarse() {
			x := make([]float64, e.d)
			lr.l.at(lr.kinks[ki].t, x)
			ok, err := e.refinePlane(ctx, &rec, x, 4*math.Abs(dotf(rec.w, lr.l.v))*lr.kinks[ki].tErr, planeRadius)
			if err != nil {
				return err
			}
			if !ok {
				e.deeper++
				continue
			}
		}
		cands = append(cands, cand{rec, lr.kinks[ki]})
	}
	ok, err := e.planeTest(ctx, cands)
	if err != nil {
		return err
	}
	for i, c := range cands {
		if !ok[i] {
			e.deeper++
			continue
		}
		c.k.unit = len(e.units)
		e.units = append(e.units, c.u)
	}
	return nil
}

// keepBest re-tests the units of deep mode at 4·planeTestPoints new
// points each and drops those with kinks at fewer than keepFrac of them
// and those whose normal lies in the span of units with more kinks; with
// the width given (Hidden), at most that many stay, those with the most
// kinks. A unit's record error is at least the largest offset of its
// kink the test measured (planeTest). A later layer's surface passes the
// first test only at points in the activation region it was found in,
// which in few dimensions can hold several of them; a unit of this layer
// is invisible only where the later layers ignore it.
func (e *extractor) keepBest(ctx context.Context) error {
	if len(e.units) == 0 {
		return nil
	}
	cands := make([]cand, len(e.units))
	for i, u := range e.units {
		cands[i] = cand{u: u}
	}
	units := e.units
	for i := range units {
		units[i].score = 0 // the re-test's points only
	}
	for rep := 0; rep < 4; rep++ {
		e.units = nil // every unit is a candidate: keep none out of distance
		_, err := e.planeTest(ctx, cands)
		e.units = units
		if err != nil {
			return err
		}
		for i := range cands {
			units[i].score += cands[i].u.score
			units[i].est = cands[i].u.est
		}
	}
	order := make([]int, len(units))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return units[order[a]].score > units[order[b]].score })
	var kept []unit
	// at[i] is unit i's index among the kept, −1 when dropped: the kinks
	// the lines attributed to it follow it.
	at := make([]int, len(units))
	for i := range at {
		at[i] = -1
	}
	var basis [][]float64
	// worst is the largest expected error of a normal in the basis: a
	// combination of them is known no better.
	worst := 0.0
	for _, i := range order {
		u := units[i]
		if float64(u.score) < keepFrac*4*planeTestPoints || e.opt.Hidden > 0 && len(kept) == e.opt.Hidden {
			break
		}
		// A later layer's unit seen where the pattern of this layer is
		// fixed has a normal in the span of this layer's units active
		// there; it shows fewer kinks than they do, so it comes after
		// them and is dropped here.
		r := append([]float64(nil), u.w...)
		projectOut(r, basis)
		n := math.Sqrt(dotf(r, r))
		if n < spanTol+30*(u.estW+worst) {
			continue
		}
		worst = math.Max(worst, u.estW)
		for j := range r {
			r[j] /= n
		}
		basis = append(basis, r)
		at[i] = len(kept)
		kept = append(kept, u)
	}
	e.deeper += len(units) - len(kept)
	e.units = kept
	for _, lr := range e.lines {
		for _, k := range lr.kinks {
			if k.unit >= 0 {
				k.unit = at[k.unit]
			}
		}
	}
	return nil
}

// spanTol is the distance (of a unit normal) below which a unit of deep
// mode lies in the span of the units kept before it.
const spanTol = 1e-6

// keepFrac is the share of the re-test's points at which a unit of deep
// mode must show its kink: a later layer's local plane, off the region it
// was found in, shows none; a unit of this layer whose later layers
// ignore it over most of its hyperplane shows few (a trained 784-64-32-10
// has one at 9 of 40).
const keepFrac = 0.1

// known reports a unit record already among the units or the candidates.
func (e *extractor) known(rec unit, cands []cand) bool {
	for _, u := range e.units {
		if sameUnit(u, rec) {
			return true
		}
	}
	for _, c := range cands {
		if sameUnit(c.u, rec) {
			return true
		}
	}
	return false
}

// planeTest tells which candidates' critical sets are hyperplanes: at
// planeTestPoints random points y of the candidate's hyperplane (inside
// the domain, away from the known units' hyperplanes) it queries f at y +
// τ·ŵ for τ ∈ {−2ε, −ε, 0, ε, 2ε}; f has a kink at y when it is straight on
// either side (second differences at rounding level, and up to what the
// hyperplane's own error moves the kink: planeOff) and bent at τ = 0.
// A kink δ from y bends the side second difference by δ/(ε−δ) of the
// centre's; a float64 record off by 1e-11 bends it by a few 1e-9 of it,
// which is above rounding (a trained 784-64-32-10 behind PyTorch's
// float64 server, whose rounding depends on the batch a query comes in:
// without the allowance the first layer missed a unit on two of three
// teachers). Behind a float64 oracle the allowance is capped at
// maxPlaneSlack and made only in the input space and only for an oracle
// whose rounding varies with the batch (Diagnostics.BatchRounding): in a
// later layer's frame, and behind a deterministic oracle, whose records
// are precise enough for the strict test, it let records through that
// cost a 784-32-16-16-10's third layer 4 – 5 times the lines (PyTorch
// init seed 1) or its last unit (seed 3).
// A candidate passes with planeTestNeed kinks (a unit of this layer can
// be invisible at a point where the later layers ignore it; a later
// layer's surface passes through such a point only by accident).
func (e *extractor) planeTest(ctx context.Context, cands []cand) ([]bool, error) {
	ok := make([]bool, len(cands))
	if len(cands) == 0 {
		return ok, nil
	}
	const nTau = 5
	taus := []float64{-2, -1, 0, 1, 2}
	X := mat.NewDense(len(cands)*planeTestPoints*nTau, e.d, nil)
	sigma := math.Sqrt(float64(e.d))
	skip := make([]bool, len(cands)*planeTestPoints)
	eps := make([]float64, len(cands)*planeTestPoints)
	// slack[i] bounds the share of the bend at y that may show beside it:
	// a kink δ ≤ off from y bends the side second difference by δ/(ε−δ)
	// of the centre's.
	slack := make([]float64, len(cands)*planeTestPoints)
	straight, bentBy := e.planeTols()
	for c, cd := range cands {
		for pt := 0; pt < planeTestPoints; pt++ {
			i := c*planeTestPoints + pt
			y, room, ok := e.planePoint(cd.u)
			if !ok {
				// No point inside: a test point that cannot pass.
				y = e.dom.center
				skip[i] = true
			}
			eps[i] = math.Min(room/4, 1e-4*sigma)
			if ok {
				off := e.planeOff(cd.u, y)
				if e.coarse() {
					eps[i] = math.Min(room/4, math.Max(eps[i], math.Max(2*off, e.planeStep(cd.u, bentBy*straight))))
					slack[i] = off / math.Max(eps[i]-off, 0)
				} else if e.dom == nil && e.diag.BatchRounding {
					slack[i] = math.Min(off/math.Max(eps[i]-off, 0), maxPlaneSlack)
				}
			}
			for k, tau := range taus {
				row := X.RawRowView(i*nTau + k)
				for j := range row {
					row[j] = y[j] + tau*eps[i]*cd.u.w[j]
				}
			}
		}
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return nil, err
	}
	e.diag.QueriesPlane += len(cands) * planeTestPoints * nTau
	p := e.o.p
	for c := range cands {
		scale := make([]float64, p)
		for r := 0; r < planeTestPoints*nTau; r++ {
			for o := 0; o < p; o++ {
				scale[o] = math.Max(scale[o], math.Abs(Y.At(c*planeTestPoints*nTau+r, o)))
			}
		}
		kinks, off := 0, 0.0
		for pt := 0; pt < planeTestPoints; pt++ {
			f := func(k, o int) float64 { return Y.At((c*planeTestPoints+pt)*nTau+k, o) }
			i := c*planeTestPoints + pt
			flat, bent := true, false
			// share is the largest bend beside y, above rounding, as a
			// share of the bend at y.
			share := 0.0
			for o := 0; o < p; o++ {
				tol := straight * (scale[o] + 1e-300)
				l2 := f(0, o) - 2*f(1, o) + f(2, o)
				r2 := f(2, o) - 2*f(3, o) + f(4, o)
				b2 := f(1, o) - 2*f(2, o) + f(3, o)
				side := math.Max(math.Abs(l2), math.Abs(r2))
				if side > tol+slack[i]*math.Abs(b2) {
					flat = false
				}
				if math.Abs(b2) > bentBy*tol {
					bent = true
					share = math.Max(share, (side-tol)/math.Abs(b2))
				}
			}
			if flat && bent && !skip[i] {
				kinks++
				off = math.Max(off, eps[i]*share/(1+share))
			}
		}
		ok[c] = kinks >= planeTestNeed
		cands[c].u.score = kinks
		if !e.coarse() {
			// The kink's measured distance from the record's hyperplane
			// bounds the record's error from below: polish re-measures
			// a unit whose error is above its tolerance.
			cands[c].u.est = math.Max(cands[c].u.est, off)
		}
	}
	return ok, nil
}

// maxPlaneSlack caps the hyperplane test's allowance for a float64
// record's error (planeOff), as a share of the bend at the test point: a
// wider allowance would let the bent surface of a later layer's unit
// pass where it crosses the test offset.
const maxPlaneSlack = 1e-3

// planeTols returns the hyperplane test's tolerances, relative to the
// largest |f| of a candidate's test points: a second difference beside
// the point at most straight counts as flat, a slope change across it
// above bentBy·straight as a kink. A float64 oracle's are fixed (10·eta,
// 100×); a coarser oracle's follow its measured rounding (noiseMed, the
// median second difference of straight triples): 30 times it, and 10×
// that across, which the test offset (planeStep) is widened to reach.
func (e *extractor) planeTols() (straight, bentBy float64) {
	if !e.coarse() {
		return 10 * e.eta, 100
	}
	return 30 * e.noiseMed, 10
}

// planeOff is how far unit u's hyperplane found may be from the true one
// at y: 4 times its expected error there, u.est + u.estW·‖y‖/√d.
func (e *extractor) planeOff(u unit, y []float64) float64 {
	return 4 * (u.est + u.estW*math.Sqrt(dotf(y, y)/float64(e.d)))
}

// planeStep is the test offset at which unit u's kink bends f by twice
// bend (relative to the last line's scale) in the output it moves most:
// u.a is its slope change along ŵ, so the bend across ±ε is |a_o|·ε.
func (e *extractor) planeStep(u unit, bend float64) float64 {
	if len(e.lines) == 0 {
		return 0
	}
	scale := e.lines[len(e.lines)-1].scale
	step := math.Inf(1)
	for o, a := range u.a {
		if a != 0 {
			step = math.Min(step, 2*bend*4*scale[o]/math.Abs(a))
		}
	}
	return step
}

// planePoint returns a random point of unit u's hyperplane inside the
// domain, the farthest from the known units' hyperplanes and the walls of
// 16 tries, and that distance (room); the test offset is at most a
// quarter of it, and at most 1e-4·σ unless the oracle's rounding or the
// unit's error needs a wider one, small, so that the surfaces of later
// layers' units rarely pass within it. Without a domain the tries are
// projections of Gaussian points; on a domain they are where the segment
// between two random points of it crosses the hyperplane (inside, the
// domain being convex), or, when no pair straddles it, where an edge of
// the orthant does. ok is false when no try lands inside the domain.
func (e *extractor) planePoint(u unit) (y []float64, room float64, ok bool) {
	bestM := math.Inf(-1)
	consider := func(x []float64) {
		if m := e.distanceAlong(x, nil); m > bestM {
			y, bestM = x, m
		}
	}
	for try := 0; try < 16; try++ {
		if e.dom == nil {
			x := make([]float64, e.d)
			for j := range x {
				x[j] = e.rng.NormFloat64()
			}
			z := dotf(u.w, x) + u.b
			for j := range x {
				x[j] -= z * u.w[j]
			}
			consider(x)
			continue
		}
		if x, ok := e.crossing(u); ok {
			consider(x)
		}
	}
	if bestM <= 0 && e.dom != nil && e.dom.halfNormal {
		for _, k := range e.rng.Perm(e.d) {
			// axisEdge·1 + t·e_k on the hyperplane.
			if u.w[k] == 0 {
				continue
			}
			t := -(axisEdge*sum(u.w) + u.b) / u.w[k]
			if t <= 0 {
				continue
			}
			x := make([]float64, e.d)
			for j := range x {
				x[j] = axisEdge
			}
			x[k] += t
			consider(x)
		}
	}
	if bestM <= 0 {
		return nil, 0, false
	}
	return y, bestM, true
}

// crossing returns where the segment between two random points of the
// domain crosses unit u's hyperplane (inside the domain, which is
// convex), trying 4 pairs; ok is false when none straddles it.
func (e *extractor) crossing(u unit) ([]float64, bool) {
	for try := 0; try < 4; try++ {
		p, q := e.dom.sample(e.rng), e.dom.sample(e.rng)
		zp, zq := dotf(u.w, p)+u.b, dotf(u.w, q)+u.b
		if zp*zq >= 0 {
			continue
		}
		a := zp / (zp - zq)
		x := make([]float64, e.d)
		for j := range x {
			x[j] = p[j] + a*(q[j]-p[j])
		}
		return x, true
	}
	return nil, false
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

// distanceAlong is how far x can move along the unit direction v, either
// way, before it reaches a known unit's hyperplane or a wall (negative
// outside the domain); v nil: the Euclidean distance to the nearest of
// them. refinePlane steps along a unit's normal, and another unit's
// normal, nearly orthogonal to it in many dimensions, puts its hyperplane
// far along that direction even when it passes near x (behind a float32
// oracle a weak unit's wider steps, 0.02 – 0.05, met the nearest of 30
// hyperplanes by Euclidean distance at almost every probe of a trained
// 784-32-16-10). The hyperplane test chooses its points by the Euclidean
// distance: by the distance along the normal, later layers' surfaces
// passed it on TestExtractThreeHiddenLayers' networks.
func (e *extractor) distanceAlong(x, v []float64) float64 {
	m := math.Inf(1)
	along := func(w []float64) float64 {
		if v == nil {
			return 1
		}
		return math.Abs(dotf(w, v))
	}
	for _, u := range e.units {
		if c := along(u.w); c > 0 {
			m = math.Min(m, math.Abs(dotf(u.w, x)+u.b)/c)
		}
	}
	for _, u := range e.walls() {
		z := dotf(u.w, x) + u.b
		if z < 0 {
			return z
		}
		if c := along(u.w); c > 0 {
			m = math.Min(m, z/c)
		}
	}
	return m
}

// newExtractor sets up the extraction of a network with d inputs (a
// stage's space) from oracle o.
func newExtractor(d int, opt Options, o *counted) *extractor {
	return &extractor{d: d, opt: opt, o: o, rng: rng.New(opt.Seed), etaFloor: 1e-13}
}

// frame is the affine map x = P·h + q from a stage's space to the
// oracle's inputs (P nil: the identity), with the stage's domain.
type frame struct {
	P   *mat.Dense
	q   []float64
	dom *domain
}

// deepRun holds the state of extractDeep.
type deepRun struct {
	d      int
	opt    Options
	root   *counted
	layers []LayerResult
	warn   []string
	diag   Diagnostics
	// Ws, bs are the hidden layers found so far, rows of unit norm, in
	// the space of the previous layer's pre-activations.
	Ws []*mat.Dense
	bs [][]float64
}

// extractDeep extracts a network with len(opt.Widths) ≥ 2 hidden layers
// layer by layer (see the package comment).
func extractDeep(ctx context.Context, oracle Oracle, d int, opt Options) (*Result, error) {
	start := time.Now()
	r := &deepRun{d: d, opt: opt, root: &counted{f: oracle, d: d}}
	if opt.MaxQueries > 0 {
		r.root.limit = opt.MaxQueries - 2*opt.CertQueries // certify's two sets
	}
	net, failed, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	for len(r.layers) < len(opt.Widths) {
		r.layers = append(r.layers, LayerResult{Width: opt.Widths[len(r.layers)], Check: "not reached"})
	}
	res := &Result{Layers: r.layers, Network: net}
	for _, l := range r.layers {
		res.Units += l.Units
		res.Lines += l.Lines
		res.Kinks += l.Kinks
	}
	tol, err := r.certify(ctx, net, res)
	if err != nil {
		return nil, err
	}
	if net != nil && failed == "" && r.complete() && (!res.Certificate.Met || coarseRounding(r.diag.Noise)) {
		// Every layer found, each to the oracle's precision through the
		// frames of the ones before: the whole network fitted at once
		// (always behind a coarse oracle, whose certificate tolerance is
		// 100 times its rounding), and certified again on the same fresh
		// queries, which the polish does not see.
		if net, err = r.polishNetwork(ctx, net); err != nil {
			return nil, err
		}
		res.Network = net
		if tol, err = r.certify(ctx, net, res); err != nil {
			return nil, err
		}
		if last := &r.layers[len(r.layers)-1]; !last.Passed && res.Certificate.Met {
			last.Passed = true
			last.Check += "; every unit of its width found, and the whole network certified after the polish"
		}
	}
	res.Queries, res.Calls, res.Outputs = r.root.queries, r.root.calls, r.root.p
	r.diag.QueriesSearch = res.Queries - r.diag.QueriesJacobian - r.diag.QueriesCert - r.diag.QueriesRefine - r.diag.QueriesPlane - r.diag.QueriesOrient
	res.Diagnostics = r.diag
	res.Warnings = r.warn
	res.Elapsed = time.Since(start)
	if !res.Certificate.Met {
		res.Warnings = append(res.Warnings, fmt.Sprintf("certificate not met: relative residual %.2e > %.0e on %d fresh queries", res.Certificate.Residual, tol, res.Certificate.Samples))
		if failed == "" {
			failed = fmt.Sprintf("extracted network's relative residual %.2e > %.0e on %d fresh queries", res.Certificate.Residual, tol, res.Certificate.Samples)
		}
	}
	if failed != "" && net == nil {
		res.Warnings = append(res.Warnings, failed)
	}
	if failed != "" && opt.Exact {
		return res, fmt.Errorf("%w: %s (units per layer: %s)", errs.ErrNotExact, failed, res.unitsText())
	}
	return res, nil
}

// complete reports that every layer passed its check, or, behind a
// coarse oracle, every layer but the last, and the last found the width
// given: its fit in its frame carries the earlier layers' float32 errors,
// which only the whole-network polish removes (a trained 784-32-16-10
// served in float32: 3.7e-4 in the frame), so the certificate after the
// polish decides.
func (r *deepRun) complete() bool {
	n := len(r.layers)
	for i, l := range r.layers {
		last := i == n-1 && coarseRounding(r.diag.Noise) && l.Width > 0 && l.Units == l.Width
		if !l.Passed && !last {
			return false
		}
	}
	return n > 0
}

// unitsText lists the units found per layer, e.g. "32, 16".
func (res *Result) unitsText() string {
	s := ""
	for i, l := range res.Layers {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(l.Units)
	}
	return s
}

// run extracts the layers in turn. It returns the network (nil when a
// layer failed its check, with the reason in failed).
func (r *deepRun) run(ctx context.Context) (net *nn.MLP, failed string, err error) {
	L := len(r.opt.Widths)
	fr := frame{}
	dim := r.d
	k := 0
	defer func() {
		// The budget running out in a test or a frame ends the run like
		// a failed layer.
		if errors.Is(err, errBudget) {
			net, err = nil, nil
			failed = fmt.Sprintf("layer %d: the query budget (MaxQueries = %d) ran out", k+1, r.opt.MaxQueries)
		}
	}()
	for ; k < L; k++ {
		if k >= 2 && k == L-1 {
			return r.lastByPatterns(ctx, k)
		}
		if k > 0 {
			if fr, err = r.frameAfter(k); err != nil {
				return nil, err.Error(), nil
			}
			dim, _ = r.Ws[k-1].Dims()
		}
		so := r.opt
		so.Hidden = r.opt.Widths[k]
		so.Seed = r.opt.Seed + uint64(k)*0x9e3779b97f4a7c15
		if p := r.opt.Progress; p != nil {
			name := fmt.Sprintf("layer %d of %d: lines", k+1, L)
			so.Progress = func(stage string, done, total int) {
				if stage == "lines" {
					stage = name
				}
				p(stage, done, total)
			}
		}
		o := &counted{f: r.root.query, d: dim}
		if fr.P == nil {
			o.f = func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) { return r.root.query(ctx, X) }
		} else {
			o.f = affineOracle(r.root, fr.P, fr.q)
		}
		e := newExtractor(dim, so, o)
		e.dom = fr.dom
		e.deep = k < L-1
		e.batched = r.diag.BatchRounding
		before := r.root.queries
		lay := LayerResult{Width: r.opt.Widths[k]}
		stop, err := e.search(ctx)
		if err != nil {
			return nil, "", err
		}
		var last *nn.Depth2
		if !e.deep {
			if last, stop, err = e.lastStage(ctx, stop); err != nil {
				return nil, "", err
			}
		}
		if stop != "" {
			r.warn = append(r.warn, fmt.Sprintf("layer %d: %s", k+1, stop))
		}
		e.diag.Noise, lay.Noise = e.noiseMed, e.noiseMed
		lay.Units, lay.Lines, lay.Deeper = len(e.units), len(e.lines), e.deeper
		for _, lr := range e.lines {
			lay.Kinks += len(lr.kinks)
		}
		r.addDiag(e.diag)
		if e.deep {
			if len(e.units) == 0 {
				lay.Check = "no unit found"
				lay.Queries = r.root.queries - before
				r.layers = append(r.layers, lay)
				return nil, fmt.Sprintf("layer %d: no unit found", k+1), nil
			}
			W := mat.NewDense(len(e.units), dim, nil)
			b := make([]float64, len(e.units))
			for i, u := range e.units {
				W.SetRow(i, u.w)
				b[i] = u.b
			}
			W, b, _ = unitRows(W, b, nil)
			r.Ws, r.bs = append(r.Ws, W), append(r.bs, b)
			flipped, msg, err := r.orient(ctx, k+1)
			if err != nil {
				return nil, "", err
			}
			lay.Flipped = flipped
			lay.Check = fmt.Sprintf("every unit's critical set is a hyperplane (kinks at %d of %d random points of it or more); orientations by the column test at %d points", planeTestNeed, planeTestPoints, orientPoints)
			lay.Passed = msg == ""
			lay.Queries = r.root.queries - before
			r.layers = append(r.layers, lay)
			if msg != "" {
				return nil, fmt.Sprintf("layer %d: %s", k+1, msg), nil
			}
			continue
		}
		lay.Check = fmt.Sprintf("the units reproduce the oracle on the searched segments (relative residual %.1e)", e.diag.LineResidual)
		lay.Passed = last != nil && e.diag.LineResidual <= e.searchTol()
		if last != nil && e.coarse() {
			lay.Check = fmt.Sprintf("the units reproduce the oracle on fresh queries of the layer's frame after a least-squares polish (relative residual %.1e)", e.diag.RefineAfter)
			lay.Passed = e.diag.RefineAfter <= e.stopTol()
			lay.Units = last.Hidden()
		}
		r.warn = append(r.warn, prefixed(fmt.Sprintf("layer %d: ", k+1), e.warn)...)
		lay.Queries = r.root.queries - before
		r.layers = append(r.layers, lay)
		if last == nil {
			return nil, fmt.Sprintf("layer %d: no unit found", k+1), nil
		}
		W, b, A := unitRows(last.W, last.B, last.A)
		return r.network(W, b, A, last.C), "", nil
	}
	return nil, "", nil
}

// lastStage assembles the last stage of a deeper network from the units
// its search found and, behind a coarse oracle, polishes it by least
// squares on fresh queries of its frame (refineIfRoom, as for one hidden
// layer; the polish drops records beyond the width given, and its fit is
// the stage's check). It returns the stage's network and the search's
// stop warning.
//
// A polish that leaves fewer units than the width given, and a fit on
// its frame above the certificate's tolerance, dropped a record that was
// no unit (the Jacobian jump of a kink its rounding left unresolved) or
// found none for a unit: a unit is missing. A frame magnifies the
// oracle's rounding, and a unit active on few of its points bends few of
// its lines above it, so the search goes on, to moreLines times its
// lines, and the stage is assembled and polished again
// (TestLastStageSearchesOnWhenPolishDropsARecord). Fewer units that fit
// the frame are all the frame shows: a unit switching nowhere in it is
// left to the whole-network polish and the certificate.
func (e *extractor) lastStage(ctx context.Context, stop string) (*nn.Depth2, string, error) {
	for {
		last, err := e.assemble(true)
		if err != nil || last == nil || !e.coarse() {
			return last, stop, err
		}
		if e.refined != nil {
			last = e.refined
		}
		if last, err = e.refineIfRoom(ctx, last, false); err != nil {
			return nil, "", err
		}
		// Options.MaxLines given (or set by the first extension) is kept.
		if last.Hidden() >= e.opt.Hidden || e.diag.RefineAfter <= e.stopTol() || e.opt.MaxLines > 0 || e.outOfBudget {
			return last, stop, nil
		}
		e.opt.MaxLines = moreLines * e.maxLines()
		e.warn = append(e.warn, fmt.Sprintf("the polish left %d of %d units after %d lines: the search went on, to %d lines", last.Hidden(), e.opt.Hidden, len(e.lines), e.opt.MaxLines))
		e.refined = nil // a trial fit of the search so far is superseded
		if stop, err = e.search(ctx); err != nil {
			return nil, "", err
		}
	}
}

// moreLines is how many times its lines a deeper network's last stage
// searches when its polish shows a unit missing (lastStage).
const moreLines = 3

// lastByPatterns ends run with the last hidden layer (stage k ≥ 2)
// extracted region by region (byPatterns).
func (r *deepRun) lastByPatterns(ctx context.Context, k int) (*nn.MLP, string, error) {
	before := r.root.queries
	lay := LayerResult{Width: r.opt.Widths[k]}
	W, b, A, c, failed, err := r.byPatterns(ctx, k, &lay)
	if err != nil {
		return nil, "", err
	}
	lay.Check = fmt.Sprintf("rows unified over the regions of layer %d's frequent activation patterns; orientations by least squares on fresh queries", k) + lay.Check
	lay.Passed = lay.Passed && failed == "" && W != nil
	lay.Queries = r.root.queries - before
	r.layers = append(r.layers, lay)
	if W == nil {
		return nil, failed, nil
	}
	return r.network(W, b, A, c), failed, nil
}

// prefixed returns the messages with a prefix.
func prefixed(prefix string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = prefix + m
	}
	return out
}

// addDiag adds a stage's query counts and diagnostics to the run's.
func (r *deepRun) addDiag(g Diagnostics) {
	d := &r.diag
	d.QueriesJacobian += g.QueriesJacobian
	d.QueriesRefine += g.QueriesRefine
	d.QueriesPlane += g.QueriesPlane
	d.Jacobians += g.Jacobians
	d.JacobianRetries += g.JacobianRetries
	d.KnownKinks += g.KnownKinks
	d.Duplicates += g.Duplicates
	d.Rejected += g.Rejected
	d.Polished += g.Polished
	d.PolishRejected += g.PolishRejected
	d.Unresolved += g.Unresolved
	d.Noise = math.Max(d.Noise, g.Noise)
	d.BatchRounding = d.BatchRounding || g.BatchRounding
	d.MaxRank2 = math.Max(d.MaxRank2, g.MaxRank2)
	d.SignResidual = g.SignResidual
	d.LineResidual = g.LineResidual
}

// network assembles the hidden layers found and the last stage's output
// layer into an MLP.
func (r *deepRun) network(W *mat.Dense, b []float64, A *mat.Dense, c []float64) *nn.MLP {
	net := &nn.MLP{}
	for k := range r.Ws {
		net.Layers = append(net.Layers, nn.Layer{Weight: mat.DenseCopyOf(r.Ws[k]), Bias: append([]float64(nil), r.bs[k]...), Act: nn.ReLU})
	}
	net.Layers = append(net.Layers,
		nn.Layer{Weight: mat.DenseCopyOf(W), Bias: append([]float64(nil), b...), Act: nn.ReLU},
		nn.Layer{Weight: mat.DenseCopyOf(A), Bias: append([]float64(nil), c...), Act: nn.Identity})
	return net
}

// certify sets res's certificate: net's relative residual on CertQueries
// fresh standard Gaussian inputs, or on up to CertQueries more inputs
// (coverRows) where the weights between hidden units those leave unseen
// act, whichever is larger. It returns the tolerance.
func (r *deepRun) certify(ctx context.Context, net *nn.MLP, res *Result) (float64, error) {
	opt := r.opt
	if opt.Progress != nil {
		opt.Progress("certify", 0, opt.CertQueries)
	}
	r.root.limit = 0
	X, Y, err := r.gaussianQueries(ctx, opt.CertQueries, 0x5bd1e995)
	if err != nil {
		return 0, err
	}
	r.diag.QueriesCert += opt.CertQueries
	tol := opt.CertTol
	if tol == 0 {
		tol = math.Max(certify.DefaultTol(certify.Float64Roundoff), 100*r.oracleNoise())
	}
	if net == nil {
		res.Certificate = certify.New(math.Inf(1), tol, opt.CertQueries)
		return tol, nil
	}
	resid := certify.RelResidual(Y, net.Forward(X))
	n := opt.CertQueries
	if T := coverRows(net, 1, X, r.opt.Seed^0x5bd1e995, opt.CertQueries); T != nil {
		YT, err := r.root.query(ctx, T)
		if err != nil {
			return 0, err
		}
		t, _ := T.Dims()
		r.diag.QueriesCert += t
		n += t
		resid = math.Max(resid, certify.RelResidual(YT, net.Forward(T)))
	}
	res.Certificate = certify.New(resid, tol, n)
	return tol, nil
}

// oracleNoise is the oracle's rounding as the first layer's search
// measured it, on the inputs themselves: the certificate's queries are
// answered with that rounding. A later layer's frame reads the oracle
// through an affine map whose inputs the oracle rounds again (a 784-32-16-10
// served in float32: 2.1e-7 on the inputs, 3.6e-6 in the second layer's
// frame), which would loosen the certificate's tolerance as many times.
func (r *deepRun) oracleNoise() float64 {
	if len(r.layers) == 0 {
		return r.diag.Noise
	}
	return r.layers[0].Noise
}

// orientPoints is the number of points of the column test.
const orientPoints = 8

// orient resolves the orientations of hidden layer n (1-based), found
// with unit normals of arbitrary sign, by the column test: in the frame
// where layer n's units are taken as active, a unit found with the wrong
// orientation is inactive at every such point (its true pre-activation is
// −h_i < 0), so f does not move with h_i there (along the direction of
// the first layer's space that changes h_i alone, a column of M⁺ for the
// composite h = M·h₁ + β),
// while a unit found the right way round moves f unless the later layers
// ignore it at that point. So a unit whose column is non-zero at one
// point is confirmed; the others are flipped and tested again at new
// points, up to orientRounds rounds. A unit silent in every round fails
// the layer's check (msg). It returns the number of units left flipped.
func (r *deepRun) orient(ctx context.Context, n int) (flipped int, msg string, err error) {
	if n >= 2 {
		return r.orientEach(ctx, n)
	}
	W, b := r.Ws[n-1], r.bs[n-1]
	m, _ := W.Dims()
	rng := rng.New(r.opt.Seed + uint64(n) + 77)
	confirmed := make([]bool, m)
	flip := make([]bool, m)
	for round := 0; round < orientRounds; round++ {
		fr, err := r.frameAfter(n)
		if err != nil {
			return flipped, err.Error(), nil
		}
		silent, err := r.silentColumns(ctx, fr, identity(m), rng)
		if err != nil {
			return flipped, "", err
		}
		left := 0
		for i, s := range silent {
			if confirmed[i] {
				continue
			}
			if !s {
				confirmed[i] = true
				continue
			}
			left++
			row := W.RawRowView(i)
			for j := range row {
				row[j] = -row[j]
			}
			b[i] = -b[i]
			flip[i] = !flip[i]
		}
		if left == 0 {
			break
		}
	}
	var bad []int
	for i := range flip {
		if flip[i] {
			flipped++
		}
		if !confirmed[i] {
			bad = append(bad, i)
		}
	}
	if len(bad) > 0 {
		return flipped, fmt.Sprintf("%d units silent at every test point in either orientation (units %v)", len(bad), bad), nil
	}
	return flipped, "", nil
}

// orientEach is orient for a layer n ≥ 2, unit by unit: the region where
// every unit of layers 1…n is active (by the orientations being tested)
// can be empty while some are wrong, so unit i is tested where layers
// 1…n−1 and unit i alone are active: there, moving along the direction
// that changes unit i's pre-activation alone moves f when the orientation
// is right (unless the later layers ignore it) and never when it is
// wrong. A unit whose region is empty in one orientation takes the other.
func (r *deepRun) orientEach(ctx context.Context, n int) (flipped int, msg string, err error) {
	W, b := r.Ws[n-1], r.bs[n-1]
	m, _ := W.Dims()
	base, err := r.frameAfter(n - 1)
	if err != nil {
		return 0, err.Error(), nil
	}
	rng := rng.New(r.opt.Seed + uint64(n) + 77)
	D, err := pinv(W)
	if err != nil {
		return 0, err.Error(), nil
	}
	var bad []int
	for i := 0; i < m; i++ {
		d := mat.Col(nil, i, D)
		confirmed, flip := false, false
		for round := 0; round < orientRounds && !confirmed; round++ {
			dom := &domain{walls: append(append([]unit(nil), base.dom.walls...), normWall(W.RawRowView(i), b[i])), center: make([]float64, len(d))}
			center, t, lerr := activeCenter(dom.walls, len(d))
			if lerr == nil && t > 0 {
				dom.center, dom.radius, dom.cur = center, t, append([]float64(nil), center...)
				moving, err := r.moves(ctx, base, dom, d, rng)
				if err != nil {
					return flipped, "", err
				}
				if moving {
					confirmed = true
					continue
				}
			}
			row := W.RawRowView(i)
			for j := range row {
				row[j] = -row[j]
			}
			b[i] = -b[i]
			flip = !flip
		}
		if flip {
			flipped++
		}
		if !confirmed {
			bad = append(bad, i)
		}
	}
	if len(bad) > 0 {
		return flipped, fmt.Sprintf("%d units silent at every test point in either orientation (units %v)", len(bad), bad), nil
	}
	return flipped, "", nil
}

// moves reports whether f, seen through frame fr, moves along direction d
// at one of orientPoints random points of dom (forward differences, step
// 1e-2·min(margin, 1)/‖d‖, against rounding: 1e-12 of |f|).
func (r *deepRun) moves(ctx context.Context, fr frame, dom *domain, d []float64, rng *rand.Rand) (bool, error) {
	dim := len(d)
	H := mat.NewDense(2*orientPoints, dim, nil)
	nd := math.Max(1, math.Sqrt(dotf(d, d)))
	for t := 0; t < orientPoints; t++ {
		h := dom.sample(rng)
		step := 1e-2 * math.Min(math.Max(dom.margin(h), 1e-6), 1) / nd
		H.SetRow(2*t, h)
		row := H.RawRowView(2*t + 1)
		copy(row, h)
		for j := range row {
			row[j] += step * d[j]
		}
	}
	Y, err := affineOracle(r.root, fr.P, fr.q)(ctx, H)
	if err != nil {
		return false, err
	}
	r.diag.QueriesOrient += 2 * orientPoints
	for t := 0; t < orientPoints; t++ {
		f0, f1 := Y.RawRowView(2*t), Y.RawRowView(2*t+1)
		diff := 0.0
		for o := range f0 {
			diff += (f1[o] - f0[o]) * (f1[o] - f0[o])
		}
		if math.Sqrt(diff) > r.still()*math.Sqrt(dotf(f0, f0)) {
			return true, nil
		}
	}
	return false, nil
}

// still is the relative change of f below which the orientation tests
// take f for unmoved: 1e-12, or 30 times the oracle's measured rounding
// when it is coarser (float32).
func (r *deepRun) still() float64 {
	return math.Max(1e-12, 30*r.diag.Noise)
}

// orientRounds caps the rounds of the column test.
const orientRounds = 8

// silentColumns measures, at orientPoints random points h of frame fr's
// domain, the forward differences of f along each column of D (step
// 1e-2·min(margin, 1)/‖d‖), and reports the columns whose difference is
// zero (below 1e-9 of the largest and 1e-12 of |f|) at every point.
func (r *deepRun) silentColumns(ctx context.Context, fr frame, D *mat.Dense, rng *rand.Rand) ([]bool, error) {
	dim, m := D.Dims()
	rows := m + 1
	H := mat.NewDense(orientPoints*rows, dim, nil)
	for t := 0; t < orientPoints; t++ {
		h := fr.dom.sample(rng)
		if fr.dom.halfNormal {
			for i := range h {
				h[i] += 0.1 // away from the faces: steps well above rounding
			}
			if fr.dom.margin(h) <= 0 {
				for i := range h {
					h[i] -= 0.1
				}
			}
		}
		for i := 0; i < rows; i++ {
			row := H.RawRowView(t*rows + i)
			copy(row, h)
			if i == 0 {
				continue
			}
			d := mat.Col(nil, i-1, D)
			step := 1e-2 * math.Min(math.Max(fr.dom.margin(h), 1e-6), 1) / math.Max(1, math.Sqrt(dotf(d, d)))
			for j := range row {
				row[j] += step * d[j]
			}
		}
	}
	Y, err := affineOracle(r.root, fr.P, fr.q)(ctx, H)
	if err != nil {
		return nil, err
	}
	r.diag.QueriesOrient += orientPoints * rows
	_, p := Y.Dims()
	silent := make([]bool, m)
	for i := range silent {
		silent[i] = true
	}
	for t := 0; t < orientPoints; t++ {
		f0 := Y.RawRowView(t * rows)
		norms := make([]float64, m)
		top := 0.0
		for i := 0; i < m; i++ {
			fi := Y.RawRowView(t*rows + 1 + i)
			s := 0.0
			for o := 0; o < p; o++ {
				s += (fi[o] - f0[o]) * (fi[o] - f0[o])
			}
			norms[i] = math.Sqrt(s)
			top = math.Max(top, norms[i])
		}
		// A silent column holds rounding only: relative to f, not only to
		// the other columns (which can be rounding too, where the later
		// layers are all inactive).
		floor := r.still() * math.Sqrt(dotf(f0, f0))
		for i := range norms {
			if norms[i] > math.Max(1e-9, r.still())*top && norms[i] > floor {
				silent[i] = false
			}
		}
	}
	return silent, nil
}

// frameAfter is the frame in which every unit of layers 1…n (n ≥ 1, as
// found so far) is active, in the space of layer n's pre-activations z_n:
// x = P·z_n + q, with the domain z_n > 0 (the orthant) cut by the walls
// that keep the earlier layers active. Layer 1's rows are independent
// (m₁ ≤ d), so x = W₁⁺·(z₁ − b₁) reaches every z₁ and the orthant is the
// whole domain. For n ≥ 2 the frame of layer n−1 is entered through the
// lift z_{n−1} = W_n⁺·(z_n − b_n) + ν, which gives layer n the
// pre-activations z_n (W_n's rows are independent, m_n ≤ m_{n−1}) for any
// ν in the null space of W_n; that frame's walls become walls in z_n,
// and ν is chosen by linear programming to keep them farthest from the
// orthant's edges up to liftReach (liftFrame, liftOffset). On the domain
// every layer up to n is active, so f is a function of z_n there and
// layer n+1's units are hyperplanes in z_n with their weight rows as
// normals: a whole row is read at once, over every unit of layer n,
// wherever a unit of layer n+1 switches inside the orthant, which the
// orthant's edges cross (axisLine).
func (r *deepRun) frameAfter(n int) (frame, error) {
	if n >= 2 {
		return r.liftFrame(n, nil)
	}
	return r.firstFrame(nil)
}

// firstFrame is the frame of layer 1 in which its units in first (nil:
// all) are active and the others inactive: x = W₁⁺·(σ∘u − b₁) on the
// orthant u > 0, with σ_i = 1 for the active units and −1 for the
// others, so that z₁ = σ∘u and layer 1's outputs are u on the active
// units and 0 on the others.
func (r *deepRun) firstFrame(first []int) (frame, error) {
	W, b := r.Ws[0], r.bs[0]
	m, _ := W.Dims()
	Wp, err := pinv(W)
	if err != nil {
		return frame{}, fmt.Errorf("layer 1's rows are linearly dependent (%v): it cannot be inverted on its active region", err)
	}
	var Pb mat.VecDense
	Pb.MulVec(Wp, mat.NewVecDense(m, b))
	q := make([]float64, Pb.Len())
	for j := range q {
		q[j] = -Pb.AtVec(j)
	}
	if first != nil {
		d, _ := Wp.Dims()
		for i, on := range activeSet(first, m) {
			for j := 0; j < d && !on; j++ {
				Wp.Set(j, i, -Wp.At(j, i))
			}
		}
	}
	return frame{P: Wp, q: q, dom: orthant(m)}, nil
}

// activeSet returns the units of act as a mask over m.
func activeSet(act []int, m int) []bool {
	on := make([]bool, m)
	for _, i := range act {
		on[i] = true
	}
	return on
}

// liftFrame returns the frame of layer n ≥ 2 in which the units of
// pattern act (nil: all) are active and the others inactive, the earlier
// layers all active: in the coordinates z_S of the active units'
// pre-activations, entered from frameAfter(n−1) through the lift
// z_{n−1} = W_S⁺·(z_S − b_S) + ν (liftOffset), with walls for the
// previous frame's and for the inactive units.
func (r *deepRun) liftFrame(n int, act []int) (frame, error) {
	return r.regionFrame(n, region{act: act})
}

// region is an activation pattern of the layers found: the active units
// of layer 1 (first) and of the last one searched (act), nil for all.
type region struct{ first, act []int }

// regionFrame is liftFrame with layer 1's units outside rg.first
// inactive: the lift into layer 2 starts from firstFrame(rg.first), where
// layer 2's pre-activations are W₂ with those units' columns zeroed,
// applied to u.
func (r *deepRun) regionFrame(n int, rg region) (frame, error) {
	W, b := r.Ws[n-1], r.bs[n-1]
	m, _ := W.Dims()
	var prev frame
	var err error
	if n == 2 {
		prev, err = r.firstFrame(rg.first)
		if rg.first != nil {
			m1, _ := r.Ws[0].Dims()
			W = mat.DenseCopyOf(W)
			for i, on := range activeSet(rg.first, m1) {
				for j := 0; j < m && !on; j++ {
					W.Set(j, i, 0)
				}
			}
		}
	} else {
		prev, err = r.regionFrame(n-1, region{first: rg.first})
	}
	if err != nil {
		return frame{}, err
	}
	walls := append([]unit(nil), prev.dom.walls...)
	if act := rg.act; act != nil {
		on := activeSet(act, m)
		for i := 0; i < m; i++ {
			if !on[i] {
				walls = append(walls, negWall(W.RawRowView(i), b[i]))
			}
		}
		W, b = rowsOf(W, act), pick(b, act)
	}
	Wp, err := pinv(W)
	if err != nil {
		return frame{}, fmt.Errorf("layer %d's rows are linearly dependent (%v): it cannot be inverted on its active region", n, err)
	}
	u0, center, err := liftOffset(W, Wp, b, walls)
	if err != nil {
		return frame{}, fmt.Errorf("no point found where every unit of layers 1–%d is active (%v)", n, err)
	}
	return lifted(prev, walls, Wp, u0, center), nil
}

// negWall is the wall −(w·x + b) > 0 of an inactive unit (w of unit norm).
func negWall(w []float64, b float64) unit {
	u := unit{w: make([]float64, len(w)), b: -b}
	for j := range w {
		u.w[j] = -w[j]
		u.winf = math.Max(u.winf, math.Abs(w[j]))
	}
	return u
}

// rowsOf returns the rows idx of W.
func rowsOf(W *mat.Dense, idx []int) *mat.Dense {
	_, c := W.Dims()
	out := mat.NewDense(len(idx), c, nil)
	for r, i := range idx {
		out.SetRow(r, W.RawRowView(i))
	}
	return out
}

// pick returns x's entries idx.
func pick(x []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for r, i := range idx {
		out[r] = x[i]
	}
	return out
}

// lifted is the frame entered from the previous frame prev through the
// lift z_{n−1} = W⁺·z + u0: x = P_{n−1}·(W⁺·z + u0) + q_{n−1}, the orthant
// of z cut by the walls (over z_{n−1}), with centre center.
func lifted(prev frame, walls []unit, Wp *mat.Dense, u0, center []float64) frame {
	_, m := Wp.Dims()
	var P mat.Dense
	P.Mul(prev.P, Wp)
	var Pu mat.VecDense
	Pu.MulVec(prev.P, mat.NewVecDense(len(u0), u0))
	q := make([]float64, len(prev.q))
	for j := range q {
		q[j] = prev.q[j] + Pu.AtVec(j)
	}
	dom := orthant(m)
	for _, a := range walls {
		// a·(W⁺·z + u0) + β > 0.
		g := make([]float64, m)
		for k := range g {
			g[k] = dotCol(a.w, Wp, k)
		}
		if dotf(g, g) == 0 {
			continue // a wall z_n does not move: kept positive by u0
		}
		dom.walls = append(dom.walls, normWall(g, dotf(a.w, u0)+a.b))
	}
	dom.extra = true
	dom.center, dom.cur = center, append([]float64(nil), center...)
	return frame{P: &P, q: q, dom: dom}
}

// nullProj returns Π = I − W⁺·W, the projection on W's null space.
func nullProj(W, Wp *mat.Dense) *mat.Dense {
	_, dim := W.Dims()
	var Pi mat.Dense
	Pi.Mul(Wp, W)
	Pi.Scale(-1, &Pi)
	for i := 0; i < dim; i++ {
		Pi.Set(i, i, Pi.At(i, i)+1)
	}
	return &Pi
}

// liftReach is how far along the orthant's edges (in units of the
// layer's pre-activations) the lift keeps the earlier layers active when
// it can, liftBox bounds the coordinates of its base point, and liftLean
// is the linear programs' cost of that point's size: far points reach
// farther but are larger inputs, where f and its rounding are larger.
const (
	liftReach = 10
	liftBox   = 1e3
	liftLean  = 1e-6
)

// liftOffset returns u0 = Π·z* − W⁺·b for the lift z_{n−1} = W⁺·z_n + u0
// (Π = I − W⁺·W, the projection on W's null space) into the previous
// frame, whose walls are given. Two linear programs choose the base
// point z* ≥ 0: the first finds the point z_c of the previous frame
// farthest (margin t_c) from its walls and from layer n's hyperplanes,
// where every unit of layers 1…n is active; the second maximizes the
// smallest margin of the previous frame's walls over the orthant's edges
// {t·e_k : 0 ≤ t ≤ liftReach} of z_n (in units of z_n: the wall's value
// divided by ‖a·W⁺‖), keeping z_c's image W·z_c + b inside with margin
// t_c/2. When the earlier layers cannot be kept active along the edges,
// the walls cut them, and the domain says where. It returns u0 and the
// image of z_c, a point of the domain.
func liftOffset(W, Wp *mat.Dense, b []float64, walls []unit) (u0, center []float64, err error) {
	m, dim := W.Dims()
	rowWalls := append([]unit(nil), walls...)
	for i := 0; i < m; i++ {
		rowWalls = append(rowWalls, unit{w: W.RawRowView(i), b: b[i]})
	}
	zc, tc, err := marginLP{walls: rowWalls, n: dim, box: liftBox, tmax: centerBox, lean: liftLean}.solve()
	if err != nil {
		return nil, nil, err
	}
	if tc <= 0 {
		return nil, nil, fmt.Errorf("margin %.1e", tc)
	}
	var c mat.VecDense
	c.MulVec(W, mat.NewVecDense(dim, zc))
	center = make([]float64, m)
	for i := range center {
		center[i] = c.AtVec(i) + b[i]
	}
	Pi := nullProj(W, Wp)
	var Wpb mat.VecDense
	Wpb.MulVec(Wp, mat.NewVecDense(m, b))
	var edges, keep []unit
	for _, a := range walls {
		g := make([]float64, m)
		low := 0.0
		for k := range g {
			g[k] = dotCol(a.w, Wp, k)
			low = math.Min(low, liftReach*g[k])
		}
		gn := math.Sqrt(dotf(g, g))
		if gn == 0 {
			gn = 1
		}
		w := make([]float64, dim)
		for j := range w {
			w[j] = dotCol(a.w, Pi, j)
		}
		off := a.b - dotf(a.w, Wpb.RawVector().Data)
		ew := make([]float64, dim)
		for j := range ew {
			ew[j] = w[j] / gn
		}
		edges = append(edges, unit{w: ew, b: (off + low) / gn})
		// a·(Π·z* + W⁺·(c − b)) + β ≥ t_c/2.
		keep = append(keep, unit{w: w, b: off + dotf(g, center) - tc/2})
	}
	zs, _, err := marginLP{walls: edges, hard: keep, n: dim, box: liftBox, tmax: 1, lean: liftLean}.solve()
	if err != nil {
		return nil, nil, err
	}
	u0 = make([]float64, dim)
	for j := range u0 {
		u0[j] = dotCol(zs, Pi, j) - Wpb.AtVec(j)
	}
	return u0, center, nil
}

// dotCol is a·M_{:,k}.
func dotCol(a []float64, M *mat.Dense, k int) float64 {
	s := 0.0
	for i, v := range a {
		s += v * M.At(i, k)
	}
	return s
}

// unitRows scales the rows of units found in a frame (rows W over the
// previous layer's pre-activations, offsets b, output columns A when
// given) to unit norm, b and A's columns with them.
func unitRows(W *mat.Dense, b []float64, A *mat.Dense) (*mat.Dense, []float64, *mat.Dense) {
	U := mat.DenseCopyOf(W)
	nb := append([]float64(nil), b...)
	var nA *mat.Dense
	if A != nil {
		nA = mat.DenseCopyOf(A)
	}
	m, _ := U.Dims()
	for i := 0; i < m; i++ {
		row := U.RawRowView(i)
		s := math.Sqrt(dotf(row, row))
		nb[i] /= s
		for j := range row {
			row[j] /= s
		}
		if nA != nil {
			p, _ := nA.Dims()
			for o := 0; o < p; o++ {
				nA.Set(o, i, nA.At(o, i)*s)
			}
		}
	}
	return U, nb, nA
}

// centerBox bounds the coordinates of activeCenter's point and its
// margin.
const centerBox = 4

// activeCenter returns the point h ≥ 0 (n coordinates, each at most
// centerBox) where the smallest of the walls is largest, and that margin
// (at most centerBox; negative when no point has every wall positive).
func activeCenter(walls []unit, n int) ([]float64, float64, error) {
	return marginLP{walls: walls, n: n, box: centerBox, tmax: centerBox}.solve()
}

// marginLP is the linear program max t + cost·h − lean·Σh s.t. wall_i(h)
// ≥ t for the walls, hard_j(h) ≥ 0, 0 ≤ h ≤ box, t ≤ tmax (t free in
// sign; cost nil: zero).
type marginLP struct {
	walls, hard []unit
	n           int
	box, tmax   float64
	lean        float64
	cost        []float64
}

// solve returns the optimal h and t, solved in standard form (t = t₊ −
// t₋, slacks for every inequality) by the simplex method.
func (p marginLP) solve() ([]float64, float64, error) {
	if len(p.walls) == 0 {
		// t bounded by a wall 0 ≥ t: every column of the program is used.
		p.walls = []unit{{w: make([]float64, p.n)}}
	}
	n, nw, nh := p.n, len(p.walls), len(p.hard)
	// Variables: h (n), t₊, t₋, slacks of the walls (nw), of the hard
	// constraints (nh), of the box (n), of t₊'s bound (1).
	cols := n + 2 + nw + nh + n + 1
	rows := nw + nh + n + 1
	A := mat.NewDense(rows, cols, nil)
	rhs := make([]float64, rows)
	r := 0
	for i, u := range append(append([]unit(nil), p.walls...), p.hard...) {
		for j := 0; j < n; j++ {
			A.Set(r, j, u.w[j])
		}
		if i < nw {
			A.Set(r, n, -1)
			A.Set(r, n+1, 1)
		}
		A.Set(r, n+2+i, -1)
		rhs[r] = -u.b
		r++
	}
	for j := 0; j < n; j++ {
		A.Set(r, j, 1)
		A.Set(r, n+2+nw+nh+j, 1)
		rhs[r] = p.box
		r++
	}
	A.Set(r, n, 1)
	A.Set(r, cols-1, 1)
	rhs[r] = p.tmax
	// Standard form wants b ≥ 0: negate rows with a negative right side.
	for i := range rhs {
		if rhs[i] < 0 {
			rhs[i] = -rhs[i]
			row := A.RawRowView(i)
			for j := range row {
				row[j] = -row[j]
			}
		}
	}
	c := make([]float64, cols)
	for j := 0; j < n; j++ {
		c[j] = p.lean
		if p.cost != nil {
			c[j] -= p.cost[j]
		}
	}
	c[n], c[n+1] = -1, 1
	_, x, err := lp.Simplex(c, A, rhs, 1e-10, nil)
	if err != nil {
		return nil, 0, err
	}
	return append([]float64(nil), x[:n]...), x[n] - x[n+1], nil
}

// normWall returns the wall w·x + b > 0 scaled to a unit normal.
func normWall(w []float64, b float64) unit {
	n := math.Sqrt(dotf(w, w))
	u := unit{w: make([]float64, len(w)), b: b / n}
	for j := range w {
		u.w[j] = w[j] / n
		u.winf = math.Max(u.winf, math.Abs(u.w[j]))
	}
	return u
}

// identity returns the n×n identity matrix.
func identity(n int) *mat.Dense {
	I := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		I.Set(i, i, 1)
	}
	return I
}

// pinv returns the pseudo-inverse Wᵀ(W·Wᵀ)⁻¹ of a full-row-rank W.
func pinv(W *mat.Dense) (*mat.Dense, error) {
	m, n := W.Dims()
	if m > n {
		return nil, fmt.Errorf("%d rows in %d dimensions", m, n)
	}
	var G mat.SymDense
	G.SymOuterK(1, W)
	var ch mat.Cholesky
	if !ch.Factorize(&G) {
		return nil, errors.New("singular Gram matrix")
	}
	var X mat.Dense
	if err := ch.SolveTo(&X, W); err != nil {
		return nil, err
	}
	return mat.DenseCopyOf(X.T()), nil
}
